package partition

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/log/records"
)

// retainedBatches is how many recent batches per producer are remembered to recognise
// retries, as Kafka does (max.in.flight.requests.per.connection is at most 5 with
// idempotence).
const retainedBatches = 5

// batchMeta identifies one appended batch of an idempotent producer.
type batchMeta struct {
	FirstSeq   int32
	LastSeq    int32
	BaseOffset int64
	LastOffset int64
	Timestamp  int64
}

// producerEntry is the state of one producer id on this partition.
type producerEntry struct {
	Epoch   int16
	Batches []batchMeta // oldest first, at most retainedBatches
	// LastTimestamp is the newest batch's max timestamp, for expiry.
	LastTimestamp int64
	// CoordinatorEpoch is the epoch of the transaction coordinator that wrote this
	// producer's last marker: markers from an older coordinator are fenced.
	CoordinatorEpoch int32 `json:"coordinator_epoch,omitempty"`
}

func (e *producerEntry) lastSeq() int32 {
	if len(e.Batches) == 0 {
		return -1
	}
	return e.Batches[len(e.Batches)-1].LastSeq
}

// producerState tracks idempotent and transactional producers for one partition. The
// Partition's mutex guards it.
type producerState struct {
	producers map[int64]*producerEntry
	txns      txnState
}

func newProducerState() *producerState {
	return &producerState{producers: make(map[int64]*producerEntry), txns: newTxnState()}
}

// seqAdd adds n to a sequence number; sequences wrap from MaxInt32 to 0.
func seqAdd(seq int32, n int32) int32 {
	return int32((int64(seq) + int64(n)) % (math.MaxInt32 + 1))
}

// inSequence reports whether next directly follows last.
func inSequence(last, next int32) bool {
	return next == seqAdd(last, 1)
}

// errDuplicate carries the original placement of a retried batch.
type errDuplicate struct{ meta batchMeta }

func (e *errDuplicate) Error() string {
	return fmt.Sprintf("duplicate of the batch at offset %d", e.meta.BaseOffset)
}

// check decides whether a client's batch may be appended. It returns *errDuplicate for
// a retry of a batch already in the log, and Kafka's error otherwise.
func (s *producerState) check(h shalelog.Header) error {
	if !h.HasProducer() {
		if h.IsTransactional() {
			return fmt.Errorf("%w: transactional batch without a producer id", kerr.InvalidRecord)
		}
		return nil
	}
	if err := s.checkSequence(h); err != nil {
		return err
	}
	return s.txns.checkData(h, s.producers[h.ProducerID])
}

func (s *producerState) checkSequence(h shalelog.Header) error {
	if h.BaseSequence < 0 {
		return fmt.Errorf("%w: idempotent batch without a base sequence", kerr.InvalidRecord)
	}
	lastSeq := seqAdd(h.BaseSequence, h.LastOffsetDelta)
	e := s.producers[h.ProducerID]
	if e == nil {
		// Kafka accepts any sequence from a producer it has no state for (its state may
		// have been removed by retention or DeleteRecords).
		return nil
	}
	if h.ProducerEpoch < e.Epoch {
		return fmt.Errorf("%w: producer %d epoch %d is older than %d", kerr.InvalidProducerEpoch, h.ProducerID, h.ProducerEpoch, e.Epoch)
	}
	if h.ProducerEpoch > e.Epoch {
		if h.BaseSequence != 0 {
			return fmt.Errorf("%w: producer %d starts epoch %d at sequence %d, not 0", kerr.OutOfOrderSequenceNumber, h.ProducerID, h.ProducerEpoch, h.BaseSequence)
		}
		return nil
	}
	for _, b := range e.Batches {
		if b.FirstSeq == h.BaseSequence && b.LastSeq == lastSeq {
			return &errDuplicate{meta: b}
		}
	}
	if last := e.lastSeq(); last >= 0 && !inSequence(last, h.BaseSequence) {
		return fmt.Errorf("%w: producer %d expected sequence %d, got %d", kerr.OutOfOrderSequenceNumber, h.ProducerID, seqAdd(last, 1), h.BaseSequence)
	}
	return nil
}

// entryFor returns the producer's entry at epoch, creating it or moving it to a newer
// epoch (whose batches start afresh); nil when epoch is older than the entry's, which
// only replication of a fenced producer's late batch can bring.
func (s *producerState) entryFor(id int64, epoch int16) *producerEntry {
	e := s.producers[id]
	switch {
	case e == nil:
		e = &producerEntry{Epoch: epoch, CoordinatorEpoch: -1}
		s.producers[id] = e
	case epoch > e.Epoch:
		e.Epoch, e.Batches = epoch, nil
	case epoch < e.Epoch:
		return nil
	}
	return e
}

// record notes an appended data batch (on the leader after check, or on a follower and
// while replaying the log). Control batches go to recordMarker.
func (s *producerState) record(h shalelog.Header) {
	if !h.HasProducer() {
		return
	}
	e := s.entryFor(h.ProducerID, h.ProducerEpoch)
	if e == nil {
		return
	}
	e.Batches = append(e.Batches, batchMeta{
		FirstSeq:   h.BaseSequence,
		LastSeq:    seqAdd(h.BaseSequence, h.LastOffsetDelta),
		BaseOffset: h.BaseOffset,
		LastOffset: h.LastOffset(),
		Timestamp:  h.MaxTimestamp,
	})
	if len(e.Batches) > retainedBatches {
		e.Batches = append(e.Batches[:0], e.Batches[len(e.Batches)-retainedBatches:]...)
	}
	e.LastTimestamp = h.MaxTimestamp
	if h.IsTransactional() {
		s.txns.begin(h)
	}
}

