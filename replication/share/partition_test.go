package share

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

var t0 = time.Unix(1_700_000_000, 0)

func limits() Limits {
	return Limits{LockDuration: time.Second, DeliveryLimit: 3, MaxRecordLocks: 100}
}

func one(first, last int64) []Batch { return []Batch{{First: first, Last: last}} }

func ack(first, last int64, types ...AckType) []AckBatch {
	return []AckBatch{{First: first, Last: last, Types: types}}
}

func wantState(t *testing.T, p *Partition, off int64, st State, count int16) {
	t.Helper()
	if got, n, _ := p.State(off); got != st || n != count {
		t.Fatalf("offset %d: %s with %d deliveries, want %s with %d", off, got, n, st, count)
	}
}

func TestAcquireAcceptAdvancesStart(t *testing.T) {
	p := NewPartition(limits(), 10)
	if from := p.FetchFrom(10); from != -1 {
		t.Fatalf("nothing committed, fetch from %d", from)
	}
	if from := p.FetchFrom(20); from != 10 {
		t.Fatalf("fetch from %d, want 10", from)
	}
	got, dead := p.Acquire("a", one(10, 19), 15, 100, t0)
	if len(dead) != 0 || !slices.Equal(got, []AcquiredRange{{10, 14, 1}}) {
		t.Fatalf("acquired %v (dead %v), want 10-14 once (only below the high watermark)", got, dead)
	}
	// Another member gets the rest, not what a holds.
	got, _ = p.Acquire("b", one(10, 19), 20, 3, t0)
	if !slices.Equal(got, []AcquiredRange{{15, 17, 1}}) {
		t.Fatalf("b acquired %v, want 15-17 (max records 3)", got)
	}
	if _, err := p.Acknowledge("b", ack(10, 10, AckAccept), false, t0); !errors.Is(err, kerr.InvalidRecordState) {
		t.Fatalf("b acknowledging a's record: %v", err)
	}
	if _, err := p.Acknowledge("a", ack(12, 14, AckAccept), false, t0); err != nil {
		t.Fatal(err)
	}
	if p.StartOffset() != 10 {
		t.Fatalf("SPSO %d moved over unacknowledged records", p.StartOffset())
	}
	if _, err := p.Acknowledge("a", ack(10, 11, AckAccept), false, t0); err != nil {
		t.Fatal(err)
	}
	if p.StartOffset() != 15 || p.EndOffset() != 18 {
		t.Fatalf("SPSO %d, SPEO %d, want 15 and 18", p.StartOffset(), p.EndOffset())
	}
	if _, err := p.Acknowledge("a", ack(15, 15, AckAccept), false, t0); !errors.Is(err, kerr.InvalidRecordState) {
		t.Fatalf("acknowledging b's record: %v", err)
	}
	if _, err := p.Acknowledge("b", ack(15, 30, AckAccept), false, t0); !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("acknowledging past the SPEO: %v", err)
	}
	// Below the SPSO is complete already.
	if _, err := p.Acknowledge("b", ack(5, 17, AckAccept), false, t0); err != nil {
		t.Fatal(err)
	}
	if p.StartOffset() != 18 {
		t.Fatalf("SPSO %d, want 18", p.StartOffset())
	}
}

func TestAcknowledgeIsAllOrNothing(t *testing.T) {
	p := NewPartition(limits(), 0)
	p.Acquire("a", one(0, 9), 10, 100, t0)
	_, err := p.Acknowledge("a", []AckBatch{{First: 0, Last: 1, Types: []AckType{AckAccept}}, {First: 1, Last: 2, Types: []AckType{AckAccept}}}, false, t0)
	if !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("overlapping batches: %v", err)
	}
	if _, err := p.Acknowledge("a", ack(0, 2, AckAccept, AckAccept), false, t0); !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("two types for three offsets: %v", err)
	}
	if _, err := p.Acknowledge("a", ack(0, 0, AckRenew), false, t0); !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("renew without IsRenewAck: %v", err)
	}
	wantState(t, p, 0, Acquired, 1)
	// Per-offset types.
	if _, err := p.Acknowledge("a", ack(0, 3, AckAccept, AckRelease, AckReject, AckGap), false, t0); err != nil {
		t.Fatal(err)
	}
	wantState(t, p, 1, Available, 1)
	wantState(t, p, 2, Archived, 1)
	wantState(t, p, 3, Archived, 1)
	if p.StartOffset() != 1 {
		t.Fatalf("SPSO %d, want 1", p.StartOffset())
	}
}

