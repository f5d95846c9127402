package cluster

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	pb "github.com/shalelog/shale/controller/proto"
	"github.com/shalelog/shale/internal/testutil"
	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/log/records"
	"github.com/shalelog/shale/metadata"
)

// commitOffset commits a group offset straight to the quorum, as a broker's group
// coordinator does: under the coordinator and coordinator epoch that Metadata reports
// as the leader and leader epoch of the group's __consumer_offsets partition.
func (c *cluster) commitOffset(group, topic string, partition int32, offset int64) {
	c.t.Helper()
	kc := c.kafkaClient()
	testutil.Eventually(c.t, 30*time.Second, "a commit by the coordinator of group "+group, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(metadata.OffsetsTopic)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, kc)
		if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) == 0 {
			return false
		}
		ps := resp.Topics[0].Partitions
		p := ps[metadata.OffsetsPartition(group, len(ps))]
		if p.Leader < 0 {
			return false
		}
		committed := false
		c.callActive("commit offset", func(ctx context.Context, cl pb.ControllerClient) error {
			resp, err := cl.CommitOffsets(ctx, &pb.CommitOffsetsRequest{Group: group, Offsets: []*pb.OffsetEntry{{Topic: topic, Partition: partition, Offset: offset}},
				CoordinatorId: p.Leader, CoordinatorEpoch: p.LeaderEpoch})
			switch {
			case err != nil:
				return err
			case resp.Error == nil:
				committed = true
			case resp.Error.Code != int32(kerr.NotCoordinator.Code): // a broker's cache may lag: ask again
				c.t.Fatalf("commit: %v", resp.Error)
			}
			return nil
		})
		return committed
	})
}

func (c *cluster) fetchOffsets(group string) map[string]int64 {
	c.t.Helper()
	out := map[string]int64{}
	c.callActive("fetch offsets", func(ctx context.Context, cl pb.ControllerClient) error {
		resp, err := cl.FetchOffsets(ctx, &pb.FetchOffsetsRequest{Group: group, AllTopics: true})
		if err != nil {
			return err
		}
		for _, o := range resp.Offsets {
			out[fmt.Sprintf("%s-%d", o.Topic, o.Partition)] = o.Offset
		}
		return nil
	})
	return out
}

// waitTopicEverywhere waits until every running broker's metadata shows the topic with a
// leader for every partition and all three brokers.
func (c *cluster) waitTopicEverywhere(topic string) {
	c.t.Helper()
	for _, b := range c.brokers {
		if !b.running() {
			continue
		}
		testutil.Eventually(c.t, 30*time.Second, fmt.Sprintf("topic %s on broker %d", topic, b.id), func() bool {
			resp, err := metadataFrom(context.Background(), b.addr)
			if err != nil {
				return false
			}
			ps, ok := topicState(resp, topic)
			if !ok || len(ps) == 0 {
				return false
			}
			for _, p := range ps {
				if p.leader < 0 {
					return false
				}
			}
			return true
		})
	}
}

// TestKillRaftLeader: topics are created through every broker and offsets committed;
// the active controller is killed with SIGKILL; another takes over with all committed
// metadata, brokers reconnect to it, and the killed one rejoins when restarted.
func TestKillRaftLeader(t *testing.T) {
	c := newCluster(t)
	for _, b := range c.brokers {
		createTopic(t, b.addr, newTopic(fmt.Sprintf("topic-%d", b.id), 3, 3))
	}
	c.commitOffset("g", "topic-4", 1, 42)
	for _, b := range c.brokers {
		c.waitTopicEverywhere(fmt.Sprintf("topic-%d", b.id))
	}

	old := c.activeController(30 * time.Second)
	c.controllers[old].kill9()
	killed := time.Now()
	next := c.activeController(30 * time.Second)
	elected := time.Since(killed)
	createTopic(t, c.brokers[1].addr, newTopic("after-kill", 3, 3))
	t.Logf("controller %d killed: controller %d active after %v; first topic created through a broker %v after the kill",
		old+1, next+1, elected, time.Since(killed))
	if next == old {
		t.Fatal("killed controller still active")
	}
	if got := c.fetchOffsets("g"); got["topic-4-1"] != 42 {
		t.Fatalf("committed offset lost: %v", got)
	}
	for _, name := range []string{"topic-4", "topic-5", "topic-6", "after-kill"} {
		c.waitTopicEverywhere(name)
	}
	for _, b := range c.brokers {
		resp, err := metadataFrom(context.Background(), b.addr)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Brokers) != 3 {
			t.Fatalf("broker %d's metadata shows %d brokers", b.id, len(resp.Brokers))
		}
	}

	// The killed controller restarts from its log and rejoins; then the quorum survives
	// losing the other one of the original pair, which needs the rejoined node's vote.
	c.controllers[old].start()
	time.Sleep(2 * time.Second)
	c.controllers[next].kill9()
	third := c.activeController(30 * time.Second)
	t.Logf("after restarting controller %d and killing controller %d, controller %d is active", old+1, next+1, third+1)
	createTopic(t, c.brokers[2].addr, newTopic("after-second-kill", 1, 3))
	if got := c.fetchOffsets("g"); got["topic-4-1"] != 42 {
		t.Fatalf("committed offset lost after the second failover: %v", got)
	}
	c.waitTopicEverywhere("after-kill")
	c.waitTopicEverywhere("after-second-kill")
}

