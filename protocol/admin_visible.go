package protocol

import (
	"context"
	"maps"
	"time"

	"github.com/shalelog/shale/metadata"
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

// configsShow reports whether configs reflect ops, as apply (the resource type's
// metadata.ApplyConfigOps or ApplyClientMetricsOps) applies them: applying them again
// changes nothing. Every incremental operation is idempotent and AlterConfigs' set is
// the whole result, so this holds once the write is in, whatever a concurrent write did
// to other configs. Ops that apply refuses show nothing to wait for.
func configsShow(configs map[string]string, ops []metadata.ConfigOp, incremental bool,
	apply func(map[string]string, []metadata.ConfigOp, bool) (map[string]string, error)) bool {
	want, err := apply(configs, ops, incremental)
	return err != nil || maps.Equal(configs, want)
}
