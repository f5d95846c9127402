package metadata

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/internal/topicconfig"
)

// ApplyConfigOps returns the config set that results from applying ops to current, as
// AlterConfigs (incremental false: ops are the whole new set) and
// IncrementalAlterConfigs (set, delete, append and subtract on list configs) do. The
// result is validated; current is not modified.
func ApplyConfigOps(current map[string]string, ops []ConfigOp, incremental bool) (map[string]string, error) {
	next := map[string]string{}
	if incremental {
		next = maps.Clone(current)
		if next == nil {
			next = map[string]string{}
		}
	}
	seen := map[string]bool{}
	for _, op := range ops {
		if seen[op.Name] {
			return nil, fmt.Errorf("%w: config %s appears twice", kerr.InvalidRequest, op.Name)
		}
		seen[op.Name] = true
		d, ok := topicconfig.Lookup(op.Name)
		if !ok {
			return nil, fmt.Errorf("%w: unknown topic config %q", kerr.InvalidConfig, op.Name)
		}
		value := ""
		if op.Value != nil {
			value = *op.Value
		}
		switch op.Op {
		case ConfigSet:
			next[op.Name] = value
		case ConfigDelete:
			delete(next, op.Name)
		case ConfigAppend, ConfigSubtract:
			if d.Type != topicconfig.TypeList {
				return nil, fmt.Errorf("%w: %s is not a list config; append and subtract need one", kerr.InvalidConfig, op.Name)
			}
			cur, ok := next[op.Name]
			if !ok {
				cur = d.Default
			}
			items := splitList(cur)
			for _, v := range splitList(value) {
				has := slices.Contains(items, v)
				if op.Op == ConfigAppend && !has {
					items = append(items, v)
				} else if op.Op == ConfigSubtract && has {
					items = slices.DeleteFunc(items, func(x string) bool { return x == v })
				}
			}
			next[op.Name] = strings.Join(items, ",")
		default:
			return nil, fmt.Errorf("%w: config operation %d", kerr.InvalidRequest, op.Op)
		}
	}
	if err := topicconfig.Validate(next); err != nil {
		return nil, err
	}
	return next, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
