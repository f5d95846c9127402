package partition

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/log/records"
)

// AbortedTxn is an entry of the log's aborted-transaction index.
type AbortedTxn = shalelog.AbortedTxn

// endedTxn is a transaction whose marker is in the log but not yet committed: its
// records stay unstable until the high watermark passes the marker, or a read_committed
// consumer could see a commit that a new leader does not have.
type endedTxn struct {
	ProducerID   int64 `json:"producer_id"`
	FirstOffset  int64 `json:"first_offset"`
	MarkerOffset int64 `json:"marker_offset"`
}

// txnState is the transactional part of a partition's producer state (Kafka's
// ProducerStateManager's ongoing and unreplicated transactions). Aborted transactions
// go to the log's transaction index.
type txnState struct {
	// Ongoing maps each producer with an open transaction to its first offset.
	Ongoing map[int64]int64 `json:"ongoing"`
	Ended   []endedTxn      `json:"ended,omitempty"`
	// LastOffset is the last offset of the newest transactional or control batch, -1
	// when none: truncation above it leaves every transaction as it was.
	LastOffset int64 `json:"last_offset"`

	// verified holds KIP-890 verifications, per producer, of a transaction's first write
	// to this partition. They live in memory only, as in Kafka: a restart asks again.
	verified map[int64]*txnVerification
}

type txnVerification struct {
	epoch int16
	token uint64
	done  bool
	// startedMs is when the check began, so that expiry can drop checks whose write
	// never came.
	startedMs int64
}

var verificationTokens atomic.Uint64

func newTxnState() txnState {
	t := txnState{LastOffset: -1}
	t.fill()
	return t
}

// fill makes the maps a decoded snapshot may lack.
func (t *txnState) fill() {
	if t.Ongoing == nil {
		t.Ongoing = make(map[int64]int64)
	}
	if t.verified == nil {
		t.verified = make(map[int64]*txnVerification)
	}
}

func (t *txnState) open(producerID int64) bool {
	_, ok := t.Ongoing[producerID]
	return ok
}

// any reports whether a transaction is open or ended above the high watermark.
func (t *txnState) any() bool { return len(t.Ongoing) > 0 || len(t.Ended) > 0 }

// checkData applies the transactional rules to a client's data batch: a producer with
// an open transaction writes only transactional batches, and a producer's first
// transactional write to the partition must have been verified with the coordinator.
func (t *txnState) checkData(h shalelog.Header, e *producerEntry) error {
	open := t.open(h.ProducerID)
	if !h.IsTransactional() {
		if open {
			return fmt.Errorf("%w: producer %d has an open transaction on this partition and wrote a non-transactional batch", kerr.InvalidTxnState, h.ProducerID)
		}
		return nil
	}
	if open && openAt(e, h.ProducerEpoch) {
		return nil
	}
	if v := t.verified[h.ProducerID]; v != nil && v.done && v.epoch == h.ProducerEpoch {
		return nil
	}
	return fmt.Errorf("%w: the partition is not verified to be part of producer %d's transaction at epoch %d", kerr.InvalidTxnState, h.ProducerID, h.ProducerEpoch)
}

// begin notes an appended transactional data batch.
func (t *txnState) begin(h shalelog.Header) {
	if !t.open(h.ProducerID) {
		t.Ongoing[h.ProducerID] = h.BaseOffset
	}
	t.LastOffset = max(t.LastOffset, h.LastOffset())
}

// end notes an appended marker, returning the aborted transaction it ends, if any. A
// marker of a producer with no open transaction here (the coordinator retried, or the
// producer wrote nothing to this partition) ends nothing.
func (t *txnState) end(h shalelog.Header, m records.Marker) (AbortedTxn, bool) {
	t.LastOffset = max(t.LastOffset, h.LastOffset())
	delete(t.verified, h.ProducerID)
	first, ok := t.Ongoing[h.ProducerID]
	if !ok {
		return AbortedTxn{}, false
	}
	delete(t.Ongoing, h.ProducerID)
	t.Ended = append(t.Ended, endedTxn{ProducerID: h.ProducerID, FirstOffset: first, MarkerOffset: h.BaseOffset})
	if m.Commit {
		return AbortedTxn{}, false
	}
	// Kafka's "last stable offset" of the abort: where the next open transaction
	// begins, or just past the marker.
	lso := h.BaseOffset + 1
	for _, f := range t.Ongoing {
		lso = min(lso, f)
	}
	return AbortedTxn{ProducerID: h.ProducerID, FirstOffset: first, LastOffset: h.BaseOffset, LastStableOffset: lso}, true
}

// firstUnstable returns the last stable offset given the high watermark: the first
// offset of the oldest transaction that is open or whose marker is not yet committed,
// or hw when it is older. Transactions whose markers hw has passed are dropped.
func (t *txnState) firstUnstable(hw int64) int64 {
	lso := hw
	for _, f := range t.Ongoing {
		lso = min(lso, f)
	}
	n := 0
	for _, e := range t.Ended {
		if e.MarkerOffset >= hw {
			t.Ended[n] = e
			n++
			lso = min(lso, e.FirstOffset)
		}
	}
	clear(t.Ended[n:])
	t.Ended = t.Ended[:n]
	return lso
}

// beginVerification starts a KIP-890 verification of producerID's write at epoch, and
// returns its token; needed is false when the producer's transaction is already open
// here (its first write was verified). A marker written before the verification
// completes cancels it, so that a verification answered for a transaction that has
// since ended admits no write.
func (t *txnState) beginVerification(producerID int64, epoch int16, e *producerEntry) (token uint64, needed bool) {
	if t.open(producerID) && openAt(e, epoch) {
		return 0, false
	}
	if v := t.verified[producerID]; v != nil && v.epoch == epoch {
		// Concurrent requests of one producer share the check, as Kafka's guard.
		return v.token, !v.done
	}
	v := &txnVerification{epoch: epoch, token: verificationTokens.Add(1), startedMs: time.Now().UnixMilli()}
	t.verified[producerID] = v
	return v.token, true
}

// openAt reports whether a producer's open transaction here (e being its entry) is of
// epoch: a write of a newer epoch belongs to another transaction, which the coordinator
// must admit. Transactions v2 (KIP-890 part 2) bump the epoch at every end, and the
// next transaction's first write can reach the partition before the end's marker; an
// older epoch is refused by the epoch check.
func openAt(e *producerEntry, epoch int16) bool { return e == nil || e.Epoch == epoch }

// completeVerification marks the verification with token successful, unless a marker
// or a newer verification replaced it meanwhile; it reports whether it did.
func (t *txnState) completeVerification(producerID int64, token uint64) bool {
	if v := t.verified[producerID]; v != nil && v.token == token {
		v.done = true
		return true
	}
	return false
}
