package protocol

import (
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/metadata/topicconfig"
)

// An admin write returns once the controller has committed it; this broker applies the
// change a moment later. Answering only once this broker's own image holds it means a
// client that reads back through the same broker (DescribeConfigs after
// IncrementalAlterConfigs, Metadata after DeleteTopics) sees what it wrote.

// adminVisibleWait bounds that wait: a concurrent write to the same configs can keep
// this one's result from ever appearing as such, and the write has succeeded anyway.
const adminVisibleWait = 10 * time.Second

// awaitVisible waits, within ctx and adminVisibleWait, until ready holds for this
// broker's applied image.
func (s *Server) awaitVisible(ctx context.Context, ready func(*metadata.Image) bool) {
	ctx, cancel := context.WithTimeout(ctx, adminVisibleWait)
	defer cancel()
	s.waitApplied(ctx, ready)
}

// topicReplaced reports whether the topic that had id before a write is gone or
// recreated, so that waiting for the write to show on it is pointless.
func topicReplaced(t *metadata.Topic, id [16]byte) bool {
	return t == nil || (id != [16]byte{} && t.ID != id)
}

// configsShow reports whether a topic's configs reflect ops: the whole set for
// AlterConfigs, each operation's effect for IncrementalAlterConfigs.
func configsShow(configs map[string]string, ops []metadata.ConfigOp, incremental bool) bool {
	if !incremental {
		want, err := metadata.ApplyConfigOps(nil, ops, false)
		return err != nil || maps.Equal(configs, want)
	}
	for _, op := range ops {
		cur, set := configs[op.Name]
		switch op.Op {
		case metadata.ConfigSet:
			if op.Value != nil && (!set || cur != *op.Value) {
				return false
			}
		case metadata.ConfigDelete:
			if set {
				return false
			}
		case metadata.ConfigAppend, metadata.ConfigSubtract:
			if op.Value == nil {
				continue
			}
			if !set {
				if def, ok := topicconfig.Lookup(op.Name); ok {
					cur = def.Default
				}
			}
			list := splitConfigList(cur)
			for _, item := range splitConfigList(*op.Value) {
				if slices.Contains(list, item) != (op.Op == metadata.ConfigAppend) {
					return false
				}
			}
		}
	}
	return true
}

func splitConfigList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
