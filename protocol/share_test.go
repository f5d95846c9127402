package protocol_test

import (
	"context"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	sharegroup "github.com/shalelog/shale/coordinator/share"
	"github.com/shalelog/shale/protocol"
	"github.com/shalelog/shale/replication/share"
	"github.com/shalelog/shale/security/acl"
)

// shareHarness drives raw ShareFetch and ShareAcknowledge requests at one broker.
type shareHarness struct {
	t     *testing.T
	tb    *testBroker
	cl    *kgo.Client
	topic string
	id    [16]byte
	group string
	epoch map[string]int32 // next share session epoch per member
}

func startSharePartitions(t *testing.T, limits share.Limits, topic string, configs map[string]*string) *shareHarness {
	t.Helper()
	scfg := &share.Config{Limits: limits, AutoOffsetReset: "earliest", Logger: quietLogger()}
	tb := launchShares(t, t.TempDir(), nil, brokerConfig(), nil, scfg)
	tb.createTopic(topic, 1, configs)
	return &shareHarness{t: t, tb: tb, cl: tb.client(), topic: topic, id: tb.broker.Image().Topic(topic).ID, group: "workers",
		epoch: map[string]int32{}}
}

func (h *shareHarness) produce(topic string, values ...string) {
	h.t.Helper()
	recs := make([]*kgo.Record, len(values))
	for i, v := range values {
		recs[i] = &kgo.Record{Topic: topic, Value: []byte(v)}
	}
	if err := h.cl.ProduceSync(ctxTimeout(h.t, 10*time.Second), recs...).FirstErr(); err != nil {
		h.t.Fatal(err)
	}
}

type ack struct {
	first, last int64
	types       []int8
}

// fetch sends a ShareFetch for partition 0 with acks, at the member's session epoch.
func (h *shareHarness) fetch(member string, maxRecords int32, wait time.Duration, acks ...ack) *kmsg.ShareFetchResponse {
	h.t.Helper()
	req := kmsg.NewPtrShareFetchRequest()
	req.GroupID, req.MemberID = kmsg.StringPtr(h.group), kmsg.StringPtr(member)
	req.ShareSessionEpoch = h.epoch[member]
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.MaxRecords, req.BatchSize = int32(wait.Milliseconds()), 1, 1<<20, maxRecords, maxRecords
	rt := kmsg.NewShareFetchRequestTopic()
	rt.TopicID = h.id
	rp := kmsg.NewShareFetchRequestTopicPartition()
	for _, a := range acks {
		b := kmsg.NewShareFetchRequestTopicPartitionAcknowledgementBatch()
		b.FirstOffset, b.LastOffset, b.AcknowledgeTypes = a.first, a.last, a.types
		rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, b)
	}
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctxTimeout(h.t, wait+10*time.Second), h.cl)
	if err != nil {
		h.t.Fatal(err)
	}
	if resp.ErrorCode == 0 {
		h.epoch[member]++
	}
	return resp
}

func (h *shareHarness) acknowledge(member string, epoch int32, acks ...ack) *kmsg.ShareAcknowledgeResponse {
	h.t.Helper()
	req := kmsg.NewPtrShareAcknowledgeRequest()
	req.GroupID, req.MemberID = kmsg.StringPtr(h.group), kmsg.StringPtr(member)
	req.ShareSessionEpoch = epoch
	rt := kmsg.NewShareAcknowledgeRequestTopic()
	rt.TopicID = h.id
	rp := kmsg.NewShareAcknowledgeRequestTopicPartition()
	for _, a := range acks {
		b := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
		b.FirstOffset, b.LastOffset, b.AcknowledgeTypes = a.first, a.last, a.types
		rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, b)
	}
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctxTimeout(h.t, 10*time.Second), h.cl)
	if err != nil {
		h.t.Fatal(err)
	}
	return resp
}

type acquired struct {
	first, last int64
	count       int16
}

