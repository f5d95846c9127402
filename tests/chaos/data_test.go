package chaos

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The data-safety faults of issue 23 (recreate_test.go, purge_test.go,
// retention_test.go) reach paths that the process-level faults of TestChaos do not: a
// topic deleted and recreated under the same name while a broker is cut off, a
// DeleteRecords whose leader dies at once, and retention by bytes with a lagging follower.
// Each runs with SHALE_CHAOS=full (make chaos), with SHALE_CHAOS=data (all three), or
// with SHALE_CHAOS set to its own name.
func dataFault(t *testing.T, name string) {
	t.Helper()
	switch os.Getenv("SHALE_CHAOS") {
	case "full", "data", name:
		return
	}
	t.Skipf("the %s fault runs with SHALE_CHAOS=full (make chaos), SHALE_CHAOS=data or SHALE_CHAOS=%s", name, name)
}

// request sends req to this broker only (no retries, no routing to a leader).
func (n *node) request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	seeds := n.probe.SeedBrokers()
	if len(seeds) == 0 {
		return nil, errors.New("no seed broker")
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := seeds[0].Request(rctx, req)
	if err != nil {
		return nil, fmt.Errorf("%T to %v: %w", req, n, err)
	}
	return resp, nil
}

// topicID is the topic's id as the broker's metadata shows it.
func topicID(resp *kmsg.MetadataResponse, topic string) ([16]byte, bool) {
	for _, t := range resp.Topics {
		if t.Topic != nil && *t.Topic == topic && t.ErrorCode == 0 {
			return t.TopicID, true
		}
	}
	return [16]byte{}, false
}

// listOffset asks broker n, as the leader of topic/p in leader epoch epoch (-1: any), for
// the offset at timestamp ts (-2 earliest, -1 latest: the high watermark). It returns
// the offset, the leader epoch the answer names, and the partition's error.
func (n *node) listOffset(ctx context.Context, topic string, p int32, epoch int32, ts int64) (int64, int32, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.Timestamp = p, epoch, ts
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kresp, err := n.request(ctx, req)
	if err != nil {
		return 0, 0, err
	}
	resp := kresp.(*kmsg.ListOffsetsResponse)
	for _, t := range resp.Topics {
		for _, rp := range t.Partitions {
			if t.Topic == topic && rp.Partition == p {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					return 0, 0, err
				}
				return rp.Offset, rp.LeaderEpoch, nil
			}
		}
	}
	return 0, 0, fmt.Errorf("ListOffsets from %v: no answer for %s/%d", n, topic, p)
}

// fetchResult is one partition of a consumer Fetch sent straight to one broker.
type fetchResult struct {
	err            error // the partition's error code, as an error
	hw, logStart   int64
	batches        []batchSpan
	records        []seenRecord // the records of the uncompressed batches
	compressed     int          // batches not decoded
	requestedFetch int64
}

// batchSpan is one record batch of a fetch: its first and last offsets.
type batchSpan struct{ base, last int64 }

// fetchAt sends a consumer Fetch (replica id -1, no session, no wait) for topic/p at
// offset to broker n, naming the topic both by name and by id so that either request
// version carries it.
func (n *node) fetchAt(ctx context.Context, topic string, id [16]byte, p int32, offset int64) (fetchResult, error) {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = 0
	req.MinBytes = 0
	req.MaxBytes = 1 << 20
	req.SessionID, req.SessionEpoch = 0, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.CurrentLeaderEpoch, rp.LogStartOffset = p, offset, -1, -1
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kresp, err := n.request(ctx, req)
	if err != nil {
		return fetchResult{}, err
	}
	resp := kresp.(*kmsg.FetchResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return fetchResult{}, fmt.Errorf("fetch from %v: %w", n, err)
	}
	for _, t := range resp.Topics {
		for _, rp := range t.Partitions {
			if rp.Partition != p {
				continue
			}
			out := fetchResult{err: kerr.ErrorForCode(rp.ErrorCode), hw: rp.HighWatermark, logStart: rp.LogStartOffset, requestedFetch: offset}
			out.batches = batchSpans(rp.RecordBatches)
			out.records, out.compressed = decodeRecords(p, rp.RecordBatches)
			return out, nil
		}
	}
	return fetchResult{}, fmt.Errorf("fetch from %v: no answer for %s/%d", n, topic, p)
}

// batchSpans reads the base offset and last offset delta of each whole RecordBatch.
func batchSpans(b []byte) []batchSpan {
	var out []batchSpan
	for len(b) >= 27 {
		base := int64(binary.BigEndian.Uint64(b[0:8]))
		length := int(binary.BigEndian.Uint32(b[8:12]))
		delta := int64(int32(binary.BigEndian.Uint32(b[23:27])))
		if length <= 0 || 12+length > len(b) {
			break // a partial batch at the end of a fetch
		}
		out = append(out, batchSpan{base: base, last: base + delta})
		b = b[12+length:]
	}
	return out
}

