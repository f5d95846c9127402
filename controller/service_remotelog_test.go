package controller

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/metadata"
)

// The controller validates tiered-storage topic configs against its own
// remote.log.storage.system.enable and broker defaults, and a leader's remote log
// changes reach every broker's image through the service and BrokerClient.
func TestRemoteLogThroughService(t *testing.T) {
	checkNoGoroutineLeak(t)
	for _, enabled := range []bool{false, true} {
		q := newTestQuorum(t, 1, func(c *Config) {
			c.RemoteLogStorageSystemEnable = enabled
			c.TopicDefaults = map[string]string{"retention.ms": "60000"}
		})
		q.leader()
		b := q.broker(1, "")
		ctx := ctxFor(t)
		res := b.CreateTopics(ctx, []metadata.TopicSpec{
			{Name: "tiered", NumPartitions: 1, ReplicationFactor: 1, Configs: map[string]string{"remote.storage.enable": "true"}},
			{Name: "compacted", NumPartitions: 1, ReplicationFactor: 1, Configs: map[string]string{"remote.storage.enable": "true", "cleanup.policy": "compact"}},
			{Name: "toolocal", NumPartitions: 1, ReplicationFactor: 1, Configs: map[string]string{"remote.storage.enable": "true", "local.retention.ms": "70000"}},
		}, false)
		if !enabled {
			for _, r := range res {
				if !errors.Is(r.Err, kerr.InvalidConfig) {
					t.Errorf("system disabled, %s: %v, want INVALID_CONFIG", r.Name, r.Err)
				}
			}
			mustCreateTopic(t, b, "plain", 1, 1)
			on := "true"
			if err := b.AlterTopicConfigs(ctx, "plain", []metadata.ConfigOp{{Name: "remote.storage.enable", Value: &on}}, true, false); !errors.Is(err, kerr.InvalidConfig) {
				t.Errorf("enabling remote storage with the system disabled: %v", err)
			}
			continue
		}
		if res[0].Err != nil {
			t.Fatal(res[0].Err)
		}
		wantKafkaErr(t, res[1].Err, kerr.InvalidConfig)
		wantKafkaErr(t, res[2].Err, kerr.InvalidConfig) // above the broker default retention.ms
		off := "false"
		if err := b.AlterTopicConfigs(ctx, "tiered", []metadata.ConfigOp{{Name: "remote.storage.enable", Value: &off}}, true, false); !errors.Is(err, kerr.InvalidConfig) {
			t.Errorf("disabling remote storage: %v", err)
		}

		topic := res[0].Topic
		p := topic.Partitions[0]
		seg := metadata.RemoteSegment{TopicID: topic.ID, Partition: 0, UploadID: "up-1", BaseOffset: 0, EndOffset: 9, SizeBytes: 100,
			Epochs: []metadata.RemoteEpochStart{{Epoch: p.LeaderEpoch, StartOffset: 0}}}
		if err := b.CommitRemoteSegment(ctx, "tiered", p.LeaderEpoch, seg); err != nil {
			t.Fatal(err)
		}
		if err := b.CommitRemoteSegment(ctx, "tiered", p.LeaderEpoch, seg); err != nil {
			t.Fatalf("resent commit: %v", err)
		}
		if err := b.CommitRemoteSegment(ctx, "tiered", p.LeaderEpoch-1, metadata.RemoteSegment{TopicID: topic.ID, UploadID: "up-2", BaseOffset: 10, EndOffset: 19}); !errors.Is(err, kerr.FencedLeaderEpoch) {
			t.Fatalf("stale epoch: %v", err)
		}
		im := waitImage(t, b, "remote segment", func(im *metadata.Image) bool { return im.RemoteLog("tiered", 0) != nil })
		if rl := im.RemoteLog("tiered", 0); len(rl.Segments) != 1 || rl.HighestOffset != 9 || rl.SizeBytes != 100 || rl.Segments[0].Broker != 1 {
			t.Fatalf("remote log in the broker's image: %+v", rl)
		}
		if err := b.StartRemoteDelete(ctx, "tiered", topic.ID, 0, p.LeaderEpoch, []string{"up-1"}, 0); err != nil {
			t.Fatal(err)
		}
		if err := b.FinishRemoteDelete(ctx, "tiered", topic.ID, 0, p.LeaderEpoch, []string{"up-1"}); err != nil {
			t.Fatal(err)
		}
		waitImage(t, b, "remote segment deleted", func(im *metadata.Image) bool {
			rl := im.RemoteLog("tiered", 0)
			return rl != nil && len(rl.Segments) == 0 && len(rl.Deleting) == 0 && rl.LogStart == 10
		})

		// Deleting the topic leaves its purge in the broker's image until a broker
		// reports its objects gone; a resent report is accepted.
		if errs := b.DeleteTopics(ctx, []string{"tiered"}); errs[0] != nil {
			t.Fatal(errs[0])
		}
		key := metadata.RemotePurgeKey{TopicID: topic.ID, Partition: 0}
		im = waitImage(t, b, "purge entry", func(im *metadata.Image) bool { return im.Topic("tiered") == nil })
		if pg, ok := im.RemotePurges[key]; !ok || pg.Topic != "tiered" || pg.Leader != 1 || im.RemotePurger(pg) != 1 {
			t.Fatalf("purges in the broker's image: %+v", im.RemotePurges)
		}
		for range 2 {
			if err := b.RemotePurged(ctx, topic.ID, 0); err != nil {
				t.Fatal(err)
			}
		}
		waitImage(t, b, "purge entry dropped", func(im *metadata.Image) bool { return len(im.RemotePurges) == 0 })
	}
}
