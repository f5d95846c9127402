package protocol_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestShareGroupCoordinatorFailover: franz-go share consumers work a one-partition topic
// led by one broker of a three-node cluster while another broker coordinates their share
// group; the coordinator is killed with SIGKILL. The members find the broker that takes
// the group over, rejoin it (it starts with no members: GROUP_ID_NOT_FOUND sends them
// back to epoch 0) and keep consuming: every record produced before and after the kill is
// accepted, none twice (the share-partition state lives with the partition leader and
// the controller, not the coordinator).
func TestShareGroupCoordinatorFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a three-node cluster")
	}
	nodes := startShaleCluster(t)
	var seeds []string
	for _, n := range nodes {
		seeds = append(seeds, n.addr)
	}
	ctx := ctxTimeout(t, 3*time.Minute)
	admCl := mustClient(t, kgo.SeedBrokers(seeds...))
	adm := kadm.NewClient(admCl)
	for {
		bs, err := adm.ListBrokers(ctx)
		if err == nil && len(bs) == 3 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("cluster never listed 3 brokers: %v %v", bs, err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	const groupID, topic = "share-failover", "sfo"
	freq := kmsg.NewPtrFindCoordinatorRequest()
	freq.CoordinatorKey = groupID
	fresp, err := freq.RequestWith(ctx, admCl)
	if err != nil || fresp.ErrorCode != 0 {
		t.Fatalf("find coordinator: %v %+v", err, fresp)
	}
	coord := fresp.NodeID
	var leader int32
	var liveSeeds []string
	for _, n := range nodes {
		if n.id != coord {
			leader = n.id
			liveSeeds = append(liveSeeds, n.addr)
		}
	}
	creq := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = topic, -1, -1
	a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	a.Partition, a.Replicas = 0, []int32{leader}
	ct.ReplicaAssignment = append(ct.ReplicaAssignment, a)
	creq.Topics, creq.TimeoutMillis = []kmsg.CreateTopicsRequestTopic{ct}, 10000
	if cresp, err := creq.RequestWith(ctx, admCl); err != nil || cresp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create topic: %v %+v", err, cresp)
	}
	// Start the group at offset 0 (share.auto.offset.reset is latest), as
	// kafka-share-groups --reset-offsets would; this creates the group's state.
	reset := kadm.Offsets{}
	reset.Add(kadm.Offset{Topic: topic, Partition: 0, At: 0})
	for {
		ar, err := adm.AlterShareGroupOffsets(ctx, groupID, reset)
		if err == nil && ar.Error() == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("alter share offsets: %v %v", err, ar.Error())
		}
		time.Sleep(100 * time.Millisecond)
	}

	var (
		mu       sync.Mutex
		accepted = map[string]int{}
	)
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(accepted)
	}
	run, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := range 3 {
		cl := mustClient(t, kgo.SeedBrokers(seeds...), kgo.ShareGroup(groupID), kgo.ConsumeTopics(topic),
			kgo.ClientID(fmt.Sprintf("worker-%d", w)), kgo.ShareMaxRecords(20))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for run.Err() == nil {
				cl.PollFetches(run).EachRecord(func(r *kgo.Record) {
					r.Ack(kgo.AckAccept)
					mu.Lock()
					accepted[string(r.Value)]++
					mu.Unlock()
				})
			}
		}()
	}
	t.Cleanup(func() { stop(); wg.Wait() })

	prod := mustClient(t, kgo.SeedBrokers(liveSeeds...), kgo.DefaultProduceTopic(topic))
	produce := func(from, n int) {
		t.Helper()
		var recs []*kgo.Record
		for i := from; i < from+n; i++ {
			recs = append(recs, kgo.StringRecord(strconv.Itoa(i)))
		}
		if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	waitAccepted := func(n int, what string) {
		t.Helper()
		for count() < n {
			if ctx.Err() != nil {
				t.Fatalf("%s: %d of %d records accepted", what, count(), n)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	produce(0, 200)
	waitAccepted(200, "before the kill")

	for _, n := range nodes {
		if n.id == coord {
			n.kill()
		}
	}
	// The controller moves the group once it fences the dead broker; the members find
	// the new coordinator and join it again.
	liveCl := mustClient(t, kgo.SeedBrokers(liveSeeds...))
	for {
		freq = kmsg.NewPtrFindCoordinatorRequest()
		freq.CoordinatorKey = groupID
		resp, err := freq.RequestWith(ctx, liveCl)
		if err == nil && resp.ErrorCode == 0 && resp.NodeID != coord {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the group never moved from broker %d: %v %+v", coord, err, resp)
		}
		time.Sleep(100 * time.Millisecond)
	}
	describeShare(t, kadm.NewClient(liveCl), groupID, "three members at the new coordinator", func(d kadm.DescribedShareGroup) bool {
		if len(d.Members) != 3 || d.Coordinator.NodeID == coord {
			return false
		}
		for _, m := range d.Members {
			if _, ok := m.Assignment[topic][0]; !ok {
				return false
			}
		}
		return true
	})
	produce(200, 200)
	waitAccepted(400, "after the coordinator moved")

	mu.Lock()
	defer mu.Unlock()
	for v, c := range accepted {
		if c != 1 {
			t.Errorf("record %s accepted %d times", v, c)
		}
	}
}