// decodeRecords reads the records of every whole, uncompressed batch; it counts the
// compressed ones, which it leaves alone.
func decodeRecords(p int32, b []byte) (out []seenRecord, compressed int) {
	for len(b) >= 12 {
		length := int(binary.BigEndian.Uint32(b[8:12]))
		if length <= 0 || 12+length > len(b) {
			break
		}
		var batch kmsg.RecordBatch
		if err := batch.ReadFrom(b[:12+length]); err != nil {
			break
		}
		b = b[12+length:]
		if batch.Attributes&0x07 != 0 {
			compressed++
			continue
		}
		recs := batch.Records
		for range batch.NumRecords {
			l, n := binary.Varint(recs)
			if n <= 0 || int(l) < 0 || n+int(l) > len(recs) {
				break
			}
			var r kmsg.Record
			if err := r.ReadFrom(recs[:n+int(l)]); err != nil {
				break
			}
			recs = recs[n+int(l):]
			out = append(out, seenRecord{value: stripPad(string(r.Value)), part: p, offset: batch.FirstOffset + int64(r.OffsetDelta)})
		}
	}
	return out, compressed
}

// clientOn is a franz-go client seeded with the given brokers only.
func clientOn(nodes []*node, opts ...kgo.Opt) (*kgo.Client, error) {
	var seeds []string
	for _, n := range nodes {
		seeds = append(seeds, n.brokerAddr())
	}
	return kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(seeds...),
		kgo.DialTimeout(3 * time.Second),
		kgo.MetadataMinAge(500 * time.Millisecond),
	}, opts...)...)
}

// acked is one acknowledged record of the data faults: its value names the producer (and
// so the topic incarnation) and a sequence number.
type acked struct {
	value  string
	part   int32
	offset int64
}

// valueProducer writes records whose values are prefix-seq to chosen partitions, acks=all
// and idempotent, and remembers what was acknowledged.
type valueProducer struct {
	cl     *kgo.Client
	topic  string
	prefix string

	mu      sync.Mutex
	next    int64
	acks    []acked
	failed  int
	lastErr error
	wg      sync.WaitGroup
	stopped chan struct{}
	cancel  context.CancelFunc
}

func newValueProducer(cl *kgo.Client, topic, prefix string) *valueProducer {
	return &valueProducer{cl: cl, topic: topic, prefix: prefix}
}

// send hands one record for part to the producer.
func (vp *valueProducer) send(ctx context.Context, part int32, pad int) {
	vp.mu.Lock()
	seq := vp.next
	vp.next++
	vp.mu.Unlock()
	v := fmt.Sprintf("%s-%d", vp.prefix, seq)
	if pad > len(v) {
		v += "." + strings.Repeat("x", pad-len(v)-1)
	}
	vp.cl.Produce(ctx, &kgo.Record{Topic: vp.topic, Partition: part, Value: []byte(v)}, func(r *kgo.Record, err error) {
		vp.mu.Lock()
		defer vp.mu.Unlock()
		if err != nil {
			vp.failed++
			vp.lastErr = err
			return
		}
		vp.acks = append(vp.acks, acked{value: stripPad(string(r.Value)), part: r.Partition, offset: r.Offset})
	})
}

// run sends rate records a second round-robin over parts until stop.
func (vp *valueProducer) run(parts []int32, rate, pad int) {
	ctx, cancel := context.WithCancel(context.Background())
	vp.cancel = cancel
	vp.stopped = make(chan struct{})
	vp.wg.Add(1)
	go func() {
		defer vp.wg.Done()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		per := max(1, rate/100)
		i := 0
		for {
			select {
			case <-vp.stopped:
				return
			case <-tick.C:
			}
			for range per {
				vp.send(ctx, parts[i%len(parts)], pad)
				i++
			}
		}
	}()
}

// stop ends run (if running), waits up to drain for what is in flight and fails the rest.
func (vp *valueProducer) stop(drain time.Duration) {
	if vp.stopped != nil {
		close(vp.stopped)
		vp.wg.Wait()
		vp.stopped = nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), drain)
	_ = vp.cl.Flush(ctx)
	cancel()
	if vp.cancel != nil {
		vp.cancel()
	}
}

func (vp *valueProducer) snapshot() (acks []acked, failed int, lastErr error) {
	vp.mu.Lock()
	defer vp.mu.Unlock()
	return slices.Clone(vp.acks), vp.failed, vp.lastErr
}

// stripPad drops the padding a value may carry.
func stripPad(v string) string {
	if i := strings.IndexByte(v, '.'); i >= 0 {
		return v[:i]
	}
	return v
}

// seenRecord is one record a consumer got.
type seenRecord struct {
	value  string
	part   int32
	offset int64
}

