package replication

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/partition"
)

// fakeSource is a one-partition source cluster: topic "s", its log in memory, served
// one batch per fetch.
type fakeSource struct {
	mu      sync.Mutex
	log     []byte
	end     int64
	fetches int
}

func (f *fakeSource) Request(ctx context.Context, _ int32, req kmsg.Request) (kmsg.Response, error) {
	switch r := req.(type) {
	case *kmsg.MetadataRequest:
		resp := kmsg.NewPtrMetadataResponse()
		t := kmsg.NewMetadataResponseTopic()
		t.Topic, t.TopicID = kmsg.StringPtr("s"), [16]byte{9}
		p := kmsg.NewMetadataResponseTopicPartition()
		p.Partition, p.Leader, p.LeaderEpoch = 0, 1, 5
		t.Partitions = append(t.Partitions, p)
		resp.Topics = append(resp.Topics, t)
		return resp, nil
	case *kmsg.FetchRequest:
		f.mu.Lock()
		f.fetches++
		off := r.Topics[0].Partitions[0].FetchOffset
		var batch []byte
		for b := f.log; len(b) > 0; {
			h, err := shalelog.ParseHeader(b)
			if err != nil {
				break
			}
			if h.BaseOffset == off {
				batch = b[:h.Size()]
				break
			}
			b = b[h.Size():]
		}
		end := f.end
		f.mu.Unlock()
		if batch == nil {
			// Caught up: a real source would hold the fetch for its max wait.
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(5 * time.Millisecond):
			}
		}
		resp := kmsg.NewPtrFetchResponse()
		t := kmsg.NewFetchResponseTopic()
		t.Topic = "s"
		p := kmsg.NewFetchResponseTopicPartition()
		p.HighWatermark, p.LastStableOffset, p.RecordBatches = end, end, batch
		t.Partitions = append(t.Partitions, p)
		resp.Topics = append(resp.Topics, t)
		return resp, nil
	}
	return nil, io.ErrUnexpectedEOF
}

func (f *fakeSource) Close() {}

// linkClock moves on only when the test fires it, by ten seconds at a time.
type linkClock struct {
	mu      sync.Mutex
	now     time.Time
	pending []chan time.Time
	asked   chan struct{}
}

func (c *linkClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *linkClock) After(time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	c.mu.Lock()
	c.pending = append(c.pending, ch)
	c.mu.Unlock()
	select {
	case c.asked <- struct{}{}:
	default:
	}
	return ch
}

func (c *linkClock) fire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(10 * time.Second)
	for _, ch := range c.pending {
		ch <- c.now
	}
	c.pending = nil
}

// TestMirrorCopyIsThrottledByTheLinkRate: with cluster.link.fetch.bytes.per.sec set, a
// copier stops once the link's budget is spent and waits on the manager's clock; the
// copy completes only as that clock moves, with the same offsets as the source.
func TestMirrorCopyIsThrottledByTheLinkRate(t *testing.T) {
	src := &fakeSource{}
	for i := range 20 {
		src.log = append(src.log, recordBatch(t, int64(i*10), 10, 5)...)
	}
	src.end = 200
	im := &metadata.Image{Offset: 5, ControllerID: 1, Brokers: map[int32]metadata.Broker{
		1: {ID: 1, Host: "127.0.0.1", Port: 1, Epoch: 3},
	}, Topics: map[string]*metadata.Topic{
		"m": {Name: "m", ID: [16]byte{7}, Partitions: []metadata.Partition{
			{Topic: "m", Index: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1},
		}},
	}, Links: metadata.ClusterLinks{"l": {Name: "l", Configs: map[string]string{
		metadata.LinkBootstrapServers: "src:9092", metadata.LinkFetchBytesPerSec: "1000"}}},
		Mirrors: metadata.MirrorTopics{"m": {Topic: "m", Link: "l", SourceTopic: "s", SourceEpochs: []int32{5}}},
	}
	store := &handStore{im: im, lease: true, epoch: 3}
	clock := &linkClock{now: time.Unix(1000, 0), asked: make(chan struct{}, 1)}
	m, err := NewManager(Config{NodeID: 1, LogDir: t.TempDir(), Clock: clock, ReplicaFetchBackoff: time.Millisecond,
		DialLink: func(*metadata.ClusterLink) (LinkConn, error) { return src, nil },
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil))}, store)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Error(err)
		}
	})
	m.apply(im, false)
	p := m.parts.Get("m", 0)
	waitAsked := func() {
		t.Helper()
		select {
		case <-clock.asked:
		case <-time.After(30 * time.Second):
			t.Fatalf("the copier never waited on the clock (log end %d)", p.LogEndOffset())
		}
	}
	waitAsked()
	if end := p.LogEndOffset(); end == 0 || end >= 200 {
		t.Fatalf("log end %d once the first second's budget was spent, want part of the 200 records", end)
	}
	fires := 0
	for p.LogEndOffset() < 200 {
		clock.fire()
		fires++
		if fires > 20 {
			t.Fatalf("log end %d after %d seconds of budget", p.LogEndOffset(), fires)
		}
		if p.LogEndOffset() < 200 {
			waitAsked()
		}
	}
	if fires < 2 {
		t.Fatalf("the copy needed %d refills of a 1000 B/s budget for %d bytes", fires, len(src.log))
	}
	if p.Role() != partition.RoleLeader || p.HighWatermark() != 200 {
		t.Fatalf("role %v, high watermark %d", p.Role(), p.HighWatermark())
	}
}