func TestLockExpiryAndReleaseKeepDeliveryCountUntilLimit(t *testing.T) {
	p := NewPartition(limits(), 0)
	got, _ := p.Acquire("a", one(0, 1), 2, 100, t0)
	if !slices.Equal(got, []AcquiredRange{{0, 1, 1}}) {
		t.Fatalf("acquired %v", got)
	}
	if n, _ := p.ExpireLocks(t0.Add(999 * time.Millisecond)); n != 0 {
		t.Fatalf("%d locks expired early", n)
	}
	if next := p.NextDeadline(); !next.Equal(t0.Add(time.Second)) {
		t.Fatalf("next deadline %v", next)
	}
	// A renew extends the lock of offset 1 only.
	if _, err := p.Acknowledge("a", ack(1, 1, AckRenew), true, t0.Add(500*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if n, _ := p.ExpireLocks(t0.Add(time.Second)); n != 1 {
		t.Fatalf("%d locks expired, want offset 0's", n)
	}
	wantState(t, p, 0, Available, 1)
	wantState(t, p, 1, Acquired, 1)
	// Redelivered to another member with its count incremented.
	got, _ = p.Acquire("b", one(0, 1), 2, 100, t0.Add(time.Second))
	if !slices.Equal(got, []AcquiredRange{{0, 0, 2}}) {
		t.Fatalf("redelivery %v, want offset 0 a second time", got)
	}
	if _, err := p.Acknowledge("b", ack(0, 0, AckRelease), false, t0); err != nil {
		t.Fatal(err)
	}
	got, _ = p.Acquire("c", one(0, 1), 2, 100, t0.Add(2*time.Second))
	if !slices.Equal(got, []AcquiredRange{{0, 0, 3}}) {
		t.Fatalf("third delivery %v", got)
	}
	// The third delivery was the last: a release archives it as a dead letter.
	dead, err := p.Acknowledge("c", ack(0, 0, AckRelease), false, t0)
	if err != nil || !slices.Equal(dead, []DeadLetter{{0, 3}}) {
		t.Fatalf("release at the limit: dead %v, %v", dead, err)
	}
	wantState(t, p, 0, Archived, 3)
	if p.StartOffset() != 0 {
		t.Fatal("SPSO moved before the dead letter was written")
	}
	if got := p.PendingDeadLetters(); !slices.Equal(got, []DeadLetter{{0, 3}}) {
		t.Fatalf("pending %v", got)
	}
	// Until written, the record is persisted as available, so a failover redelivers it.
	st := p.Persisted("g", "t", 0, 1)
	if st.Batches[0].DeliveryState != int32(Available) || st.Batches[0].DeliveryCount != 3 {
		t.Fatalf("persisted %v", st.Batches)
	}
	p.DeadLettered([]int64{0})
	if p.StartOffset() != 1 {
		t.Fatalf("SPSO %d after the dead letter, want 1", p.StartOffset())
	}
	// Lock expiry at the limit archives too.
	p.Acquire("d", one(0, 1), 2, 100, t0) // nothing: offset 1 is still a's
	for i := range 2 {
		at := t0.Add(time.Duration(i+1) * time.Hour)
		p.ExpireLocks(at)
		p.Acquire("d", one(1, 1), 2, 100, at)
	}
	_, dead = p.ExpireLocks(t0.Add(5 * time.Hour))
	if !slices.Equal(dead, []DeadLetter{{1, 3}}) {
		t.Fatalf("expiry at the limit: dead %v", dead)
	}
}

func TestRejectArchivesAsDeadLetter(t *testing.T) {
	p := NewPartition(limits(), 0)
	p.Acquire("a", one(0, 2), 3, 100, t0)
	dead, err := p.Acknowledge("a", ack(0, 2, AckAccept, AckReject, AckAccept), false, t0)
	if err != nil || !slices.Equal(dead, []DeadLetter{{1, 1}}) {
		t.Fatalf("reject: %v %v", dead, err)
	}
	if p.StartOffset() != 1 {
		t.Fatalf("SPSO %d", p.StartOffset())
	}
	p.DropDeadLetters()
	if p.StartOffset() != 3 {
		t.Fatalf("SPSO %d after dropping dead letters, want 3", p.StartOffset())
	}
}

func TestMaxRecordLocksBoundsTheWindow(t *testing.T) {
	l := limits()
	l.MaxRecordLocks = 5
	p := NewPartition(l, 0)
	got, _ := p.Acquire("a", one(0, 99), 100, 100, t0)
	if !slices.Equal(got, []AcquiredRange{{0, 4, 1}}) {
		t.Fatalf("acquired %v, want 5 records", got)
	}
	if from := p.FetchFrom(100); from != -1 {
		t.Fatalf("window full, yet fetch from %d", from)
	}
	p.Acknowledge("a", ack(2, 2, AckRelease), false, t0)
	if from := p.FetchFrom(100); from != 2 {
		t.Fatalf("fetch from %d, want the released 2", from)
	}
	if got, _ := p.Acquire("b", one(0, 99), 100, 100, t0); !slices.Equal(got, []AcquiredRange{{2, 2, 2}}) {
		t.Fatalf("acquired %v, want 2 again only", got)
	}
	p.Acknowledge("a", ack(0, 1, AckAccept), false, t0)
	if got, _ := p.Acquire("b", one(0, 99), 100, 100, t0); !slices.Equal(got, []AcquiredRange{{5, 6, 1}}) {
		t.Fatalf("acquired %v after the SPSO moved by 2, want 5-6", got)
	}
}

func TestGapsBetweenBatchesAreArchived(t *testing.T) {
	p := NewPartition(limits(), 0)
	got, _ := p.Acquire("a", []Batch{{0, 1}, {5, 6}}, 10, 100, t0)
	if !slices.Equal(got, []AcquiredRange{{0, 1, 1}, {5, 6, 1}}) {
		t.Fatalf("acquired %v", got)
	}
	wantState(t, p, 3, Archived, 0)
	p.Acknowledge("a", ack(0, 1, AckAccept), false, t0)
	if p.StartOffset() != 5 {
		t.Fatalf("SPSO %d, want 5 past the gap", p.StartOffset())
	}
}

// What a new leader loads: acquired records come back available with their counts,
// completed ones stay complete.
func TestPersistedRoundTrip(t *testing.T) {
	p := NewPartition(limits(), 0)
	p.Acquire("a", one(0, 5), 6, 100, t0)
	p.Acknowledge("a", ack(1, 2, AckAccept), false, t0)
	p.Acknowledge("a", ack(3, 3, AckRelease), false, t0)
	p.Acquire("b", one(3, 3), 6, 100, t0)
	st := p.Persisted("g", "t", 0, 4)
	q := LoadPartition(limits(), st)
	if q.StartOffset() != 0 || q.EndOffset() != 6 {
		t.Fatalf("loaded %d-%d", q.StartOffset(), q.EndOffset())
	}
	wantState(t, q, 0, Available, 1)
	wantState(t, q, 1, Acknowledged, 1)
	wantState(t, q, 3, Available, 2)
	wantState(t, q, 5, Available, 1)
	if c := q.Counts(); c.Acquired != 0 || c.Available != 4 || c.Acknowledged != 2 {
		t.Fatalf("counts %+v", c)
	}
	// A record loaded at the limit (its last delivery's outcome unknown) is archived, as
	// a dead letter, instead of delivered again.
	st.Batches[2].DeliveryCount = 3 // offset 3
	r := LoadPartition(limits(), st)
	got, dead := r.Acquire("c", one(0, 5), 6, 100, t0)
	if !slices.Equal(dead, []DeadLetter{{3, 3}}) || !slices.Equal(got, []AcquiredRange{{0, 0, 2}, {4, 5, 2}}) {
		t.Fatalf("acquired %v dead %v", got, dead)
	}
}

func TestSkipTo(t *testing.T) {
	p := NewPartition(limits(), 0)
	p.Acquire("a", one(0, 5), 6, 100, t0)
	p.SkipTo(3)
	if p.StartOffset() != 3 || p.EndOffset() != 6 {
		t.Fatalf("after skip %d-%d", p.StartOffset(), p.EndOffset())
	}
	p.SkipTo(50)
	if p.StartOffset() != 50 || p.EndOffset() != 50 {
		t.Fatalf("after skip past the end %d-%d", p.StartOffset(), p.EndOffset())
	}
}
