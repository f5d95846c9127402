package partition

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/log/records"
)

// LastStableOffset is the offset below which every transaction is decided and its
// decision committed: read_committed consumers read up to it. Without transactions in
// flight it is the high watermark.
func (p *Partition) LastStableOffset() int64 {
	hw := p.hw.Load()
	if !p.txnActive.Load() {
		return hw
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	lso := p.producers.txns.firstUnstable(hw)
	p.txnActive.Store(p.producers.txns.any())
	return lso
}

// AbortedTxns returns the aborted transactions that a read of [from, to) spans.
func (p *Partition) AbortedTxns(from, to int64) ([]AbortedTxn, error) {
	return p.log.AbortedTxns(from, to)
}

// noteTxnsLocked refreshes the flag that lets LastStableOffset skip the lock.
func (p *Partition) noteTxnsLocked() {
	p.txnActive.Store(p.producers.txns.any())
}

// MarkerResult is where a transaction marker went.
type MarkerResult struct {
	Offset      int64
	LeaderEpoch int32
}

// AppendMarker appends the coordinator's marker ending producerID's transaction, as
// leader. Like Kafka it is an acks=all write: refused while the ISR is below
// min.insync.replicas, and the caller waits for ReplicationDone before answering.
func (p *Partition) AppendMarker(producerID int64, producerEpoch int16, m records.Marker) (MarkerResult, error) {
	p.mu.Lock()
	if err := p.offlineErr(); err != nil {
		p.mu.Unlock()
		return MarkerResult{}, err
	}
	if p.Role() != RoleLeader {
		p.mu.Unlock()
		return MarkerResult{}, ErrNotLeader
	}
	if p.state.Mirror {
		// A mirror's markers are the source's, copied with its batches.
		p.mu.Unlock()
		return MarkerResult{}, ErrMirror
	}
	if len(p.state.ISR) < p.cfg.MinInsyncReplicas {
		isr, want := len(p.state.ISR), p.cfg.MinInsyncReplicas
		p.mu.Unlock()
		return MarkerResult{}, fmt.Errorf("%w: %d in-sync replicas, min.insync.replicas is %d", kerr.NotEnoughReplicas, isr, want)
	}
	res, err := p.appendMarkerLocked(producerID, producerEpoch, m)
	if err == nil {
		p.maybeAdvanceHWLocked()
	}
	p.mu.Unlock()
	if err == nil {
		p.wake()
	}
	return res, err
}

func (p *Partition) appendMarkerLocked(producerID int64, producerEpoch int16, m records.Marker) (MarkerResult, error) {
	if err := p.producers.checkMarker(producerID, producerEpoch, m); err != nil {
		return MarkerResult{}, err
	}
	batch, err := records.BuildMarker(producerID, producerEpoch, m, time.Now().UnixMilli())
	if err != nil {
		return MarkerResult{}, fmt.Errorf("build transaction marker: %w", err)
	}
	h, err := shalelog.ParseHeader(batch)
	if err != nil {
		return MarkerResult{}, err
	}
	epoch := p.state.LeaderEpoch
	end := p.log.EndOffset()
	info, err := p.log.Append(batch, epoch)
	if err != nil && p.log.EndOffset() == end {
		return MarkerResult{}, err
	}
	// In the log even if its flush failed (see appendLocked).
	h.BaseOffset, h.PartitionLeaderEpoch = info.BaseOffset, epoch
	p.noteAppendedLocked(info.BaseOffset, len(batch))
	p.snapshotAtRollLocked(info.BaseOffset)
	rerr := p.recordMarkerLocked(h, m, true)
	if err != nil {
		return MarkerResult{}, p.failLocked(err)
	}
	if rerr != nil {
		return MarkerResult{}, rerr
	}
	return MarkerResult{Offset: info.BaseOffset, LeaderEpoch: epoch}, nil
}

// recordMarkerLocked applies an appended marker to the producer state and, with index,
// an abort to the log's transaction index.
func (p *Partition) recordMarkerLocked(h shalelog.Header, m records.Marker, index bool) error {
	a, aborted := p.producers.recordMarker(h, m)
	p.noteTxnsLocked()
	if aborted && index {
		if err := p.log.AppendAbortedTxn(a); err != nil {
			return fmt.Errorf("%w: index the aborted transaction of producer %d at %d in %s-%d: %w", shalelog.ErrStorage, a.ProducerID, a.LastOffset, p.topic, p.index, err)
		}
	}
	return nil
}

// MarkerDone reports whether a marker appended in leader epoch epoch is committed; see
// ReplicationDone.
func (p *Partition) MarkerDone(r MarkerResult) (bool, error) {
	return p.ReplicationDone(r.Offset, r.LeaderEpoch)
}

// BeginTxnVerification starts the KIP-890 check of producerID's transactional write at
// epoch. needed is false when the partition already holds the producer's open
// transaction, or a verification of this epoch succeeded; otherwise the caller asks the
// coordinator and, on success, calls CompleteTxnVerification with the token.
func (p *Partition) BeginTxnVerification(producerID int64, epoch int16) (token uint64, needed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.producers.txns.beginVerification(producerID, epoch, p.producers.producers[producerID])
}

// CompleteTxnVerification records that the coordinator confirmed the verification
// started with token, and reports whether it could: a marker appended since cancels
// it, and the write is refused unless verified again.
func (p *Partition) CompleteTxnVerification(producerID int64, token uint64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.producers.txns.completeVerification(producerID, token)
}

func parseMarker(batch []byte) (records.Marker, error) { return records.ParseMarker(batch) }

// replayBatch applies a batch read back from the log to the producer state, and with
// index an abort marker to the transaction index.
func (p *Partition) replayBatch(h shalelog.Header, index bool) error {
	if !h.IsControl() {
		p.producers.record(h)
		return nil
	}
	m, err := p.readMarker(h)
	if err != nil {
		// A control record Shale does not know (Kafka reserves more types) ends nothing.
		p.lg.Warn("skipping an unreadable control batch", "offset", h.BaseOffset, "err", err)
		return nil
	}
	return p.recordMarkerLocked(h, m, index)
}

// readMarker reads the control batch h describes from the log.
func (p *Partition) readMarker(h shalelog.Header) (records.Marker, error) {
	v, err := p.log.Read(h.BaseOffset, h.Size(), h.LastOffset()+1, true)
	if err != nil {
		return records.Marker{}, err
	}
	defer v.Release()
	if v.Size != h.Size() {
		return records.Marker{}, fmt.Errorf("control batch at %d: read %d bytes of %d", h.BaseOffset, v.Size, h.Size())
	}
	return records.ParseMarker(slices.Concat(v.Chunks...))
}

// replayProducersLocked rebuilds the whole producer state from the log, for a
// truncation that cut into transactions: which of them are open again only the log
// can tell. The log's truncation already cut its transaction index.
func (p *Partition) replayProducersLocked() error {
	p.producers = newProducerState()
	if p.cfg.Tiered {
		// From the state as of the log start (tiered.go), which knows the producers
		// whose batches are all remote.
		if s, ok := p.rollSnapState(p.log.StartOffset()); ok {
			p.producers = s
		}
	}
	if p.log.StartOffset() >= p.log.EndOffset() {
		p.noteTxnsLocked()
		return nil
	}
	var replayErr error
	err := p.log.ScanHeaders(p.log.StartOffset(), func(h shalelog.Header) bool {
		replayErr = p.replayBatch(h, false)
		return replayErr == nil
	})
	if err == nil {
		err = replayErr
	}
	p.noteTxnsLocked()
	if err != nil {
		return fmt.Errorf("replay producer state of %s-%d: %w", p.topic, p.index, err)
	}
	return nil
}

// ProducerInfo describes one producer for DescribeProducers.
type ProducerInfo struct {
	ProducerID       int64
	ProducerEpoch    int16
	LastSequence     int32
	LastTimestamp    int64
	CoordinatorEpoch int32
	// CurrentTxnStartOffset is the first offset of the producer's open transaction, -1
	// when none.
	CurrentTxnStartOffset int64
}

// Producers describes the producers this replica tracks, ordered by id.
func (p *Partition) Producers() []ProducerInfo {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.producers.describe()
}

func (s *producerState) describe() []ProducerInfo {
	out := make([]ProducerInfo, 0, len(s.producers))
	for id, e := range s.producers {
		start, ok := s.txns.Ongoing[id]
		if !ok {
			start = -1
		}
		ts := e.LastTimestamp
		if ts == 0 && len(e.Batches) == 0 {
			ts = -1
		}
		out = append(out, ProducerInfo{ProducerID: id, ProducerEpoch: e.Epoch, LastSequence: e.lastSeq(), LastTimestamp: ts,
			CoordinatorEpoch: e.CoordinatorEpoch, CurrentTxnStartOffset: start})
	}
	slices.SortFunc(out, func(a, b ProducerInfo) int { return cmp.Compare(a.ProducerID, b.ProducerID) })
	return out
}

// firstUnstableOffset is the first offset of the oldest open transaction, or the log end
// when none is open: retention and DeleteRecords stop there.
func (p *Partition) firstUnstableOffset() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	first := p.log.EndOffset()
	for _, f := range p.producers.txns.Ongoing {
		first = min(first, f)
	}
	return first
}
