package nullbroker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func start(t *testing.T, retain int64) *Broker {
	t.Helper()
	b, err := Start(Config{Addr: "127.0.0.1:0", RetainBytes: retain})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func client(t *testing.T, b *Broker, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.Addr())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func createTopic(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, parts int32) {
	t.Helper()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, parts, 1, nil, topic)
	if err != nil || resp.Err != nil {
		t.Fatalf("create %s: %v %v", topic, err, resp.Err)
	}
}

// produce sends n records idempotently (acks=all), or with the given acks.
func produce(t *testing.T, ctx context.Context, b *Broker, topic string, n int, opts ...kgo.Opt) {
	t.Helper()
	cl := client(t, b, append([]kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(time.Millisecond)}, opts...)...)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for i := range n {
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Key: []byte(strconv.Itoa(i % 7)), Value: []byte(fmt.Sprintf("v%06d", i))}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			mu.Lock()
			if first == nil {
				first = err
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	if first != nil {
		t.Fatalf("produce: %v", first)
	}
}

// consume reads every partition from its start until it has want records.
func consume(t *testing.T, ctx context.Context, b *Broker, want int, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	cl := client(t, b, opts...)
	var got []*kgo.Record
	for len(got) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records: %v", len(got), want, ctx.Err())
		}
		fs.EachError(func(topic string, p int32, err error) { t.Errorf("fetch %s/%d: %v", topic, p, err) })
		got = append(got, fs.Records()...)
	}
	return got
}

func TestProduceAndFetch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := start(t, 32<<20)
	admin := client(t, b)
	createTopic(t, ctx, admin, "t", 3)
	produce(t, ctx, b, "t", 1000)
	produce(t, ctx, b, "t", 500, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())

	got := consume(t, ctx, b, 1500, kgo.ConsumeTopics("t"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if len(got) != 1500 {
		t.Fatalf("consumed %d records, want 1500", len(got))
	}
	// Every partition's offsets run from 0 without a gap, and each
	// key's values come in the order they were produced.
	next := map[int32]int64{}
	for _, r := range got {
		if r.Offset != next[r.Partition] {
			t.Fatalf("partition %d: offset %d, want %d", r.Partition, r.Offset, next[r.Partition])
		}
		next[r.Partition]++
	}
	ends, err := kadm.NewClient(admin).ListEndOffsets(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	if total != 1500 {
		t.Errorf("end offsets add up to %d, want 1500", total)
	}
}

// acks=0 gets no response, and the records are still kept.
func TestAcksZero(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := start(t, 32<<20)
	createTopic(t, ctx, client(t, b), "z", 1)
	produce(t, ctx, b, "z", 100, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	got := consume(t, ctx, b, 100, kgo.ConsumeTopics("z"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if len(got) != 100 {
		t.Errorf("consumed %d, want 100", len(got))
	}
}

// Past the retention bound the oldest batches go and the log start moves;
// a fetch below it is out of range.
func TestRetentionBound(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := start(t, 4<<10)
	cl := client(t, b)
	createTopic(t, ctx, cl, "r", 1)
	produce(t, ctx, b, "r", 2000, kgo.ProducerLinger(0), kgo.MaxBufferedRecords(1))
	b.mu.Lock()
	p := b.topics["r"].parts[0]
	start, end, retained := p.start, p.end, b.retained
	b.mu.Unlock()
	if end != 2000 || start == 0 || retained > 4<<10+1<<10 {
		t.Fatalf("log start %d end %d, %d bytes retained", start, end, retained)
	}
	starts, err := kadm.NewClient(cl).ListStartOffsets(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := starts.Lookup("r", 0); o.Offset != start {
		t.Errorf("ListOffsets earliest %d, want %d", o.Offset, start)
	}
	req := kmsg.NewPtrFetchRequest()
	req.MaxBytes = 1 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "r"
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.PartitionMaxBytes = 0, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.OffsetOutOfRange.Code {
		t.Errorf("fetch below the log start: error %d, want OFFSET_OUT_OF_RANGE", code)
	}
	// What is retained is served.
	got := consume(t, ctx, b, int(end-start), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"r": {0: kgo.NewOffset().At(start)}}))
	if got[0].Offset != start || string(got[len(got)-1].Value) != "v001999" {
		t.Errorf("retained records run from %d to %q", got[0].Offset, got[len(got)-1].Value)
	}
}

// A consumer group of several members shares the partitions, and commits.
func TestConsumerGroup(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := start(t, 32<<20)
	admin := client(t, b)
	createTopic(t, ctx, admin, "g", 6)
	produce(t, ctx, b, "g", 600)
	// Start the group where the records begin.
	offs := kadm.Offsets{}
	for p := range int32(6) {
		offs.Add(kadm.Offset{Topic: "g", Partition: p, At: 0, LeaderEpoch: -1})
	}
	if resp, err := kadm.NewClient(admin).CommitOffsets(ctx, "grp", offs); err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}

	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	for range 3 {
		cl := client(t, b, kgo.ConsumerGroup("grp"), kgo.ConsumeTopics("g"), kgo.DisableAutoCommit())
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				fs := cl.PollFetches(cctx)
				if cctx.Err() != nil {
					return
				}
				mu.Lock()
				for _, r := range fs.Records() {
					seen[string(r.Value)] = true
				}
				done := len(seen) == 600
				mu.Unlock()
				if done {
					stop()
				}
			}
		}()
	}
	wg.Wait()
	if len(seen) != 600 {
		t.Fatalf("the group read %d of 600 records: %v", len(seen), ctx.Err())
	}
	fetched, err := kadm.NewClient(admin).FetchOffsets(ctx, "grp")
	if err != nil || fetched.Error() != nil {
		t.Fatalf("fetch offsets: %v %v", err, fetched.Error())
	}
	if o, ok := fetched.Lookup("g", 3); !ok || o.At != 0 {
		t.Errorf("committed offset of g/3: %+v %v", o, ok)
	}
}

// A join from an unknown member id is refused; a heartbeat from no member
// too.
func TestGroupErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := start(t, 32<<20)
	cl := client(t, b)
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = "nope", "m", 1
	resp, err := hb.RequestWith(ctx, cl)
	if err != nil || resp.ErrorCode != kerr.UnknownMemberID.Code {
		t.Errorf("heartbeat of an unknown member: %v, error %d", err, resp.ErrorCode)
	}
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.MemberID, join.ProtocolType = "nope", "made-up", "consumer"
	join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 10000, 10000
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
	jr, err := join.RequestWith(ctx, cl)
	if err != nil || !errors.Is(kerr.ErrorForCode(jr.ErrorCode), kerr.UnknownMemberID) {
		t.Errorf("join with a made-up member id: %v, error %d", err, jr.ErrorCode)
	}
}