// checkMarker decides whether the coordinator's marker may be appended: not from an
// older producer epoch (INVALID_PRODUCER_EPOCH) nor from an older coordinator than the
// last marker's (TRANSACTION_COORDINATOR_FENCED), as Kafka's ProducerAppendInfo checks.
func (s *producerState) checkMarker(producerID int64, epoch int16, m records.Marker) error {
	e := s.producers[producerID]
	if e == nil {
		return nil
	}
	if epoch < e.Epoch {
		return fmt.Errorf("%w: marker for producer %d at epoch %d, which is older than %d", kerr.InvalidProducerEpoch, producerID, epoch, e.Epoch)
	}
	if e.CoordinatorEpoch > m.CoordinatorEpoch {
		return fmt.Errorf("%w: marker for producer %d from coordinator epoch %d, older than %d", kerr.TransactionCoordinatorFenced, producerID, m.CoordinatorEpoch, e.CoordinatorEpoch)
	}
	return nil
}

// recordMarker notes an appended transaction marker: the producer's transaction, if one
// is open, ends at it. An abort is returned for the aborted-transaction index.
func (s *producerState) recordMarker(h shalelog.Header, m records.Marker) (AbortedTxn, bool) {
	if e := s.entryFor(h.ProducerID, h.ProducerEpoch); e != nil {
		e.CoordinatorEpoch = m.CoordinatorEpoch
		e.LastTimestamp = h.MaxTimestamp
	}
	return s.txns.end(h, m)
}

// truncateFrom forgets batches at or after offset (log truncation). It reports false,
// changing nothing, when transactions began or ended at or after offset: only a replay
// of the log can tell which are open then.
func (s *producerState) truncateFrom(offset int64) bool {
	if s.txns.LastOffset >= offset {
		return false
	}
	for id, e := range s.producers {
		n := 0
		for _, b := range e.Batches {
			if b.BaseOffset < offset {
				e.Batches[n] = b
				n++
			}
		}
		e.Batches = e.Batches[:n]
		if n == 0 && !s.txns.open(id) {
			delete(s.producers, id)
		}
	}
	return true
}

// removeBefore forgets producers whose every batch is below the log start offset. A
// producer with an open transaction stays:
// retention and DeleteRecords stop at the first unstable offset.
func (s *producerState) removeBefore(start int64) {
	for id, e := range s.producers {
		if n := len(e.Batches); (n == 0 || e.Batches[n-1].LastOffset < start) && !s.txns.open(id) {
			delete(s.producers, id)
		}
	}
}

// expire forgets producers whose newest batch is stamped at or before cutoffMs, and
// returns how many.
func (s *producerState) expire(cutoffMs int64) int {
	n := 0
	for id, e := range s.producers {
		// As in Kafka, a producer with an open transaction does not expire: the
		// coordinator's transaction.timeout.ms aborts it first.
		if e.LastTimestamp <= cutoffMs && !s.txns.open(id) {
			delete(s.producers, id)
			n++
		}
	}
	// Verifications as old whose write never came (refused, or the producer went away)
	// go too, so that they do not pile up.
	for id, v := range s.txns.verified {
		if _, ok := s.producers[id]; !ok && v.startedMs <= cutoffMs {
			delete(s.txns.verified, id)
		}
	}
	return n
}

// ExpireProducers forgets the idempotent producers whose newest batch is at least
// expiration old by its timestamp (producer.id.expiration.ms), as Kafka's
// ProducerStateManager does, so that the state of producers long gone does not grow
// without bound. A later batch from such a producer is accepted at any sequence. It
// returns how many producers were forgotten.
func (p *Partition) ExpireProducers(now time.Time, expiration time.Duration) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.producers.expire(now.Add(-expiration).UnixMilli())
}

// producerSnapshot is the on-disk form, written on clean close so that a restart need not
// replay the whole log: replay starts at Offset.
type producerSnapshot struct {
	Offset    int64                    `json:"offset"`
	Producers map[int64]*producerEntry `json:"producers"`
	// Txns is absent from the snapshots of versions without transactions.
	Txns *txnState `json:"transactions,omitempty"`
}

const producerSnapshotFile = "producer-state.json"

func (s *producerState) save(dir string, offset int64) error {
	b, err := json.Marshal(producerSnapshot{Offset: offset, Producers: s.producers, Txns: &s.txns})
	if err != nil {
		return fmt.Errorf("encode producer state: %w", err)
	}
	tmp := filepath.Join(dir, producerSnapshotFile+".tmp")
	if err := writeFileSync(tmp, b); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, producerSnapshotFile)); err != nil {
		return fmt.Errorf("install producer state: %w", err)
	}
	return nil
}

// load reads the snapshot and returns the offset replay must start from; 0 (replay all)
// when there is none or it is unusable.
func (s *producerState) load(dir string) int64 {
	b, err := os.ReadFile(filepath.Join(dir, producerSnapshotFile))
	if err != nil {
		return 0
	}
	var snap producerSnapshot
	if err := json.Unmarshal(b, &snap); err != nil || snap.Producers == nil {
		return 0
	}
	s.producers = snap.Producers
	if snap.Txns != nil {
		s.txns = *snap.Txns
		s.txns.fill()
	}
	return snap.Offset
}

// removeSnapshot deletes the snapshot once it no longer matches the log: a crash after
// this point replays the log instead of trusting stale state.
// The directory is synced after a removal: a snapshot that a power cut brings back
// would be trusted over a log that has since been cut and written anew.
func removeSnapshot(dir string) error {
	err := os.Remove(filepath.Join(dir, producerSnapshotFile))
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("remove producer state snapshot: %w", err)
	}
	return syncDir(dir)
}

func writeFileSync(path string, b []byte) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync %s: %w", path, err)
	}
	return f.Close()
}
