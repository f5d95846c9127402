package cluster

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	pb "github.com/shalelog/shale/controller/proto"
	"github.com/shalelog/shale/internal/testutil"
)

// shareClients keeps one client per broker: a share session ends with its connection.
type shareClients map[int32]*kgo.Client

// shareRequest sends a share request straight to one broker.
func shareRequest[R kmsg.Response](t *testing.T, cls shareClients, b *proc, req kmsg.Request) R {
	t.Helper()
	cl := cls[b.id]
	if cl == nil {
		var err error
		if cl, err = kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.RequestRetries(0)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		cls[b.id] = cl
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	// That broker itself, not whichever broker the client would pick.
	resp, err := cl.Broker(int(b.id)).Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.(R)
}

func shareFetchReq(topicID [16]byte, member string, epoch, maxRecords int32) *kmsg.ShareFetchRequest {
	req := kmsg.NewPtrShareFetchRequest()
	req.GroupID, req.MemberID = kmsg.StringPtr("queue-workers"), kmsg.StringPtr(member)
	req.ShareSessionEpoch, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.MaxRecords = epoch, 3000, 1, 1<<20, maxRecords
	rt := kmsg.NewShareFetchRequestTopic()
	rt.TopicID = topicID
	rp := kmsg.NewShareFetchRequestTopicPartition()
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func acquiredRanges(t *testing.T, resp *kmsg.ShareFetchResponse) []string {
	t.Helper()
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("share fetch: %v, %d topics", kerr.ErrorForCode(resp.ErrorCode), len(resp.Topics))
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || p.AcknowledgeErrorCode != 0 {
		t.Fatalf("share fetch partition: %v, acknowledge %v", kerr.ErrorForCode(p.ErrorCode), kerr.ErrorForCode(p.AcknowledgeErrorCode))
	}
	var out []string
	for _, a := range p.AcquiredRecords {
		out = append(out, strconv.FormatInt(a.FirstOffset, 10)+"-"+strconv.FormatInt(a.LastOffset, 10)+"x"+strconv.Itoa(int(a.DeliveryCount)))
	}
	return out
}

// The share-partition leader is killed: its successor reads the committed state back,
// so acknowledged records are never delivered again, what was in flight comes back
// with its delivery count, and the rest is delivered for the first time. The old
// leader's followers answer NOT_LEADER_OR_FOLLOWER meanwhile.
func TestSharePartitionLeaderFailover(t *testing.T) {
	c := newCluster(t, "--share.auto.offset.reset=earliest")
	createTopic(t, c.brokers[0].addr, withConfig(newTopic("jobs", 1, 3), "min.insync.replicas", "2"))
	before := c.waitFullISR("jobs", 20*time.Second)
	meta, err := metadataFrom(context.Background(), c.brokers[0].addr)
	if err != nil {
		t.Fatal(err)
	}
	var topicID [16]byte
	for _, tp := range meta.Topics {
		if tp.Topic != nil && *tp.Topic == "jobs" {
			topicID = tp.TopicID
		}
	}
	prod := c.kafkaClient(kgo.RequiredAcks(kgo.AllISRAcks()))
	for i := range 20 {
		if err := prod.ProduceSync(context.Background(), &kgo.Record{Topic: "jobs", Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cls := shareClients{}
	leader := c.broker(before[0].leader)
	var follower *proc
	for _, b := range c.brokers {
		if b != leader {
			follower = b
			break
		}
	}
	if resp := shareRequest[*kmsg.ShareFetchResponse](t, cls, follower, shareFetchReq(topicID, "m0", 0, 10)); resp.ErrorCode != 0 ||
		resp.Topics[0].Partitions[0].ErrorCode != kerr.NotLeaderForPartition.Code || resp.Topics[0].Partitions[0].CurrentLeader.LeaderID != leader.id {
		t.Fatalf("share fetch from a follower: %+v", resp.Topics)
	}

	if got := acquiredRanges(t, shareRequest[*kmsg.ShareFetchResponse](t, cls, leader, shareFetchReq(topicID, "m1", 0, 10))); !slices.Equal(got, []string{"0-9x1"}) {
		t.Fatalf("acquired %v", got)
	}
	// The acknowledgement is answered once committed in the controller quorum.
	areq := kmsg.NewPtrShareAcknowledgeRequest()
	areq.GroupID, areq.MemberID, areq.ShareSessionEpoch = kmsg.StringPtr("queue-workers"), kmsg.StringPtr("m1"), 1
	at := kmsg.NewShareAcknowledgeRequestTopic()
	at.TopicID = topicID
	ap := kmsg.NewShareAcknowledgeRequestTopicPartition()
	ab := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
	ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes = 0, 4, []int8{1}
	ap.AcknowledgementBatches = append(ap.AcknowledgementBatches, ab)
	at.Partitions = append(at.Partitions, ap)
	areq.Topics = append(areq.Topics, at)
	if resp := shareRequest[*kmsg.ShareAcknowledgeResponse](t, cls, leader, areq); resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("acknowledge: %+v", resp)
	}

	leader.kill9()
	var newLeader *proc
	testutil.Eventually(t, 30*time.Second, "a new leader of jobs-0", func() bool {
		resp, err := metadataFrom(context.Background(), follower.addr)
		if err != nil {
			return false
		}
		ps, ok := topicState(resp, "jobs")
		if !ok || ps[0].leader < 0 || ps[0].leader == leader.id {
			return false
		}
		newLeader = c.broker(ps[0].leader)
		return true
	})
	// The new leader's high watermark may trail the last record until its followers
	// fetch again: keep fetching until everything is delivered.
	counts := map[int64]int16{}
	epoch := int32(0)
	testutil.Eventually(t, 30*time.Second, "the new leader delivering jobs-0", func() bool {
		resp := shareRequest[*kmsg.ShareFetchResponse](t, cls, newLeader, shareFetchReq(topicID, "m2", epoch, 100))
		if resp.ErrorCode != 0 || len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
			epoch = 0
			return false
		}
		epoch++
		for _, a := range resp.Topics[0].Partitions[0].AcquiredRecords {
			for off := a.FirstOffset; off <= a.LastOffset; off++ {
				if _, dup := counts[off]; dup {
					t.Fatalf("offset %d delivered twice to m2", off)
				}
				counts[off] = a.DeliveryCount
			}
		}
		return len(counts) >= 15
	})
	for off := int64(0); off < 20; off++ {
		want := int16(0) // acknowledged before the failover: never again
		switch {
		case off >= 5 && off < 10:
			want = 2 // in flight at the failover: back with its delivery count
		case off >= 10:
			want = 1
		}
		if got := counts[off]; got != want {
			t.Errorf("offset %d delivered with count %d after the failover, want %d", off, got, want)
		}
	}
}

// A pool of franz-go share consumers works through a queue while the share-partition
// leader, and then the share group's coordinator, are killed with SIGKILL and restarted. The checker: every record is
// processed, the committed state ends with every record complete, every rejected
// record reaches the dead-letter topic, and records processed more than once are only
// those in flight at the kill (logged).
func TestShareQueueSurvivesLeaderKill(t *testing.T) {
	c := newCluster(t, "--share.auto.offset.reset=earliest", "--group.share.record.lock.duration.ms=5000")
	createTopic(t, c.brokers[0].addr, withConfig(withConfig(newTopic("q", 1, 3), "min.insync.replicas", "2"), "share.dead.letter.topic", "q.dlq"))
	createTopic(t, c.brokers[0].addr, newTopic("q.dlq", 3, 3))
	before := c.waitFullISR("q", 20*time.Second)
	c.waitFullISR("q.dlq", 20*time.Second)
	const n = 600
	prod := c.kafkaClient(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("q"))
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Value: []byte(strconv.Itoa(i))})
	}
	if err := prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	poison := func(v int) bool { return v%25 == 0 }

	var mu sync.Mutex
	processed := map[int]int{}
	distinct := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(processed)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	for range 3 {
		cl := c.kafkaClient(kgo.ShareGroup("qw"), kgo.ConsumeTopics("q"), kgo.ShareMaxRecords(10),
			kgo.MetadataMinAge(100*time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for run.Err() == nil {
				for _, r := range cl.PollFetches(run).Records() {
					v, _ := strconv.Atoi(string(r.Value))
					mu.Lock()
					processed[v]++
					mu.Unlock()
					time.Sleep(15 * time.Millisecond) // work: keeps the queue busy through the kills
					if poison(v) {
						r.Ack(kgo.AckReject)
					} else {
						r.Ack(kgo.AckAccept)
					}
				}
			}
			cl.FlushAcks(context.Background())
		}()
	}
	testutil.Eventually(t, 60*time.Second, "a third of the queue processed", func() bool { return distinct() >= n/3 })
	victim := c.broker(before[0].leader)
	victim.kill9()
	t.Logf("killed broker %d, the leader of q-0, after %d records", victim.id, distinct())
	testutil.Eventually(t, 60*time.Second, "progress on the new leader", func() bool { return distinct() >= n/2 })
	victim.start()
	c.waitBrokerReady(victim)
	// Then the share group's coordinator (perhaps the same broker, now restarted).
	testutil.Eventually(t, 60*time.Second, "two thirds of the queue processed", func() bool { return distinct() >= 2*n/3 })
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey, fc.CoordinatorKeys = "qw", []string{"qw"}
	fresp, err := fc.RequestWith(context.Background(), c.kafkaClient())
	if err != nil || len(fresp.Coordinators) != 1 || fresp.Coordinators[0].ErrorCode != 0 {
		t.Fatalf("find coordinator: %+v %v", fresp, err)
	}
	coord := c.broker(fresp.Coordinators[0].NodeID)
	coord.kill9()
	t.Logf("killed broker %d, the coordinator of qw, after %d records", coord.id, distinct())
	time.Sleep(sessionTimeout)
	coord.start()
	c.waitBrokerReady(coord)
	testutil.Eventually(t, 90*time.Second, "every record processed", func() bool { return distinct() == n })

	// Everything complete in the committed state.
	var spso int64
	deadline := time.Now().Add(60 * time.Second)
	for spso != n && time.Now().Before(deadline) {
		c.callActive("read share state", func(ctx context.Context, cl pb.ControllerClient) error {
			resp, err := cl.ReadShareState(ctx, &pb.ReadShareStateRequest{Group: "qw", AllPartitions: true})
			if err == nil && len(resp.States) == 1 {
				spso = resp.States[0].StartOffset
			}
			return err
		})
		time.Sleep(200 * time.Millisecond)
	}
	stop()
	wg.Wait()
	if spso != n {
		t.Fatalf("committed SPSO %d, want %d", spso, n)
	}
	dead := map[string]bool{}
	for _, p := range c.readAll("q.dlq", 3) {
		for _, v := range p {
			dead[v] = true
		}
	}
	again := 0
	mu.Lock()
	defer mu.Unlock()
	for v := range n {
		if processed[v] > 1 {
			again++
		}
		if poison(v) != dead[strconv.Itoa(v)] {
			t.Errorf("record %d: poison %v, dead-lettered %v", v, poison(v), dead[strconv.Itoa(v)])
		}
	}
	t.Logf("%d records, %d dead letters, %d processed more than once (in flight at the kill)", n, len(dead), again)
}