// Close ends every connection and goroutine, a group member waiting in a
// join included.
func TestCloseLeavesNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	b, err := Start(Config{Addr: "127.0.0.1:0", RetainBytes: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.ConsumerGroup("c"), kgo.ConsumeTopics("x"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	cl.PollFetches(ctx)
	cancel()
	b.Close()
	cl.Close()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines before, %d after:\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
}

// The hand-written Fetch encoding decodes as kmsg's, at every version
// advertised, batches split across buffers included.
func TestAppendFetchDecodes(t *testing.T) {
	// Small batches are copied, large ones sent from where they are.
	big := bytes.Repeat([]byte("x"), copyBelow)
	want := "abc" + string(big) + "defg"
	fr := &fetchResult{topics: []fetchTopic{
		{name: "a", parts: []fetchPart{
			{partition: 0, hw: 10, lso: 10, start: 2, size: int64(len(want)), batches: [][]byte{[]byte("abc"), big, []byte("defg")}},
			{partition: 1, code: kerr.OffsetOutOfRange.Code, hw: 5, lso: 5, start: 0},
		}},
		{name: "bb", parts: []fetchPart{{partition: 3, hw: 0, lso: 0, start: 0}}},
	}}
	for v := versions[kmsg.Fetch.Int16()][0]; v <= versions[kmsg.Fetch.Int16()][1]; v++ {
		head := []byte{0, 0, 0, 0, 0, 0, 0, 9}
		if v >= 12 {
			head = append(head, 0)
		}
		bufs, total := appendFetch(net.Buffers{head}, v, fr)
		var raw []byte
		for _, b := range bufs {
			raw = append(raw, b...)
		}
		if len(raw) != total {
			t.Fatalf("v%d: total %d, %d bytes", v, total, len(raw))
		}
		resp := kmsg.NewPtrFetchResponse()
		resp.SetVersion(v)
		if err := resp.ReadFrom(raw[len(head):]); err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		if len(resp.Topics) != 2 || resp.Topics[0].Topic != "a" || resp.Topics[1].Topic != "bb" {
			t.Fatalf("v%d: topics %+v", v, resp.Topics)
		}
		p0, p1 := resp.Topics[0].Partitions[0], resp.Topics[0].Partitions[1]
		if string(p0.RecordBatches) != want || p0.HighWatermark != 10 || (v >= 5 && p0.LogStartOffset != 2) ||
			p1.ErrorCode != kerr.OffsetOutOfRange.Code || len(p1.RecordBatches) != 0 || resp.Topics[1].Partitions[0].Partition != 3 {
			t.Errorf("v%d: %+v", v, resp.Topics)
		}
	}
}

// Memory stays within the slabs faulted in at start, however many bytes
// go through: the oldest batches go to free a slab.
func TestSlabsBounded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := start(t, 3*slabSize) // five slabs
	createTopic(t, ctx, client(t, b), "s", 2)
	cl := client(t, b, kgo.DefaultProduceTopic("s"), kgo.ProducerBatchCompression(kgo.NoCompression()))
	v := make([]byte, 4<<10)
	var wg sync.WaitGroup
	for range 8 * slabSize / len(v) {
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Value: v}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.slabs != b.maxSlabs || b.maxSlabs != 5 {
		t.Errorf("%d slabs allocated, %d faulted in at start", b.slabs, b.maxSlabs)
	}
	if p := b.topics["s"].parts[0]; p.start == 0 {
		t.Errorf("nothing evicted: partition 0 runs from %d to %d", p.start, p.end)
	}
}
