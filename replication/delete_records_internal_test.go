package replication

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/metadata"
)

// DeleteRecords is answered only once every live follower's log start offset has reached
// the requested offset (Kafka's DelayedDeleteRecords). Answered at the leader's own log
// start, a leader killed before its followers' next fetch leaves a follower that still
// holds the deleted records to become leader and serve them again.
func TestDeleteRecordsWaitsForTheFollowers(t *testing.T) {
	st := &applyStore{im: topicImage(10, oldTopicID, metadata.Partition{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3},
		Leader: 1, LeaderEpoch: 4, PartitionEpoch: 9})}
	m := testManager(t, t.TempDir(), st)
	parts := []*ProducePartition{{Topic: "t", Index: 0, Records: recordBatch(t, 0, 10, 4)}}
	m.Append(context.Background(), 1, parts)
	if parts[0].Err != nil {
		t.Fatal(parts[0].Err)
	}
	fetch := func(id int32, logStart int64) {
		t.Helper()
		res := m.Fetch(Reader{ReplicaID: id, BrokerEpoch: 7}, FetchPartition{Topic: "t", FetchOffset: 10, CurrentLeaderEpoch: -1,
			LastFetchedEpoch: -1, LogStartOffset: logStart, MaxBytes: 1 << 20})
		if res.View != nil {
			res.View.Release()
		}
		if res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	fetch(2, 0)
	fetch(3, 0)

	g, err := m.StartDeleteRecords("t", 0, 6)
	if err != nil {
		t.Fatal(err)
	}
	if low, done, err := g.Poll(); done || err != nil {
		t.Fatalf("purge done (low watermark %d, %v) before any follower moved its log start", low, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := g.Await(ctx); !errors.Is(err, kerr.RequestTimedOut) {
		t.Fatalf("purge that no follower applied answered %v, want REQUEST_TIMED_OUT", err)
	}

	answered := make(chan error, 1)
	go func() {
		low, err := g.Await(context.Background())
		if err == nil && low != 6 {
			err = errors.New("wrong low watermark")
		}
		answered <- err
	}()
	fetch(2, 6)
	select {
	case err := <-answered:
		t.Fatalf("purge answered (%v) while follower 3 still starts at 0", err)
	case <-time.After(100 * time.Millisecond):
	}
	fetch(3, 6)
	select {
	case err := <-answered:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("purge not answered once every follower's log start reached it")
	}

	// A fenced broker's replica does not hold a purge back, as in Kafka.
	fenced := topicImage(11, oldTopicID, metadata.Partition{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2},
		Leader: 1, LeaderEpoch: 4, PartitionEpoch: 10})
	b := fenced.Brokers[3]
	b.Fenced = true
	fenced.Brokers[3] = b
	m.apply(fenced, false)
	st.im = fenced
	g, err = m.StartDeleteRecords("t", 0, 8)
	if err != nil {
		t.Fatal(err)
	}
	fetch(2, 8)
	if low, done, err := g.Poll(); !done || err != nil || low != 8 {
		t.Fatalf("purge with only a fenced replica behind: low watermark %d, done %v, %v", low, done, err)
	}

	// But one in the ISR does, fenced or not: this broker's metadata may lag the
	// partition state (broker 3 unfenced and added back since), and any ISR member may
	// be elected next. Simulation seed 5729 found the purge undone that way.
	inISR := topicImage(12, oldTopicID, metadata.Partition{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3},
		Leader: 1, LeaderEpoch: 4, PartitionEpoch: 11})
	inISR.Brokers[3] = b // still fenced in this image
	m.apply(inISR, false)
	st.im = inISR
	g, err = m.StartDeleteRecords("t", 0, 9)
	if err != nil {
		t.Fatal(err)
	}
	fetch(2, 9)
	if low, done, err := g.Poll(); done || err != nil {
		t.Fatalf("purge done (low watermark %d, %v) while ISR member 3 starts at 6", low, err)
	}
	fetch(3, 9)
	if low, done, err := g.Poll(); !done || err != nil || low != 9 {
		t.Fatalf("purge once every ISR member moved: low watermark %d, done %v, %v", low, done, err)
	}
}

// afterClock is an AfterClock whose After channels fire only when the test says.
type afterClock struct {
	mu      sync.Mutex
	pending []chan time.Time
	asked   chan struct{} // receives at each After
}

func (c *afterClock) Now() time.Time { return time.Unix(1000, 0) }

func (c *afterClock) After(time.Duration) <-chan time.Time {
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

func (c *afterClock) fire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ch := range c.pending {
		ch <- time.Unix(1000, 0)
	}
	c.pending = nil
}

// AwaitPurges rechecks on the manager's clock: fencing the one follower that holds a
// purge back changes no partition state, so only the recheck answers it. Under one
// deadline, a purge still held back when it ends is REQUEST_TIMED_OUT.
func TestAwaitPurgesRechecksOnTheManagersClock(t *testing.T) {
	st := &applyStore{im: topicImage(10, oldTopicID, metadata.Partition{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2},
		Leader: 1, LeaderEpoch: 4, PartitionEpoch: 9})}
	clock := &afterClock{asked: make(chan struct{}, 1)}
	m, err := NewManager(Config{NodeID: 1, LogDir: t.TempDir(), ReplicaFetchBackoff: 50 * time.Millisecond, Clock: clock,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, st)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	m.apply(st.im, false)
	parts := []*ProducePartition{{Topic: "t", Index: 0, Records: recordBatch(t, 0, 10, 4)}}
	m.Append(context.Background(), 1, parts)
	if parts[0].Err != nil {
		t.Fatal(parts[0].Err)
	}
	fetch := func(id int32, logStart int64) {
		t.Helper()
		res := m.Fetch(Reader{ReplicaID: id, BrokerEpoch: 7}, FetchPartition{Topic: "t", FetchOffset: 10, CurrentLeaderEpoch: -1,
			LastFetchedEpoch: -1, LogStartOffset: logStart, MaxBytes: 1 << 20})
		if res.View != nil {
			res.View.Release()
		}
		if res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	fetch(2, 0)
	fetch(3, 0)
	g, err := m.StartDeleteRecords("t", 0, 6)
	if err != nil {
		t.Fatal(err)
	}
	fetch(2, 6)

	expired, cancel := context.WithCancel(context.Background())
	cancel()
	res := m.AwaitPurges(expired, []*Purge{g})
	if len(res) != 1 || !errors.Is(res[0].Err, kerr.RequestTimedOut) || res[0].LowWatermark != -1 {
		t.Fatalf("purge held back by live follower 3, deadline passed: %+v, want REQUEST_TIMED_OUT", res)
	}
	<-clock.asked // that Await's recheck

	answered := make(chan []PurgeResult, 1)
	go func() { answered <- m.AwaitPurges(context.Background(), []*Purge{g}) }()
	select {
	case <-clock.asked:
	case <-time.After(10 * time.Second):
		t.Fatal("AwaitPurges did not schedule its recheck on the manager's clock")
	}
	fenced := topicImage(11, oldTopicID, metadata.Partition{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2},
		Leader: 1, LeaderEpoch: 4, PartitionEpoch: 9})
	b := fenced.Brokers[3]
	b.Fenced = true
	fenced.Brokers[3] = b
	m.apply(fenced, false)
	st.im = fenced
	clock.fire()
	select {
	case res := <-answered:
		if len(res) != 1 || res[0].Err != nil || res[0].LowWatermark != 6 {
			t.Fatalf("purge once follower 3 is fenced: %+v, want low watermark 6", res)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("purge not answered at the recheck after the follower holding it back was fenced")
	}
}
