package replication

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/internal/metadata"
)

// autoCreateWait bounds how long an auto-creation waits for the new topics to be applied
// here, so that the caller's answer already lists their leaders.
const autoCreateWait = 2 * time.Second

// AutoCreateTopics creates the named topics that do not exist, with partitions and
// replication factor (-1: the controller's defaults), as Kafka's
// auto.create.topics.enable does, and waits until this broker has applied them. Names
// that are not valid topic names are left for the caller to report.
func (m *Manager) AutoCreateTopics(ctx context.Context, names []string, partitions int32, rf int16) {
	var specs []metadata.TopicSpec
	for _, n := range names {
		if metadata.ValidateTopicName(n) != nil || m.Image().Topic(n) != nil {
			continue
		}
		specs = append(specs, metadata.TopicSpec{Name: n, NumPartitions: partitions, ReplicationFactor: rf})
	}
	if len(specs) == 0 {
		return
	}
	for _, res := range m.store.CreateTopics(ctx, specs, false) {
		switch {
		case res.Err == nil:
			m.lg.Info("auto-created topic", "topic", res.Name, "partitions", partitions)
		case !errors.Is(res.Err, kerr.TopicAlreadyExists):
			m.lg.Warn("auto-creating topic failed", "topic", res.Name, "err", res.Err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, autoCreateWait)
	defer cancel()
	m.WaitApplied(wctx, func(im *metadata.Image) bool {
		for _, s := range specs {
			if im.Topic(s.Name) == nil {
				return false
			}
		}
		return true
	})
}
