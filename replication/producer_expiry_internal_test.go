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

func idempotentBatch(t *testing.T, pid int64, seq int32, ts int64) ([]byte, shalelog.Header) {
	t.Helper()
	b, err := records.Build(shalelog.Header{Magic: 2, ProducerID: pid, ProducerEpoch: 0, BaseSequence: seq,
		FirstTimestamp: ts, MaxTimestamp: ts}, shalelog.CodecNone, []records.Record{{Value: []byte("v")}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := shalelog.ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	return b, h
}

// The manager forgets idle producers every producer.id.expiration.check.interval.ms:
// one whose last batch is older than producer.id.expiration.ms may then start at any
// sequence, while a recent one is still held to its sequence.
func TestProducerExpiryRuns(t *testing.T) {
	lg := slog.New(slog.NewTextHandler(io.Discard, nil))
	parts, err := partition.NewManager(partition.ManagerConfig{Dir: t.TempDir(), NodeID: 1, Logger: lg})
	if err != nil {
		t.Fatal(err)
	}
	defer parts.Close()
	set := partition.Settings{Log: shalelog.DefaultConfig(), MinInsyncReplicas: 1, Codec: -1}
	set.Log.SegmentBytes = 1 << 20
	p, err := parts.Open("t", [16]byte{1}, 0, set)
	if err != nil {
		t.Fatal(err)
	}
	p.ApplyState(partition.State{Role: partition.RoleLeader, Leader: 1, LeaderEpoch: 1, Replicas: []int32{1}, ISR: []int32{1}}, time.Now())

	now := time.Now().UnixMilli()
	const idle, recent = 7, 8
	for _, c := range []struct {
		pid int64
		ts  int64
	}{{idle, now - 2*time.Hour.Milliseconds()}, {recent, now}} {
		b, h := idempotentBatch(t, c.pid, 0, c.ts)
		if _, err := p.AppendAsLeader(b, h, 1); err != nil {
			t.Fatal(err)
		}
	}
	outOfOrder := func(pid int64) error {
		b, h := idempotentBatch(t, pid, 5, now)
		_, err := p.AppendAsLeader(b, h, 1)
		return err
	}
	if err := outOfOrder(idle); !errors.Is(err, kerr.OutOfOrderSequenceNumber) {
		t.Fatalf("before expiry: %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{parts: parts, lg: lg, ctx: ctx,
		cfg: Config{Clock: wallClock{}, ProducerIDExpiration: time.Hour, ProducerIDExpirationCheckInterval: 10 * time.Millisecond}}
	m.wg.Add(1)
	go func() { defer m.wg.Done(); m.producerExpiryLoop() }()
	defer func() { cancel(); m.wg.Wait() }()

	deadline := time.Now().Add(20 * time.Second)
	for err := outOfOrder(idle); err != nil; err = outOfOrder(idle) {
		if !errors.Is(err, kerr.OutOfOrderSequenceNumber) || time.Now().After(deadline) {
			t.Fatalf("idle producer's state was not expired: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := outOfOrder(recent); !errors.Is(err, kerr.OutOfOrderSequenceNumber) {
		t.Fatalf("a recent producer's state was expired: %v", err)
	}
}
