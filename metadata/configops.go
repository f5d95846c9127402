package metadata

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/metadata/topicconfig"
)

// ApplyConfigOps computes a topic's new configs, as AlterConfigs (incremental false:
// the ops are the whole new set and every config they do not name reverts to its
// default) and IncrementalAlterConfigs (set, delete, append and subtract on list
// configs) do. current is not modified. The result is not validated: callers check it
// with topicconfig.Validate where they decide (the controller only on its leader, so
// that replaying an old log never fails against a newer table).
func ApplyConfigOps(current map[string]string, ops []ConfigOp, incremental bool) (map[string]string, error) {
	seen := map[string]bool{}
	for _, op := range ops {
		if seen[op.Name] {
			return nil, fmt.Errorf("%w: config %q is named more than once", kerr.InvalidRequest, op.Name)
		}
		seen[op.Name] = true
	}
	if !incremental {
		out := map[string]string{}
		for _, op := range ops {
			if op.Value == nil {
				return nil, fmt.Errorf("%w: null value for config %q", kerr.InvalidRequest, op.Name)
			}
			out[op.Name] = *op.Value
		}
		return out, nil
	}
	out := maps.Clone(current)
	if out == nil {
		out = map[string]string{}
	}
	for _, op := range ops {
		switch op.Op {
		case ConfigSet:
			if op.Value == nil {
				return nil, fmt.Errorf("%w: null value not supported for config %q", kerr.InvalidRequest, op.Name)
			}
			out[op.Name] = *op.Value
		case ConfigDelete:
			// Refused as a SET of the same name is: a typo would otherwise "succeed"
			// and leave the config the user meant to reset as it was.
			if _, ok := topicconfig.Lookup(op.Name); !ok {
				return nil, fmt.Errorf("%w: unknown topic config %q", kerr.InvalidConfig, op.Name)
			}
			delete(out, op.Name)
		case ConfigAppend, ConfigSubtract:
			def, ok := topicconfig.Lookup(op.Name)
			if !ok {
				return nil, fmt.Errorf("%w: unknown topic config %q", kerr.InvalidConfig, op.Name)
			}
			if def.Type != topicconfig.TypeList {
				return nil, fmt.Errorf("%w: config %q is not a list: APPEND and SUBTRACT do not apply", kerr.InvalidConfig, op.Name)
			}
			if op.Value == nil {
				return nil, fmt.Errorf("%w: null value not supported for config %q", kerr.InvalidRequest, op.Name)
			}
			cur, ok := out[op.Name]
			if !ok {
				cur = def.Default
			}
			list := splitList(cur)
			for _, item := range splitList(*op.Value) {
				i := slices.Index(list, item)
				switch {
				case op.Op == ConfigAppend && i < 0:
					list = append(list, item)
				case op.Op == ConfigSubtract && i >= 0:
					list = slices.Delete(list, i, i+1)
				}
			}
			out[op.Name] = strings.Join(list, ",")
		default:
			return nil, fmt.Errorf("%w: unknown config operation %d for %q", kerr.InvalidRequest, op.Op, op.Name)
		}
	}
	return out, nil
}

func splitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