// TestKillBroker: a producer writes to a 6-partition topic spread over three brokers;
// one broker is killed with SIGKILL; within the session timeout its partitions get new
// leaders with bumped epochs and the producer carries on to every partition.
func TestKillBroker(t *testing.T) {
	c := newCluster(t)
	createTopic(t, c.brokers[0].addr, newTopic("orders", 6, 3))
	c.waitTopicEverywhere("orders")
	resp, err := metadataFrom(context.Background(), c.brokers[0].addr)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := topicState(resp, "orders")
	var victimParts []int
	for i, p := range before {
		if p.leader == 5 {
			victimParts = append(victimParts, i)
		}
	}
	if len(victimParts) != 2 {
		t.Fatalf("broker 5 leads %d of 6 partitions: %+v", len(victimParts), before)
	}

	// acks=1: this test is about leadership moving; replicated acks=all under a leader
	// kill is TestReplicatedAcksAllSurvivesLeaderKill.
	cl := c.kafkaClient(kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordDeliveryTimeout(30*time.Second),
		kgo.MetadataMinAge(100*time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
	var produced [6]atomic.Int64
	var failures atomic.Int64
	var firstErr atomic.Value
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for part := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				r := &kgo.Record{Topic: "orders", Partition: int32(part), Value: []byte("x")}
				if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
					failures.Add(1)
					firstErr.CompareAndSwap(nil, err)
					continue
				}
				produced[part].Add(1)
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	time.Sleep(500 * time.Millisecond)

	c.broker(5).kill9()
	killed := time.Now()
	var moved time.Duration
	testutil.Eventually(t, 3*sessionTimeout+5*time.Second, "broker 5's partitions moved", func() bool {
		resp, err := metadataFrom(context.Background(), c.brokers[0].addr)
		if err != nil {
			return false
		}
		ps, _ := topicState(resp, "orders")
		for _, i := range victimParts {
			if len(ps) <= i || ps[i].leader == 5 || ps[i].leader < 0 {
				return false
			}
		}
		moved = time.Since(killed)
		for _, i := range victimParts {
			if ps[i].epoch <= before[i].epoch {
				t.Fatalf("partition %d got leader %d without a new epoch", i, ps[i].leader)
			}
			if slices.Contains(ps[i].isr, 5) {
				t.Fatalf("partition %d still has broker 5 in its ISR", i)
			}
		}
		return true
	})
	t.Logf("broker 5 killed: its partitions had new leaders after %v (session timeout %v)", moved, sessionTimeout)
	if moved > sessionTimeout+3*time.Second {
		t.Fatalf("partitions moved after %v, well beyond the %v session timeout", moved, sessionTimeout)
	}

	// The producer carries on to every partition, including the moved ones.
	var mark [6]int64
	for i := range mark {
		mark[i] = produced[i].Load()
	}
	testutil.Eventually(t, 20*time.Second, "records produced to every partition after the failover", func() bool {
		for i := range mark {
			if produced[i].Load() < mark[i]+20 {
				return false
			}
		}
		return true
	})
	cancel()
	wg.Wait()
	t.Logf("produced %v; %d attempts failed along the way (first: %v)", counts(&produced), failures.Load(), firstErr.Load())
}

func counts(p *[6]atomic.Int64) []int64 {
	var out []int64
	for i := range p {
		out = append(out, p[i].Load())
	}
	return out
}

// produceTo sends one acks=1 record for topic-0 straight to one broker and returns the
// partition's error code.
func produceTo(t *testing.T, addr string, topic string) (int16, error) {
	return produceAcks(t, addr, topic, 1)
}

// produceAcks is produceTo with the given acks.
func produceAcks(t *testing.T, addr string, topic string, acks int16) (int16, error) {
	t.Helper()
	// kgo rewrites a raw produce's acks to its own setting.
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = acks, 2000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = 0
	rp.Records = encodedBatch(t)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, err
	}
	return resp.Topics[0].Partitions[0].ErrorCode, nil
}

