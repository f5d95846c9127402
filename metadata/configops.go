package metadata

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/metadata/topicconfig"
)

// Config operations have one meaning for every resource type that takes them (topics,
// client metrics subscriptions): applyConfigOps. What differs per type is which names
// exist, which are lists and their defaults (a configKeys), and how the result is
// validated, which the entry points (ApplyConfigOps, ApplyClientMetricsOps) do apart from
// the application.

// configKeys is what applying ops needs to know of a resource type's configs.
type configKeys interface {
	// list reports whether name is a list config, and the value it has while unset:
	// APPEND and SUBTRACT apply to lists only, starting from that value.
	list(name string) (def string, ok bool)
}

// checkConfigOps refuses what no resource type accepts: a name given twice, and a null
// value anywhere but in an incremental DELETE (Kafka's InvalidRequestException).
func checkConfigOps(ops []ConfigOp, incremental bool) error {
	seen := map[string]bool{}
	for _, op := range ops {
		if seen[op.Name] {
			return fmt.Errorf("%w: config %q is named more than once", kerr.InvalidRequest, op.Name)
		}
		seen[op.Name] = true
		if op.Value == nil && (!incremental || op.Op != ConfigDelete) {
			return fmt.Errorf("%w: null value for config %q", kerr.InvalidRequest, op.Name)
		}
	}
	return nil
}

// applyConfigOps computes new configs from current and ops, which checkConfigOps
// accepted. AlterConfigs (incremental false) replaces the whole set: configs the ops
// do not name revert to their defaults. IncrementalAlterConfigs applies each op: SET
// replaces a value, DELETE removes it (a no-op when unset), APPEND adds the items of a
// list config it lacks, SUBTRACT removes the items it has. current is not modified.
func applyConfigOps(current map[string]string, ops []ConfigOp, incremental bool, keys configKeys) (map[string]string, error) {
	if !incremental {
		out := make(map[string]string, len(ops))
		for _, op := range ops {
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
			out[op.Name] = *op.Value
		case ConfigDelete:
			delete(out, op.Name)
		case ConfigAppend, ConfigSubtract:
			def, ok := keys.list(op.Name)
			if !ok {
				return nil, fmt.Errorf("%w: config %q is not a list: APPEND and SUBTRACT do not apply", kerr.InvalidConfig, op.Name)
			}
			cur, ok := out[op.Name]
			if !ok {
				cur = def
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

type topicKeys struct{}

func (topicKeys) list(name string) (string, bool) {
	def, ok := topicconfig.Lookup(name)
	return def.Default, ok && def.Type == topicconfig.TypeList
}

// ApplyConfigOps computes a topic's new configs, as AlterConfigs (incremental false:
// the ops are the whole new set and every config they do not name reverts to its
// default) and IncrementalAlterConfigs (set, delete, append and subtract on list
// configs) do. current is not modified. The result is not validated: callers check it
// with topicconfig.Validate where they decide (the controller only on its leader, so
// that replaying an old log never fails against a newer table). Only the names of
// DELETE, APPEND and SUBTRACT are checked here, since their effect depends on the name
// being known: a DELETE of a typo would otherwise "succeed" and leave the config the
// user meant to reset as it was.
func ApplyConfigOps(current map[string]string, ops []ConfigOp, incremental bool) (map[string]string, error) {
	if err := checkConfigOps(ops, incremental); err != nil {
		return nil, err
	}
	if incremental {
		for _, op := range ops {
			if op.Op != ConfigDelete && op.Op != ConfigAppend && op.Op != ConfigSubtract {
				continue
			}
			if _, ok := topicconfig.Lookup(op.Name); !ok {
				return nil, fmt.Errorf("%w: unknown topic config %q", kerr.InvalidConfig, op.Name)
			}
		}
	}
	return applyConfigOps(current, ops, incremental, topicKeys{})
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
