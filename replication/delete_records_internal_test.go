package replication

import (
	"context"
	"errors"
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
