package replication

import (
	"context"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/log/records"
	"github.com/shalelog/shale/metadata"
)

// KIP-320: -1 (any epoch) and the replica's own pass, an older epoch is
// FENCED_LEADER_EPOCH (the client refreshes its metadata), a newer one
// UNKNOWN_LEADER_EPOCH (this broker has yet to learn of it).
func TestCheckLeaderEpoch(t *testing.T) {
	for _, tc := range []struct {
		requested, current int32
		want               error
	}{
		{-1, 5, nil},
		{-1, 0, nil},
		{-2, 5, nil},
		{5, 5, nil},
		{0, 0, nil},
		{4, 5, kerr.FencedLeaderEpoch},
		{0, 5, kerr.FencedLeaderEpoch},
		{6, 5, kerr.UnknownLeaderEpoch},
		{1, 0, kerr.UnknownLeaderEpoch},
	} {
		err := CheckLeaderEpoch(tc.requested, tc.current)
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("CheckLeaderEpoch(%d, %d) = %v, want %v", tc.requested, tc.current, err, tc.want)
		}
	}
}

// The read bound of each reader, on a replica whose log end (8), high watermark (6) and
// last stable offset (3, an open transaction) all differ: a follower sees the log end
// whatever its isolation level, a read_committed consumer the last stable offset, any
// other consumer the high watermark.
func TestReadBound(t *testing.T) {
	state := metadata.Partition{Replicas: []int32{2, 1}, ISR: []int32{2, 1}, Leader: 2, LeaderEpoch: 4, PartitionEpoch: 9}
	st := &handStore{im: rackImage(10, state), lease: true, epoch: 7}
	m := rackManager(t, 1, nil, nil, st)
	m.apply(st.im, false)
	p := m.Replica("t", 0)
	txn, err := records.Build(shalelog.Header{BaseOffset: 3, PartitionLeaderEpoch: 4, Magic: 2, ProducerID: 42, ProducerEpoch: 0,
		BaseSequence: 0, Attributes: shalelog.AttrTransactional}, shalelog.CodecNone, []records.Record{{Value: []byte("open")}, {OffsetDelta: 1, Value: []byte("x")}})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range [][]byte{recordBatch(t, 0, 3, 4), txn, recordBatch(t, 5, 3, 4)} {
		if _, err := p.AppendAsFollower(b, 4); err != nil {
			t.Fatal(err)
		}
	}
	p.SetFollowerHighWatermark(6)
	if leo, hw, lso := p.LogEndOffset(), p.HighWatermark(), p.LastStableOffset(); leo != 8 || hw != 6 || lso != 3 {
		t.Fatalf("fixture: log end %d, high watermark %d, last stable offset %d; want 8, 6, 3", leo, hw, lso)
	}
	for _, tc := range []struct {
		name                    string
		follower, readCommitted bool
		want                    isolation
		limit                   int64
	}{
		{"consumer", false, false, isolationHW, 6},
		{"read_committed consumer", false, true, isolationCommitted, 3},
		{"follower", true, false, isolationLogEnd, 8},
		{"follower at read_committed", true, true, isolationLogEnd, 8},
	} {
		iso := isolationFor(tc.follower, tc.readCommitted)
		if iso != tc.want {
			t.Errorf("%s: isolation %d, want %d", tc.name, iso, tc.want)
		}
		if got := iso.limit(p); got != tc.limit {
			t.Errorf("%s: reads up to %d, want %d", tc.name, got, tc.limit)
		}
		if got := ReadLimit(p, tc.follower, tc.readCommitted); got != tc.limit {
			t.Errorf("%s: ReadLimit %d, want %d", tc.name, got, tc.limit)
		}
	}
}

// What a parked long poll watches follows what stopped its read: the log end for a
// follower, the last stable offset only while it holds a read_committed read below the
// high watermark, the high watermark otherwise.
func TestProgressBound(t *testing.T) {
	for _, tc := range []struct {
		iso     isolation
		lso, hw int64
		want    readBound
	}{
		{isolationHW, 6, 6, boundHW},
		{isolationHW, 3, 6, boundHW},
		{isolationLogEnd, 3, 6, boundLogEnd},
		{isolationLogEnd, 6, 6, boundLogEnd},
		{isolationCommitted, 6, 6, boundHW},
		{isolationCommitted, 3, 6, boundLSO},
	} {
		if got := tc.iso.progressBound(tc.lso, tc.hw); got != tc.want {
			t.Errorf("isolation %d, last stable offset %d, high watermark %d: bound %d, want %d", tc.iso, tc.lso, tc.hw, got, tc.want)
		}
	}
}

