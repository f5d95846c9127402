package controller

import (
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/internal/metadata"
	"github.com/shalelog/shale/internal/topicconfig"
)

// applyConfigOps computes a topic's new configs. Incremental ops (IncrementalAlterConfigs)
// change the current set; otherwise (AlterConfigs) the ops are the whole new set and every
// config they do not name reverts to its default. The result is not yet validated.
func applyConfigOps(current map[string]string, ops []metadata.ConfigOp, incremental bool) (map[string]string, error) {
	seen := map[string]bool{}
	for _, op := range ops {
		if seen[op.Name] {
			return nil, kafkaErrorf(kerr.InvalidRequest, "config %q is named more than once", op.Name)
		}
		seen[op.Name] = true
	}
	if !incremental {
		out := map[string]string{}
		for _, op := range ops {
			if op.Value == nil {
				return nil, kafkaErrorf(kerr.InvalidRequest, "null value for config %q", op.Name)
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
		case metadata.ConfigSet:
			if op.Value == nil {
				return nil, kafkaErrorf(kerr.InvalidRequest, "null value not supported for config %q", op.Name)
			}
			out[op.Name] = *op.Value
		case metadata.ConfigDelete:
			delete(out, op.Name)
		case metadata.ConfigAppend, metadata.ConfigSubtract:
			def, ok := topicconfig.Lookup(op.Name)
			if !ok {
				return nil, kafkaErrorf(kerr.InvalidConfig, "unknown topic config %q", op.Name)
			}
			if def.Type != topicconfig.TypeList {
				return nil, kafkaErrorf(kerr.InvalidConfig, "config %q is not a list: APPEND and SUBTRACT do not apply", op.Name)
			}
			if op.Value == nil {
				return nil, kafkaErrorf(kerr.InvalidRequest, "null value not supported for config %q", op.Name)
			}
			cur, ok := out[op.Name]
			if !ok {
				cur = def.Default
			}
			list := splitList(cur)
			for _, item := range splitList(*op.Value) {
				i := slices.Index(list, item)
				switch {
				case op.Op == metadata.ConfigAppend && i < 0:
					list = append(list, item)
				case op.Op == metadata.ConfigSubtract && i >= 0:
					list = slices.Delete(list, i, i+1)
				}
			}
			out[op.Name] = strings.Join(list, ",")
		default:
			return nil, kafkaErrorf(kerr.InvalidRequest, "unknown config operation %d for %q", op.Op, op.Name)
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
