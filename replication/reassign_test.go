package replication_test

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shalelog/shale/internal/testutil"
	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/replication"
)

// TestReassignmentMovesDataUnderThrottle: a partition on brokers 1 and 2 gains broker 3
// by reassignment. The new replica starts as a follower, fetches the whole log, joins
// the ISR and completes the reassignment. With a throttle on one side (the leader's, or
// the new follower's) the move cannot be faster than the rate allows; afterwards the
// replica is in sync and no longer throttled.
func TestReassignmentMovesDataUnderThrottle(t *testing.T) {
	const (
		rate    = 512 << 10
		records = 64
		size    = 64 << 10 // 4 MiB in all
	)
	for _, side := range []string{"none", "leader", "follower"} {
		t.Run(side, func(t *testing.T) {
			_, rs := startClusterTuned(t, func(id int32, cfg *replication.Config) {
				switch {
				case side == "leader" && id == 1:
					cfg.LeaderReplicationThrottledRate = rate
				case side == "follower" && id == 3:
					cfg.FollowerReplicationThrottledRate = rate
				}
			})
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			res := rs[0].store.CreateTopics(ctx, []metadata.TopicSpec{{Name: "mv", NumPartitions: -1, ReplicationFactor: -1,
				Assignments: [][]int32{{1, 2}}}}, false)
			if res[0].Err != nil {
				t.Fatal(res[0].Err)
			}
			cl, err := kgo.NewClient(kgo.SeedBrokers(rs[0].addr), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("mv"),
				kgo.RecordDeliveryTimeout(60*time.Second), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.WithLogger(nil))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			value := bytes.Repeat([]byte("x"), size)
			for range records {
				if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			start := time.Now()
			errs, err := rs[0].store.AlterPartitionReassignments(ctx, []metadata.Reassignment{{Topic: "mv", Partition: 0, Replicas: []int32{3, 1, 2}}})
			if err != nil || errs[0] != nil {
				t.Fatalf("reassign: %v %v", err, errs)
			}
			testutil.Eventually(t, 90*time.Second, "reassignment complete", func() bool {
				p := rs[0].store.Current().Partition("mv", 0)
				return !p.Reassigning() && slices.Equal(p.Replicas, []int32{3, 1, 2})
			})
			took := time.Since(start)
			leo := rs[0].m.Replica("mv", 0).LogEndOffset()
			if got := rs[2].m.Replica("mv", 0).LogEndOffset(); got != leo {
				t.Fatalf("broker 3 at %d, the leader at %d", got, leo)
			}
			// The throttle lets one second's budget through at once and a fetch of up to
			// replica.fetch.max.bytes (1 MiB) overdraw it: a lower bound on the time.
			if side != "none" {
				minTook := time.Duration(float64(records*size-rate-(1<<20)) / rate * float64(time.Second))
				if took < minTook {
					t.Errorf("moved %d bytes in %v under a %d B/s throttle; at least %v expected", records*size, took, rate, minTook)
				}
			}
			t.Logf("%s throttle: moved %d MiB in %v", side, records*size>>20, took.Round(time.Millisecond))
			// The ISR now holds broker 3: acks=all produce waits for it, unthrottled.
			after := time.Now()
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			t.Logf("acks=all produce after the move: %v", time.Since(after).Round(time.Millisecond))
		})
	}
}
