package protocol_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/coordinator/group"
	sharegroup "github.com/shalelog/shale/coordinator/share"
	"github.com/shalelog/shale/replication/share"
)

// startQueueBroker starts a broker with both halves of share groups: the coordinator
// (membership, assignment) and the share-partition leader (ShareFetch, acknowledgement).
func startQueueBroker(t *testing.T) *testBroker {
	t.Helper()
	gcfg := &group.Config{NodeID: 1, Logger: quietLogger()}
	sgcfg := &sharegroup.Config{NodeID: 1, Logger: quietLogger(), SessionTimeout: 10 * time.Second, HeartbeatInterval: time.Second}
	scfg := &share.Config{AutoOffsetReset: "earliest", Logger: quietLogger()}
	return launchShareGroups(t, t.TempDir(), nil, brokerConfig(), gcfg, sgcfg, scfg)
}

// TestShareGroupAdminWithFranzGo runs a pool of franz-go share consumers on one
// single-partition topic and checks the coordinator's side over the real share-partition
// state: every member is assigned the partition, the start offset and counts that
// DescribeShareGroupOffsets reports reach the end once everything is accepted, an
// AlterShareGroupOffsets of the empty group makes a new member start again from the new
// offset, and DeleteGroups deletes the empty group with its state. (The draining itself,
// exactly once and never held twice, is TestShareConsumersDrainOnePartition.)
func TestShareGroupAdminWithFranzGo(t *testing.T) {
	tb := startQueueBroker(t)
	const topic, groupID, n, workers = "jobs", "pool", 100, 3
	tb.createTopic(topic, 1, nil)
	prod := tb.client()
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: topic, Value: []byte(strconv.Itoa(i))})
	}
	if err := prod.ProduceSync(ctxTimeout(t, 20*time.Second), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	var (
		mu       sync.Mutex
		accepted = map[string]int{}
		byWorker = map[int]int{}
	)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	clients := make([]*kgo.Client, workers)
	for w := range workers {
		cl := tb.client(kgo.ShareGroup(groupID), kgo.ConsumeTopics(topic), kgo.ClientID(fmt.Sprintf("worker-%d", w)), kgo.ShareMaxRecords(10))
		clients[w] = cl
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				fs := cl.PollFetches(ctx)
				fs.EachRecord(func(r *kgo.Record) {
					r.Ack(kgo.AckAccept)
					mu.Lock()
					accepted[string(r.Value)]++
					byWorker[w]++
					mu.Unlock()
				})
				mu.Lock()
				done := len(accepted) == n
				mu.Unlock()
				if done {
					cancel() // the others are parked in long polls
					return
				}
			}
		}()
	}

	// While they work, the coordinator shows every member holding the one partition.
	adm := tb.admin()
	d := describeShare(t, adm, groupID, "three members on one partition", func(d kadm.DescribedShareGroup) bool {
		if len(d.Members) != workers {
			return false
		}
		for _, m := range d.Members {
			if _, ok := m.Assignment[topic][0]; !ok {
				return false
			}
		}
		return true
	})
	if d.GroupState != "Stable" {
		t.Fatalf("described: %+v", d)
	}

	wg.Wait()
	if ctx.Err() == context.DeadlineExceeded {
		t.Fatal("the pool did not drain the topic in time")
	}
	for _, cl := range clients {
		if err := cl.FlushAcks(ctxTimeout(t, 10*time.Second)); err != nil {
			t.Fatalf("flush acks: %v", err)
		}
	}
	mu.Lock()
	if len(accepted) != n {
		t.Fatalf("accepted %d distinct records of %d", len(accepted), n)
	}
	for v, c := range accepted {
		if c != 1 {
			t.Errorf("record %s accepted %d times", v, c)
		}
	}
	t.Logf("records per worker: %v", byWorker)
	mu.Unlock()

	// The start offset reaches the end once the acknowledgements are committed; nothing
	// is in flight.
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, counts := shareOffset(t, tb, groupID, topic)
		if st.StartOffset == n && counts != nil && counts.InFlight == 0 && counts.Acquired == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("share partition never completed: %+v counts %+v", st, counts)
		}
		time.Sleep(50 * time.Millisecond)
	}

	for _, cl := range clients {
		cl.Close() // leaves the group
	}
	describeShare(t, adm, groupID, "the group empty", func(d kadm.DescribedShareGroup) bool {
		return len(d.Members) == 0 && d.GroupState == "Empty"
	})

	// Reset the empty group to offset 90 (kadm, as kafka-share-groups --reset-offsets);
	// a new member gets the last ten records again.
	reset := kadm.Offsets{}
	reset.Add(kadm.Offset{Topic: topic, Partition: 0, At: n - 10})
	ar, err := adm.AlterShareGroupOffsets(ctxTimeout(t, 10*time.Second), groupID, reset)
	if err != nil || ar.Error() != nil {
		t.Fatalf("alter share offsets: %v %v", err, ar.Error())
	}
	if st, _ := shareOffset(t, tb, groupID, topic); st.StartOffset != n-10 {
		t.Fatalf("start offset after the reset: %+v", st)
	}
	again := tb.client(kgo.ShareGroup(groupID), kgo.ConsumeTopics(topic))
	var redelivered []int64
	for len(redelivered) < 10 {
		fs := again.PollFetches(ctxTimeout(t, 30*time.Second))
		if err := fs.Err(); err != nil {
			t.Fatalf("poll after the reset: %v", err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			r.Ack(kgo.AckAccept)
			redelivered = append(redelivered, r.Offset)
		})
	}
	if redelivered[0] != n-10 || redelivered[9] != n-1 {
		t.Fatalf("after the reset the member got offsets %v", redelivered)
	}
	// Not while the group has a member.
	if ar, err := adm.AlterShareGroupOffsets(ctxTimeout(t, 10*time.Second), groupID, reset); err == nil && !errors.Is(ar.Error(), kerr.NonEmptyGroup) {
		t.Fatalf("alter with a member: %v", ar.Error())
	}
	if err := again.FlushAcks(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	again.Close()
	describeShare(t, adm, groupID, "the group empty again", func(d kadm.DescribedShareGroup) bool { return len(d.Members) == 0 })
	dg, err := adm.DeleteGroup(ctxTimeout(t, 10*time.Second), groupID)
	if err != nil || dg.Err != nil {
		t.Fatalf("delete: %v %+v", err, dg)
	}
	if st, _ := shareOffset(t, tb, groupID, topic); st.StartOffset != -1 {
		t.Fatalf("share state left after the delete: %+v", st)
	}
	ds, err := adm.DescribeShareGroups(ctxTimeout(t, 10*time.Second), groupID)
	if err != nil || !slices.Contains([]error{kerr.GroupIDNotFound}, ds[groupID].Err) {
		t.Fatalf("deleted group described: %v %+v", err, ds[groupID])
	}
}

