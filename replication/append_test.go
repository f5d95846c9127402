package replication

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/log/records"
	"github.com/shalelog/shale/partition"
)

func oneRecordBatch(t *testing.T) []byte {
	t.Helper()
	b, err := records.Build(shalelog.Header{Magic: 2, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
		shalelog.CodecNone, []records.Record{{Value: []byte("v")}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAwaitReplicationAnswersEveryPartition: when the wait ends early (the client hangs
// up, the broker stops), no partition of the request may be answered as written unless
// it is committed. An early version set the error on the partition being waited on only,
// and the others of the same request went out as successes: acknowledged records that a
// new leader did not have.
func TestAwaitReplicationAnswersEveryPartition(t *testing.T) {
	lg := slog.New(slog.NewTextHandler(io.Discard, nil))
	parts, err := partition.NewManager(partition.ManagerConfig{Dir: t.TempDir(), NodeID: 1, Logger: lg})
	if err != nil {
		t.Fatal(err)
	}
	defer parts.Close()
	set := partition.Settings{Log: shalelog.DefaultConfig(), MinInsyncReplicas: 1, Codec: -1}
	set.Log.SegmentBytes = 1 << 20
	var pps []*ProducePartition
	for i := range int32(3) {
		p, err := parts.Open("t", [16]byte{1}, i, set)
		if err != nil {
			t.Fatal(err)
		}
		// Follower 2 is in the ISR and never fetches: nothing commits.
		p.ApplyState(partition.State{Role: partition.RoleLeader, Leader: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}, time.Now())
		b := oneRecordBatch(t)
		h, _ := shalelog.ParseHeader(b)
		res, err := p.AppendAsLeader(b, h, -1)
		if err != nil {
			t.Fatal(err)
		}
		pps = append(pps, &ProducePartition{Topic: "t", Index: i, Result: res, p: p})
	}
	m := &Manager{}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	m.AwaitReplication(ctx, pps, time.Minute)
	for _, pp := range pps {
		if !errors.Is(pp.Err, kerr.RequestTimedOut) {
			t.Errorf("partition %d answered %v after the wait was cut short, want REQUEST_TIMED_OUT", pp.Index, pp.Err)
		}
	}
	// The same through the timeout.
	for _, pp := range pps {
		pp.Err = nil
	}
	m.AwaitReplication(context.Background(), pps, 20*time.Millisecond)
	for _, pp := range pps {
		if !errors.Is(pp.Err, kerr.RequestTimedOut) {
			t.Errorf("partition %d answered %v after the timeout", pp.Index, pp.Err)
		}
	}
}