// part returns the response's only partition, failing on a top-level error.
func sharePart(t *testing.T, resp *kmsg.ShareFetchResponse) *kmsg.ShareFetchResponseTopicPartition {
	t.Helper()
	if resp.ErrorCode != 0 {
		t.Fatalf("share fetch: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("share fetch answered %d topics", len(resp.Topics))
	}
	return &resp.Topics[0].Partitions[0]
}

func acquiredOf(t *testing.T, p *kmsg.ShareFetchResponseTopicPartition) []acquired {
	t.Helper()
	if p.ErrorCode != 0 {
		t.Fatalf("partition error %v", kerr.ErrorForCode(p.ErrorCode))
	}
	var out []acquired
	for _, a := range p.AcquiredRecords {
		out = append(out, acquired{a.FirstOffset, a.LastOffset, a.DeliveryCount})
	}
	if len(out) > 0 && len(p.Records) == 0 {
		t.Fatal("acquired records without record data")
	}
	return out
}

// readShareState reads the committed state of partition 0 from the controller.
func (h *shareHarness) committed() (int64, []string) {
	h.t.Helper()
	sts, err := h.tb.node.Broker.ReadShareState(ctxTimeout(h.t, 10*time.Second), h.group, map[string][]int32{h.topic: {0}}, false)
	if err != nil || len(sts) != 1 {
		h.t.Fatalf("read share state: %v %v", sts, err)
	}
	var batches []string
	for _, b := range sts[0].Batches {
		batches = append(batches, strconv.FormatInt(b.FirstOffset, 10)+"-"+strconv.FormatInt(b.LastOffset, 10)+":"+
			share.State(b.DeliveryState).String()+"x"+strconv.Itoa(int(b.DeliveryCount)))
	}
	return sts[0].StartOffset, batches
}

const (
	accept  int8 = 1
	release int8 = 2
	reject  int8 = 3
)

// Two members share one partition: each acquires its own records, acknowledgements are
// checked against who holds what, released records come back with their delivery
// count, and what is acknowledged is committed in the controller before the answer.
func TestShareFetchAcquireAndAcknowledge(t *testing.T) {
	h := startSharePartitions(t, share.Limits{LockDuration: time.Minute, DeliveryLimit: 5}, "tasks", nil)
	var vals []string
	for i := range 10 {
		vals = append(vals, "task-"+strconv.Itoa(i))
	}
	h.produce("tasks", vals...)

	got := acquiredOf(t, sharePart(t, h.fetch("m1", 5, time.Second)))
	if !slices.Equal(got, []acquired{{0, 4, 1}}) {
		t.Fatalf("m1 acquired %v, want 0-4", got)
	}
	got = acquiredOf(t, sharePart(t, h.fetch("m2", 100, time.Second)))
	if !slices.Equal(got, []acquired{{5, 9, 1}}) {
		t.Fatalf("m2 acquired %v, want 5-9", got)
	}
	// Nothing left: a third member's long poll ends empty.
	if got := acquiredOf(t, sharePart(t, h.fetch("m3", 100, 50*time.Millisecond))); len(got) != 0 {
		t.Fatalf("m3 acquired %v", got)
	}

	// m2 cannot acknowledge m1's records; the whole acknowledgement fails.
	resp := h.acknowledge("m2", h.epoch["m2"], ack{4, 5, []int8{accept}})
	if resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != kerr.InvalidRecordState.Code {
		t.Fatalf("acknowledging another member's record: %+v", resp)
	}
	h.epoch["m2"]++
	// Stale and unknown sessions.
	if resp := h.acknowledge("m2", h.epoch["m2"]+5, ack{5, 5, []int8{accept}}); resp.ErrorCode != kerr.InvalidShareSessionEpoch.Code {
		t.Fatalf("wrong epoch: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	if resp := h.acknowledge("nobody", 3, ack{5, 5, []int8{accept}}); resp.ErrorCode != kerr.ShareSessionNotFound.Code {
		t.Fatalf("no session: %v", kerr.ErrorForCode(resp.ErrorCode))
	}

	// m1 piggybacks per-record acknowledgements: 2 comes back, delivered a second time.
	p := sharePart(t, h.fetch("m1", 100, time.Second, ack{0, 4, []int8{accept, accept, release, reject, accept}}))
	if p.AcknowledgeErrorCode != 0 {
		t.Fatalf("piggybacked acknowledgement: %v", kerr.ErrorForCode(p.AcknowledgeErrorCode))
	}
	if got := acquiredOf(t, p); !slices.Equal(got, []acquired{{2, 2, 2}}) {
		t.Fatalf("m1 reacquired %v, want offset 2 a second time", got)
	}
	if spso, batches := h.committed(); spso != 2 {
		t.Fatalf("committed SPSO %d (%v), want 2", spso, batches)
	}

	if resp := h.acknowledge("m2", h.epoch["m2"], ack{5, 9, []int8{accept}}); resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("m2 accept: %+v", resp)
	}
	h.epoch["m2"]++
	// Closing m1's session acknowledges 2 and releases nothing else.
	resp = h.acknowledge("m1", -1, ack{2, 2, []int8{accept}})
	if resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("m1 closing accept: %+v", resp)
	}
	if spso, batches := h.committed(); spso != 10 || len(batches) != 0 {
		t.Fatalf("committed SPSO %d with %v, want 10 and nothing in flight", spso, batches)
	}
	// A new session must not carry acknowledgements.
	h.epoch["m4"] = 0
	if resp := h.fetch("m4", 10, 0, ack{1, 1, []int8{accept}}); resp.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("acknowledgement in a new session: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
}

// A long poll is answered by an append, and only committed records are delivered.
func TestShareFetchLongPollWokenByAppend(t *testing.T) {
	h := startSharePartitions(t, share.Limits{LockDuration: time.Minute}, "later", nil)
	sharePart(t, h.fetch("m1", 10, 0)) // open the session
	done := make(chan *kmsg.ShareFetchResponse, 1)
	go func() {
		req := kmsg.NewPtrShareFetchRequest()
		req.GroupID, req.MemberID = kmsg.StringPtr(h.group), kmsg.StringPtr("m1")
		req.ShareSessionEpoch, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.MaxRecords = 1, 30000, 1, 1<<20, 10
		resp, err := req.RequestWith(context.Background(), h.cl)
		if err != nil {
			resp = nil
		}
		done <- resp
	}()
	h.produce("later", "hello")
	resp := <-done
	if resp == nil {
		t.Fatal("long poll failed")
	}
	if got := acquiredOf(t, sharePart(t, resp)); !slices.Equal(got, []acquired{{0, 0, 1}}) {
		t.Fatalf("acquired %v after the append", got)
	}
}

// A lock that expires brings the record back with its delivery count; at the delivery
// limit it is archived and written to the dead-letter topic with its origin in headers,
// and a REJECT goes there too.
func TestShareLockExpiryDeliveryLimitAndDeadLetters(t *testing.T) {
	dlq := "tasks.dlq"
	h := startSharePartitions(t, share.Limits{LockDuration: 200 * time.Millisecond, DeliveryLimit: 2}, "jobs",
		map[string]*string{"share.dead.letter.topic": &dlq})
	h.tb.createTopic(dlq, 1, nil)
	h.produce("jobs", "poison")

	if got := acquiredOf(t, sharePart(t, h.fetch("m1", 1, time.Second))); !slices.Equal(got, []acquired{{0, 0, 1}}) {
		t.Fatalf("first delivery %v", got)
	}
	// m1 "crashes": its lock expires and m2 gets the record, delivered a second time.
	var got []acquired
	for deadline := time.Now().Add(10 * time.Second); len(got) == 0 && time.Now().Before(deadline); {
		got = acquiredOf(t, sharePart(t, h.fetch("m2", 1, 2*time.Second)))
	}
	if !slices.Equal(got, []acquired{{0, 0, 2}}) {
		t.Fatalf("redelivery %v, want offset 0 a second time", got)
	}
	h.produce("jobs", "bad", "good")
	// Released at the limit: archived, and dead-lettered before that is committed.
	p := sharePart(t, h.fetch("m2", 2, time.Second, ack{0, 0, []int8{release}}))
	if p.AcknowledgeErrorCode != 0 {
		t.Fatalf("release: %v", kerr.ErrorForCode(p.AcknowledgeErrorCode))
	}
	if got := acquiredOf(t, p); !slices.Equal(got, []acquired{{1, 2, 1}}) {
		t.Fatalf("acquired %v, want 1-2", got)
	}
	resp := h.acknowledge("m2", h.epoch["m2"], ack{1, 2, []int8{reject, accept}})
	if resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("reject: %+v", resp)
	}
	if spso, batches := h.committed(); spso != 3 {
		t.Fatalf("committed SPSO %d with %v, want 3", spso, batches)
	}

	cons := h.tb.client(kgo.ConsumeTopics(dlq), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var dead []*kgo.Record
	ctx := ctxTimeout(t, 10*time.Second)
	for len(dead) < 2 && ctx.Err() == nil {
		dead = append(dead, cons.PollFetches(ctx).Records()...)
	}
	if len(dead) != 2 {
		t.Fatalf("dead letters %d, want 2", len(dead))
	}
	want := []map[string]string{
		{share.HeaderTopic: "jobs", share.HeaderPartition: "0", share.HeaderOffset: "0", share.HeaderDeliveryCount: "2", share.HeaderGroup: "workers"},
		{share.HeaderTopic: "jobs", share.HeaderPartition: "0", share.HeaderOffset: "1", share.HeaderDeliveryCount: "1", share.HeaderGroup: "workers"},
	}
	for i, r := range dead {
		hs := map[string]string{}
		for _, hd := range r.Headers {
			hs[hd.Key] = string(hd.Value)
		}
		for k, v := range want[i] {
			if hs[k] != v {
				t.Errorf("dead letter %d (%q): header %s=%q, want %q", i, r.Value, k, hs[k], v)
			}
		}
	}
	if string(dead[0].Value) != "poison" || string(dead[1].Value) != "bad" {
		t.Fatalf("dead letters %q, %q", dead[0].Value, dead[1].Value)
	}
}

// A restarted broker reads the state back from the controller: acknowledged records
// stay acknowledged, and what was acquired comes back available with its delivery count.
func TestShareStateSurvivesRestart(t *testing.T) {
	h := startSharePartitions(t, share.Limits{LockDuration: time.Minute}, "durable", nil)
	h.produce("durable", "a", "b", "c", "d")
	if got := acquiredOf(t, sharePart(t, h.fetch("m1", 4, time.Second))); !slices.Equal(got, []acquired{{0, 3, 1}}) {
		t.Fatalf("acquired %v", got)
	}
	resp := h.acknowledge("m1", h.epoch["m1"], ack{0, 1, []int8{accept, reject}})
	if resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("acknowledge: %+v", resp)
	}
	// The acquisition of 2-3 is committed by the flusher soon after, not with the ack.
	ctx := ctxTimeout(t, 10*time.Second)
	for ctx.Err() == nil {
		if _, batches := h.committed(); slices.Equal(batches, []string{"2-3:AVAILABLEx1"}) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	h.tb = h.tb.restart()
	h.cl = h.tb.client()
	h.epoch = map[string]int32{}
	got := acquiredOf(t, sharePart(t, h.fetch("m2", 10, 5*time.Second)))
	if !slices.Equal(got, []acquired{{2, 3, 2}}) {
		t.Fatalf("after restart acquired %v, want 2-3 delivered a second time", got)
	}
}

// An admin's reset or deletion of an empty group's state is seen by the leader when a
// member next opens a share session.
func TestShareStateAdminResetAndDelete(t *testing.T) {
	h := startSharePartitions(t, share.Limits{LockDuration: time.Minute}, "reset", nil)
	h.produce("reset", "0", "1", "2", "3", "4", "5")
	if got := acquiredOf(t, sharePart(t, h.fetch("m1", 10, time.Second))); !slices.Equal(got, []acquired{{0, 5, 1}}) {
		t.Fatalf("acquired %v", got)
	}
	if resp := h.acknowledge("m1", -1, ack{0, 5, []int8{accept}}); resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("accept: %+v", resp)
	}
	states := share.NewStates(h.tb.shares, h.tb.node.Broker)
	ctx := ctxTimeout(t, 10*time.Second)
	if err := states.AlterShareStartOffsets(ctx, h.group, []sharegroup.PartitionOffset{{Topic: "reset", Partition: 0, StartOffset: 4}}); err != nil {
		t.Fatal(err)
	}
	h.epoch["m2"] = 0
	if got := acquiredOf(t, sharePart(t, h.fetch("m2", 10, time.Second))); !slices.Equal(got, []acquired{{4, 5, 1}}) {
		t.Fatalf("after the reset to 4 acquired %v", got)
	}
	if resp := h.acknowledge("m2", -1); resp.ErrorCode != 0 {
		t.Fatalf("close: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	if err := states.DeleteShareGroupState(ctx, h.group, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := states.ListShareStateGroups(ctx); err != nil || len(got) != 0 {
		t.Fatalf("groups with state after the deletion: %v %v", got, err)
	}
	h.epoch["m3"] = 0
	if got := acquiredOf(t, sharePart(t, h.fetch("m3", 10, time.Second))); !slices.Equal(got, []acquired{{0, 5, 1}}) {
		t.Fatalf("after the deletion acquired %v, want everything afresh (earliest)", got)
	}
	// The new state is committed by the flusher, not with the fetch.
	for {
		sum, err := states.ReadShareGroupState(ctx, h.group)
		if err == nil && len(sum) == 1 {
			if sum[0].Acquired != 6 || sum[0].StateEpoch != 2 {
				t.Fatalf("summary %+v", sum)
			}
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("summary %+v %v", sum, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A share session ends with the connection that opened it: a consumer that vanishes
// gives its records back at once, not when their locks expire.
func TestShareSessionEndsWithItsConnection(t *testing.T) {
	h := startSharePartitions(t, share.Limits{LockDuration: time.Hour}, "crash", nil)
	h.produce("crash", "a", "b")
	rc := dialRaw(t, h.tb.addr)
	req := kmsg.NewPtrShareFetchRequest()
	req.SetVersion(1)
	req.GroupID, req.MemberID = kmsg.StringPtr(h.group), kmsg.StringPtr("doomed")
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.MaxRecords = 1000, 1, 1<<20, 10
	rt := kmsg.NewShareFetchRequestTopic()
	rt.TopicID = h.id
	rt.Partitions = append(rt.Partitions, kmsg.NewShareFetchRequestTopicPartition())
	req.Topics = append(req.Topics, rt)
	resp := rc.roundTrip(req).(*kmsg.ShareFetchResponse)
	if got := acquiredOf(t, sharePart(t, resp)); !slices.Equal(got, []acquired{{0, 1, 1}}) {
		t.Fatalf("acquired %v", got)
	}
	rc.c.Close()
	var got []acquired
	ctx := ctxTimeout(t, 10*time.Second)
	for len(got) == 0 && ctx.Err() == nil {
		got = acquiredOf(t, sharePart(t, h.fetch("survivor", 10, time.Second)))
	}
	if !slices.Equal(got, []acquired{{0, 1, 2}}) {
		t.Fatalf("after the connection closed acquired %v, want 0-1 a second time", got)
	}
}

// ShareFetch and ShareAcknowledge need READ on the group, and READ on each topic.
func TestShareFetchACLs(t *testing.T) {
	cfg := brokerConfig()
	cfg.Authorizer = acl.NewAuthorizer([]string{"User:admin"}, false)
	protocol.SetTestPrincipals(&cfg, func(id string) string { return "User:" + id })
	scfg := &share.Config{AutoOffsetReset: "earliest", Logger: quietLogger()}
	tb := launchShares(t, t.TempDir(), nil, cfg, nil, scfg)
	b := &aclBroker{testBroker: tb}
	b.topic(t, "secret")
	if err := produceOne(t, b.as("admin"), "secret"); err != nil {
		t.Fatal(err)
	}
	h := &shareHarness{t: t, tb: tb, cl: b.as("carol"), topic: "secret", id: tb.broker.Image().Topic("secret").ID, group: "workers",
		epoch: map[string]int32{}}
	if resp := h.fetch("m1", 10, 0); resp.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("without group READ: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	if resp := h.acknowledge("m1", 1, ack{0, 0, []int8{accept}}); resp.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("acknowledge without group READ: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	b.grant(t, kadm.NewACLs().Groups("workers").Allow("User:carol").Operations(kadm.OpRead))
	if p := sharePart(t, h.fetch("m1", 10, 0)); p.ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("without topic READ: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	b.grant(t, kadm.NewACLs().Topics("secret").Allow("User:carol").Operations(kadm.OpRead))
	h.epoch["m1"] = 0
	if got := acquiredOf(t, sharePart(t, h.fetch("m1", 10, time.Second))); !slices.Equal(got, []acquired{{0, 0, 1}}) {
		t.Fatalf("with both: acquired %v", got)
	}
}

// share.auto.offset.reset=latest (Kafka's default): a share group new to a partition
// starts at its end, and gets only what is produced afterwards.
func TestShareAutoOffsetResetLatest(t *testing.T) {
	scfg := &share.Config{Logger: quietLogger()}
	tb := launchShares(t, t.TempDir(), nil, brokerConfig(), nil, scfg)
	tb.createTopic("news", 1, nil)
	h := &shareHarness{t: t, tb: tb, cl: tb.client(), topic: "news", id: tb.broker.Image().Topic("news").ID, group: "readers",
		epoch: map[string]int32{}}
	h.produce("news", "old", "older")
	if got := acquiredOf(t, sharePart(t, h.fetch("m1", 10, 100*time.Millisecond))); len(got) != 0 {
		t.Fatalf("acquired %v from before the group existed", got)
	}
	h.produce("news", "new")
	var got []acquired
	ctx := ctxTimeout(t, 10*time.Second)
	for len(got) == 0 && ctx.Err() == nil {
		got = acquiredOf(t, sharePart(t, h.fetch("m1", 10, time.Second)))
	}
	if !slices.Equal(got, []acquired{{2, 2, 1}}) {
		t.Fatalf("acquired %v, want only the new record", got)
	}
}

// Stopping the broker stops every goroutine of the share-partition manager, waiting
// acknowledgements and releases included.
func TestShareManagerLeavesNoGoroutines(t *testing.T) {
	h := startSharePartitions(t, share.Limits{LockDuration: time.Second}, "leak", nil)
	h.produce("leak", "a", "b", "c")
	sharePart(t, h.fetch("m1", 2, time.Second))
	h.acknowledge("m1", h.epoch["m1"], ack{0, 0, []int8{accept}})
	h.epoch["m1"]++
	h.acknowledge("m1", -1)
	h.cl.Close()
	h.tb.stop()
	ctx := ctxTimeout(t, 10*time.Second)
	for {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		var left []string
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "shale/replication/share.") {
				left = append(left, g)
			}
		}
		if len(left) == 0 {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("share goroutines left after the broker stopped:\n%s", strings.Join(left, "\n\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