// encodedBatch is one uncompressed record batch with one record.
func encodedBatch(t *testing.T) []byte {
	t.Helper()
	now := time.Now().UnixMilli()
	b, err := records.Build(shalelog.Header{Magic: 2, FirstTimestamp: now, MaxTimestamp: now, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
		0, []records.Record{{Value: []byte("v")}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSIGSTOPLeaderBroker: a partition's leader is stopped with SIGSTOP; the controller
// fences it and the other replica leads; when the stopped broker resumes, it learns the
// new leader within moments and never acknowledges an acks=all write as a deposed leader.
func TestSIGSTOPLeaderBroker(t *testing.T) {
	c := newCluster(t)
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "paused", -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Partition, ra.Replicas = 0, []int32{4, 5}
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	req.Topics = append(req.Topics, rt)
	createTopic(t, c.brokers[1].addr, req)
	c.waitTopicEverywhere("paused")
	if code, err := produceTo(t, c.broker(4).addr, "paused"); err != nil || code != 0 {
		t.Fatalf("produce to the leader before the stop: code %d, %v", code, err)
	}

	c.broker(4).signal(syscall.SIGSTOP)
	stopped := time.Now()
	var moved time.Duration
	testutil.Eventually(t, 3*sessionTimeout+5*time.Second, "broker 5 leading", func() bool {
		resp, err := metadataFrom(context.Background(), c.broker(5).addr)
		if err != nil {
			return false
		}
		ps, _ := topicState(resp, "paused")
		moved = time.Since(stopped)
		return len(ps) == 1 && ps[0].leader == 5
	})
	t.Logf("broker 4 stopped: broker 5 led after %v", moved)
	if code, err := produceTo(t, c.broker(5).addr, "paused"); err != nil || code != 0 {
		t.Fatalf("produce to the new leader: code %d, %v", code, err)
	}

	c.broker(4).signal(syscall.SIGCONT)
	resumed := time.Now()
	// As in Kafka, a broker keeps serving on the metadata it has until it learns
	// otherwise (so that losing the controller quorum does not stop the data plane). A
	// resumed leader must learn it was deposed within moments, and it can never
	// acknowledge an acks=all write meanwhile: its old follower follows the new leader.
	sawNotLeader := false
	for time.Since(resumed) < 3*sessionTimeout {
		code, err := produceAcks(t, c.broker(4).addr, "paused", -1)
		if err != nil {
			continue // still waking up
		}
		if code == 0 {
			t.Fatal("the deposed broker acknowledged an acks=all write")
		}
		if code == 6 { // NOT_LEADER_OR_FOLLOWER
			sawNotLeader = true
			break
		}
	}
	if !sawNotLeader {
		t.Fatal("the resumed broker never answered NOT_LEADER_OR_FOLLOWER")
	}
	t.Logf("the resumed broker knew it was deposed %v after SIGCONT", time.Since(resumed))
	if code, err := produceTo(t, c.broker(4).addr, "paused"); err != nil || code != 6 {
		t.Fatalf("acks=1 to the deposed broker once it knew: code %d, %v", code, err)
	}
	testutil.Eventually(t, 30*time.Second, "broker 4 shows broker 5 as leader", func() bool {
		resp, err := metadataFrom(context.Background(), c.broker(4).addr)
		if err != nil {
			return false
		}
		ps, _ := topicState(resp, "paused")
		return len(ps) == 1 && ps[0].leader == 5
	})
}

// TestRestartFromSnapshot: the whole cluster stops cleanly (each controller snapshots
// on the way down) and starts again from the snapshots with all metadata and offsets;
// then all controllers are killed at once and restart from their Raft logs.
func TestRestartFromSnapshot(t *testing.T) {
	c := newCluster(t)
	for i := range 5 {
		createTopic(t, c.brokers[i%3].addr, newTopic(fmt.Sprintf("snap-%d", i), 2, 3))
	}
	for i := range 50 {
		c.commitOffset(fmt.Sprintf("g%d", i%5), fmt.Sprintf("snap-%d", i%5), int32(i%2), int64(i))
	}
	want := c.fetchOffsets("g3")
	for _, b := range c.brokers {
		b.terminate()
	}
	for _, p := range c.controllers {
		p.terminate()
		snaps, _ := filepath.Glob(filepath.Join(p.dir, "data", "__cluster_metadata", "snapshots", "*", "state.bin"))
		if len(snaps) == 0 {
			t.Fatalf("controller %d left no snapshot", p.id)
		}
	}
	for _, p := range c.controllers {
		p.start()
	}
	for _, b := range c.brokers {
		b.start()
	}
	for _, b := range c.brokers {
		c.waitBrokerReady(b)
	}
	for i := range 5 {
		c.waitTopicEverywhere(fmt.Sprintf("snap-%d", i))
	}
	if got := c.fetchOffsets("g3"); !mapsEqual(got, want) {
		t.Fatalf("offsets after restart %v, want %v", got, want)
	}
	for _, p := range c.controllers {
		if !strings.Contains(p.log(), "restored from snapshot") {
			t.Fatalf("controller %d did not restore from its snapshot", p.id)
		}
	}

	// Now without the courtesy of a snapshot: kill -9 every controller.
	createTopic(t, c.brokers[0].addr, newTopic("after-restart", 1, 3))
	c.commitOffset("g3", "after-restart", 0, 7)
	for _, p := range c.controllers {
		p.kill9()
	}
	for _, p := range c.controllers {
		p.start()
	}
	c.waitTopicEverywhere("after-restart")
	got := c.fetchOffsets("g3")
	if got["after-restart-0"] != 7 {
		t.Fatalf("offset committed before kill -9 lost: %v", got)
	}
}

func mapsEqual(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