// ListOffset answers within the same bound that Fetch reads to: latest is where a
// consumer's read ends (the high watermark), a follower's the log end; earliest, a
// timestamp and max-timestamp find records below the bound; fencing is Leader's.
func TestListOffsetAgreesWithFetch(t *testing.T) {
	st := &applyStore{im: topicImage(10, oldTopicID, metadata.Partition{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3},
		Leader: 1, LeaderEpoch: 4, PartitionEpoch: 9})}
	m := testManager(t, t.TempDir(), st)
	for _, b := range [][]byte{recordBatch(t, 0, 6, 4), recordBatch(t, 0, 4, 4)} {
		parts := []*ProducePartition{{Topic: "t", Index: 0, Records: b}}
		m.Append(context.Background(), 1, parts)
		if parts[0].Err != nil {
			t.Fatal(parts[0].Err)
		}
	}
	for _, id := range []int32{2, 3} {
		res := m.Fetch(Reader{ReplicaID: id, BrokerEpoch: 7}, FetchPartition{Topic: "t", FetchOffset: 6, CurrentLeaderEpoch: -1,
			LastFetchedEpoch: -1, LogStartOffset: 0, MaxBytes: 1 << 20})
		if res.View != nil {
			res.View.Release()
		}
		if res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	res := m.Fetch(Reader{ReplicaID: -1}, FetchPartition{Topic: "t", FetchOffset: 0, CurrentLeaderEpoch: -1,
		LastFetchedEpoch: -1, LogStartOffset: -1, MaxBytes: 1 << 20, MinOne: true})
	if res.Err != nil || res.View == nil {
		t.Fatalf("consumer fetch: %v", res.Err)
	}
	consumerEnd := res.View.NextOffset
	res.View.Release()
	if consumerEnd != 6 {
		t.Fatalf("fixture: a consumer reads up to %d, want the high watermark 6", consumerEnd)
	}

	for _, tc := range []struct {
		name string
		lp   ListOffsetsPartition
		want ListedOffset
		err  error
	}{
		{"latest, consumer", ListOffsetsPartition{Timestamp: ListLatest, CurrentLeaderEpoch: -1}, ListedOffset{consumerEnd, -1, 4}, nil},
		{"latest, read_committed", ListOffsetsPartition{Timestamp: ListLatest, CurrentLeaderEpoch: 4, ReadCommitted: true}, ListedOffset{6, -1, 4}, nil},
		{"latest, follower", ListOffsetsPartition{Timestamp: ListLatest, CurrentLeaderEpoch: -1, Follower: true}, ListedOffset{10, -1, 4}, nil},
		{"earliest", ListOffsetsPartition{Timestamp: ListEarliest, CurrentLeaderEpoch: -1}, ListedOffset{0, -1, 4}, nil},
		{"timestamp 0", ListOffsetsPartition{Timestamp: 0, CurrentLeaderEpoch: -1}, ListedOffset{0, 0, 4}, nil},
		{"timestamp after every record", ListOffsetsPartition{Timestamp: 1, CurrentLeaderEpoch: -1}, ListedOffset{-1, -1, -1}, nil},
		{"max timestamp", ListOffsetsPartition{Timestamp: ListMaxTimestamp, CurrentLeaderEpoch: -1}, ListedOffset{0, 0, 4}, nil},
		{"earliest local (KIP-1005), no remote log", ListOffsetsPartition{Timestamp: ListEarliestLocal, CurrentLeaderEpoch: -1}, ListedOffset{0, -1, 4}, nil},
		{"latest tiered (KIP-1005), no remote log", ListOffsetsPartition{Timestamp: ListLatestTiered, CurrentLeaderEpoch: -1}, ListedOffset{-1, -1, -1}, nil},
		{"invalid timestamp", ListOffsetsPartition{Timestamp: -6, CurrentLeaderEpoch: -1}, ListedOffset{-1, -1, -1}, kerr.InvalidRequest},
		{"older epoch", ListOffsetsPartition{Timestamp: ListLatest, CurrentLeaderEpoch: 3}, ListedOffset{-1, -1, -1}, kerr.FencedLeaderEpoch},
		{"newer epoch", ListOffsetsPartition{Timestamp: ListLatest, CurrentLeaderEpoch: 5}, ListedOffset{-1, -1, -1}, kerr.UnknownLeaderEpoch},
		{"no such partition", ListOffsetsPartition{Index: 1, Timestamp: ListLatest, CurrentLeaderEpoch: -1}, ListedOffset{-1, -1, -1}, kerr.UnknownTopicOrPartition},
	} {
		tc.lp.Topic = "t"
		got, err := m.ListOffset(tc.lp)
		if tc.err == nil && err != nil || tc.err != nil && !errors.Is(err, tc.err) {
			t.Errorf("%s: error %v, want %v", tc.name, err, tc.err)
		}
		if got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