// liveConsumer reads partitions of a topic from their start as they grow (no group),
// resetting to the log start on OFFSET_OUT_OF_RANGE, and keeps every record it got.
type liveConsumer struct {
	cl   *kgo.Client
	mu   sync.Mutex
	seen []seenRecord
	next map[int32]int64 // one past the last offset got, per partition
	errs int
	done chan struct{}
	stop context.CancelFunc
}

func startLiveConsumer(nodes []*node, topic string, parts int32, opts ...kgo.Opt) (*liveConsumer, error) {
	want := map[int32]kgo.Offset{}
	for p := range parts {
		want[p] = kgo.NewOffset().AtStart()
	}
	cl, err := clientOn(nodes, append([]kgo.Opt{
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: want}),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100 * time.Millisecond),
		kgo.FetchMaxBytes(64 << 20),
		kgo.FetchMaxPartitionBytes(32 << 20),
	}, opts...)...)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	lc := &liveConsumer{cl: cl, next: map[int32]int64{}, done: make(chan struct{}), stop: cancel}
	go func() {
		defer close(lc.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			var got []seenRecord
			errs := 0
			fs.EachError(func(string, int32, error) { errs++ })
			fs.EachRecord(func(r *kgo.Record) {
				got = append(got, seenRecord{value: stripPad(string(r.Value)), part: r.Partition, offset: r.Offset})
			})
			lc.mu.Lock()
			lc.errs += errs
			lc.seen = append(lc.seen, got...)
			for _, r := range got {
				lc.next[r.part] = max(lc.next[r.part], r.offset+1)
			}
			lc.mu.Unlock()
		}
	}()
	return lc, nil
}

func (lc *liveConsumer) snapshot() ([]seenRecord, map[int32]int64) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	next := map[int32]int64{}
	for p, o := range lc.next {
		next[p] = o
	}
	return slices.Clone(lc.seen), next
}

func (lc *liveConsumer) close() {
	lc.stop()
	<-lc.done
	closeBounded(lc.cl, 10*time.Second)
}

// readRange reads every partition of topic from its log start to its high watermark as
// ListOffsets reports them when the read starts (through any broker, so from the
// leaders), within timeout.
func readRange(nodes []*node, topic string, parts int32, timeout time.Duration) ([]seenRecord, map[int32]int64, map[int32]int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cl, err := clientOn(nodes)
	if err != nil {
		return nil, nil, nil, err
	}
	starts, ends := map[int32]int64{}, map[int32]int64{}
	for len(ends) < int(parts) || len(starts) < int(parts) {
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = -1
		for _, ts := range []int64{-2, -1} {
			req.Topics = nil
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = topic
			for p := range parts {
				rp := kmsg.NewListOffsetsRequestTopicPartition()
				rp.Partition, rp.CurrentLeaderEpoch, rp.Timestamp = p, -1, ts
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
			for _, sh := range cl.RequestSharded(ctx, req) {
				if sh.Err != nil {
					continue
				}
				for _, t := range sh.Resp.(*kmsg.ListOffsetsResponse).Topics {
					for _, rp := range t.Partitions {
						if rp.ErrorCode != 0 {
							continue
						}
						if ts == -2 {
							starts[rp.Partition] = rp.Offset
						} else {
							ends[rp.Partition] = rp.Offset
						}
					}
				}
			}
		}
		if ctx.Err() != nil {
			cl.Close()
			return nil, starts, ends, fmt.Errorf("list offsets of %s: %d/%d starts and %d/%d ends after %v", topic, len(starts), parts, len(ends), parts, timeout)
		}
		if len(ends) < int(parts) || len(starts) < int(parts) {
			time.Sleep(200 * time.Millisecond)
		}
	}
	cl.Close()
	want := map[int32]kgo.Offset{}
	for p, end := range ends {
		if end > starts[p] {
			want[p] = kgo.NewOffset().At(starts[p])
		}
	}
	if len(want) == 0 {
		return nil, starts, ends, nil
	}
	rd, err := clientOn(nodes,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: want}),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		return nil, starts, ends, err
	}
	defer rd.Close()
	var out []seenRecord
	for len(want) > 0 {
		fs := rd.PollFetches(ctx)
		if ctx.Err() != nil {
			return out, starts, ends, fmt.Errorf("read of %s incomplete after %v: %d partitions short", topic, timeout, len(want))
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= ends[r.Partition] {
				return
			}
			out = append(out, seenRecord{value: stripPad(string(r.Value)), part: r.Partition, offset: r.Offset})
			if r.Offset+1 >= ends[r.Partition] {
				delete(want, r.Partition)
			}
		})
	}
	return out, starts, ends, nil
}

// running is the nodes of ns that run.
func running(ns []*node) []*node {
	return slices.DeleteFunc(slices.Clone(ns), func(n *node) bool { return !n.running() })
}