// shareOffset reads partition 0 of topic through DescribeShareGroupOffsets, with the
// counts Shale adds in a tagged field.
func shareOffset(t *testing.T, tb *testBroker, groupID, topic string) (kmsg.DescribeShareGroupOffsetsResponseGroupTopicPartition, *sharegroup.PartitionState) {
	t.Helper()
	req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	req.Version = 1
	rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	rg.GroupID = groupID
	rt := kmsg.NewDescribeShareGroupOffsetsRequestGroupTopic()
	rt.Topic, rt.Partitions = topic, []int32{0}
	rg.Topics = append(rg.Topics, rt)
	req.Groups = append(req.Groups, rg)
	rc := dialRaw(t, tb.addr)
	resp := rc.roundTrip(req).(*kmsg.DescribeShareGroupOffsetsResponse)
	g := resp.Groups[0]
	if g.ErrorCode != 0 || len(g.Topics) != 1 || len(g.Topics[0].Partitions) != 1 {
		t.Fatalf("describe share offsets: %+v", resp)
	}
	p := g.Topics[0].Partitions[0]
	var counts *sharegroup.PartitionState
	p.UnknownTags.Each(func(tag uint32, b []byte) {
		var st sharegroup.PartitionState
		if tag == sharegroup.CountsTag && sharegroup.ParseCounts(b, &st) {
			counts = &st
		}
	})
	return p, counts
}
