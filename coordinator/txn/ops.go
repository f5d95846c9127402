package txn

import (
	"context"
	"errors"
	"math"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/metadata"
)

// noProducerEpoch is Kafka's RecordBatch.NO_PRODUCER_EPOCH.
const noProducerEpoch int16 = -1

// errNeedProducerID asks InitProducerID's caller to draw a producer id outside the lock.
var errNeedProducerID = errors.New("a new producer id is needed")

func epochExhausted(e int16) bool { return e >= math.MaxInt16-1 }

// InitProducerID is the transactional InitProducerId: it gives id's producer its
// producer id and a bumped epoch, which fences every older producer of the id. With
// expectedPID >= 0 (KIP-360) the producer asks to bump its own epoch, and is fenced
// unless it still holds the current one. An ongoing transaction is aborted first: the
// caller gets CONCURRENT_TRANSACTIONS and retries.
func (c *Coordinator) InitProducerID(ctx context.Context, id string, timeoutMs int32, expectedPID int64, expectedEpoch int16) (int64, int16, error) {
	if id == "" {
		return -1, -1, kerr.InvalidRequest
	}
	if timeoutMs <= 0 || int64(timeoutMs) > c.cfg.MaxTimeout.Milliseconds() {
		return -1, -1, kerr.InvalidTransactionTimeout
	}
	c.awaitPrevious(ctx, id)
	newPID := int64(-1)
	for {
		pid, epoch, err := c.initProducerID(ctx, id, timeoutMs, expectedPID, expectedEpoch, newPID)
		if !errors.Is(err, errNeedProducerID) {
			return pid, epoch, err
		}
		if newPID, err = c.pids.Next(ctx); err != nil {
			c.lg.Warn("no producer id for a transactional producer", "transactional_id", id, "err", err)
			return -1, -1, kerr.CoordinatorNotAvailable
		}
	}
}

func (c *Coordinator) initProducerID(ctx context.Context, id string, timeoutMs int32, expectedPID int64, expectedEpoch int16, newPID int64) (int64, int16, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ps, err := c.partitionFor(id)
	if err != nil {
		return -1, -1, err
	}
	t := ps.txns[id]
	created := false
	if t == nil {
		if newPID < 0 {
			return -1, -1, errNeedProducerID
		}
		t = &txnMeta{st: metadata.TxnState{TransactionalID: id, ProducerID: newPID, ProducerEpoch: noProducerEpoch,
			LastProducerID: -1, LastProducerEpoch: noProducerEpoch, TimeoutMs: timeoutMs, Status: metadata.TxnEmpty,
			LastUpdateMs: c.now(), NextProducerID: -1}}
		ps.txns[id] = t
		created = true
		newPID = -1
	}
	st := t.st
	expected := expectedPID >= 0
	switch {
	case t.writing:
		return -1, -1, kerr.ConcurrentTransactions
	case expected && st.ProducerEpoch != noProducerEpoch && expectedPID != st.ProducerID &&
		!(expectedPID == st.LastProducerID && epochExhausted(expectedEpoch)):
		return -1, -1, kerr.ProducerFenced
	}
	next := st
	next.TimeoutMs = timeoutMs
	next.LastUpdateMs = c.now()
	switch st.Status {
	case metadata.TxnPrepareCommit, metadata.TxnPrepareAbort, metadata.TxnDead, metadata.TxnPrepareEpochFence:
		return -1, -1, kerr.ConcurrentTransactions
	case metadata.TxnOngoing:
		// Abort the ongoing transaction under a bumped epoch, which fences its producer;
		// this epoch is never handed out, the caller retries after the abort completes.
		if err := c.fenceAndAbortLocked(ctx, ps, t); err != nil {
			return -1, -1, err
		}
		return -1, -1, kerr.ConcurrentTransactions
	}
	// Empty, CompleteCommit or CompleteAbort.
	if epochExhausted(st.ProducerEpoch) && (!expected || expectedEpoch == st.ProducerEpoch) {
		if newPID < 0 {
			return -1, -1, errNeedProducerID
		}
		next.ProducerID, next.ProducerEpoch = newPID, 0
		next.LastProducerID, next.LastProducerEpoch = -1, noProducerEpoch
		if expected {
			next.LastProducerID, next.LastProducerEpoch = st.ProducerID, st.ProducerEpoch
		}
	} else {
		switch {
		case !expected:
			next.ProducerEpoch = st.ProducerEpoch + 1
			next.LastProducerID, next.LastProducerEpoch = -1, noProducerEpoch
		case st.ProducerEpoch == noProducerEpoch || expectedEpoch == st.ProducerEpoch:
			next.ProducerEpoch = st.ProducerEpoch + 1
			next.LastProducerID, next.LastProducerEpoch = st.ProducerID, st.ProducerEpoch
		case expectedEpoch == st.LastProducerEpoch:
			// A retry of a bump whose answer the producer lost.
			return st.ProducerID, st.ProducerEpoch, nil
		default:
			return -1, -1, kerr.ProducerFenced
		}
	}
	next.Status = metadata.TxnEmpty
	next.Partitions, next.Groups, next.PendingOffsets = nil, nil, nil
	next.StartMs = -1
	t.writing = true
	if err := c.write(ctx, ps, t, next); err != nil {
		if created && ps.txns[id] == t {
			delete(ps.txns, id)
		}
		return -1, -1, err
	}
	return next.ProducerID, next.ProducerEpoch, nil
}

// fenceAndAbortLocked aborts t's ongoing transaction under a bumped producer epoch
// (Kafka's PrepareEpochFence then PrepareAbort, committed as one transition) and starts
// writing the abort markers. Callers hold c.mu.
func (c *Coordinator) fenceAndAbortLocked(ctx context.Context, ps *partition, t *txnMeta) error {
	next := t.st
	if next.ProducerEpoch < math.MaxInt16 {
		next.ProducerEpoch++
	}
	// A fenced producer's EndTxn v5 is not a retry of its own (KIP-890 part 2): only an
	// EndTxn's epoch bump makes one.
	next.TxnVersion, next.NextProducerID = 0, -1
	next.Status = metadata.TxnPrepareAbort
	next.LastUpdateMs = c.now()
	t.writing = true
	if err := c.write(ctx, ps, t, next); err != nil {
		return err
	}
	c.startCompletionLocked(ps, t)
	return nil
}

// awaitPrevious waits, up to Config.CompletionWait, while id's previous transaction is being
// completed. Kafka answers CONCURRENT_TRANSACTIONS at once and clients retry after a
// backoff (franz-go's 20ms), which bounds a producer of small transactions to a few
// dozen a second; the markers and the Complete* commit take a few milliseconds.
func (c *Coordinator) awaitPrevious(ctx context.Context, id string) {
	c.mu.Lock()
	var done chan struct{}
	if ps, err := c.partitionFor(id); err == nil {
		// The wait covers the completion's own Complete* write too: a request that
		// arrives while it commits would otherwise be answered CONCURRENT_TRANSACTIONS,
		// and librdkafka, whose AddPartitionsToTxn is then retried, sends an abort's
		// EndTxn as though the partitions were added, which the completed transaction
		// can only answer INVALID_TXN_STATE, fatal for the producer.
		if t := ps.txns[id]; t != nil && t.completed != nil &&
			(t.st.Status == metadata.TxnPrepareCommit || t.st.Status == metadata.TxnPrepareAbort) {
			done = t.completed
		}
	}
	c.mu.Unlock()
	if done == nil {
		return
	}
	timer := time.NewTimer(c.cfg.CompletionWait)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
	case <-ctx.Done():
	}
}

// checkProducer is the check every client request of a transaction starts with.
func checkProducer(t *txnMeta, pid int64, epoch int16) error {
	switch {
	case t == nil || t.st.ProducerID != pid:
		return kerr.InvalidProducerIDMapping
	case t.st.ProducerEpoch != epoch:
		return kerr.ProducerFenced
	case t.writing:
		return kerr.ConcurrentTransactions
	}
	return nil
}

// AddPartitions adds partitions to id's transaction, starting it if none is ongoing.
func (c *Coordinator) AddPartitions(ctx context.Context, id string, pid int64, epoch int16, partitions map[string][]int32) error {
	return c.add(ctx, id, pid, epoch, func(st *metadata.TxnState) bool {
		changed := false
		for topic, ps := range partitions {
			for _, p := range ps {
				if !slices.Contains(st.Partitions[topic], p) {
					if st.Partitions == nil {
						st.Partitions = map[string][]int32{}
					}
					st.Partitions[topic] = append(st.Partitions[topic], p)
					slices.Sort(st.Partitions[topic])
					changed = true
				}
			}
		}
		return changed
	})
}

// AddOffsets adds a consumer group to id's transaction, so that TxnOffsetCommit may
// commit its offsets with the transaction (Kafka adds the group's __consumer_offsets
// partition).
func (c *Coordinator) AddOffsets(ctx context.Context, id string, pid int64, epoch int16, group string) error {
	if group == "" {
		return kerr.InvalidGroupID
	}
	return c.add(ctx, id, pid, epoch, func(st *metadata.TxnState) bool {
		if slices.Contains(st.Groups, group) {
			return false
		}
		st.Groups = append(st.Groups, group)
		slices.Sort(st.Groups)
		return true
	})
}

func (c *Coordinator) add(ctx context.Context, id string, pid int64, epoch int16, add func(*metadata.TxnState) bool) error {
	c.awaitPrevious(ctx, id)
	c.mu.Lock()
	defer c.mu.Unlock()
	ps, err := c.partitionFor(id)
	if err != nil {
		return err
	}
	t := ps.txns[id]
	if err := checkProducer(t, pid, epoch); err != nil {
		return err
	}
	next := t.st
	switch next.Status {
	case metadata.TxnPrepareCommit, metadata.TxnPrepareAbort:
		return kerr.ConcurrentTransactions
	case metadata.TxnDead, metadata.TxnPrepareEpochFence:
		return kerr.InvalidTxnState
	case metadata.TxnOngoing:
		next.Partitions, next.Groups = clonePartitions(next.Partitions), slices.Clone(next.Groups)
	default:
		// A new transaction.
		next.Partitions, next.Groups, next.PendingOffsets = nil, nil, nil
		next.StartMs = c.now()
	}
	if !add(&next) && next.Status == metadata.TxnOngoing {
		return nil
	}
	next.Status = metadata.TxnOngoing
	next.LastUpdateMs = c.now()
	t.writing = true
	return c.write(ctx, ps, t, next)
}

// EndTxn commits or aborts id's transaction: it commits PrepareCommit or PrepareAbort
// through the controller and answers, while the markers are written to the
// partitions' leaders in the background; CompleteCommit or CompleteAbort follows once
// every leader has written its marker.
//
// With v2 (transaction version 2, EndTxn v5+: KIP-890 part 2) the same controller write
// bumps the producer's epoch: the markers carry the bumped epoch, which fences the
// transaction's late writes at every partition, and the producer continues with the
// producer id and epoch EndTxn returns (a new producer id at epoch 0 once the epochs
// are exhausted). A retry of an EndTxn already applied, recognised by the epoch it was
// sent with, gets the producer's current id and epoch again. Without v2 the id and
// epoch are returned unchanged.
func (c *Coordinator) EndTxn(ctx context.Context, id string, pid int64, epoch int16, commit, v2 bool) (int64, int16, error) {
	if !v2 {
		if err := c.endTxnV1(ctx, id, pid, epoch, commit); err != nil {
			return -1, -1, err
		}
		return pid, epoch, nil
	}
	// The producer's previous end may still be writing its markers: its next
	// transaction's end (an empty abort, say) waits for them as AddPartitions does.
	c.awaitPrevious(ctx, id)
	newPID := int64(-1)
	for {
		npid, nepoch, err := c.endTxnV2(ctx, id, pid, epoch, commit, newPID)
		if !errors.Is(err, errNeedProducerID) {
			return npid, nepoch, err
		}
		if newPID, err = c.pids.Next(ctx); err != nil {
			c.lg.Warn("no producer id for a producer whose epochs are exhausted", "transactional_id", id, "err", err)
			return -1, -1, kerr.CoordinatorNotAvailable
		}
	}
}

func (c *Coordinator) endTxnV2(ctx context.Context, id string, pid int64, epoch int16, commit bool, newPID int64) (int64, int16, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ps, err := c.partitionFor(id)
	if err != nil {
		return -1, -1, err
	}
	t := ps.txns[id]
	if t == nil {
		return -1, -1, kerr.InvalidProducerIDMapping
	}
	st := t.st
	// An EndTxn whose epoch bump is already committed: the producer sent it with the
	// id and epoch the bump left behind.
	retry := st.TxnVersion >= 2 && epoch >= 0 && st.LastProducerID == pid && st.LastProducerEpoch == epoch
	if st.ProducerID != pid && !retry {
		return -1, -1, kerr.InvalidProducerIDMapping
	}
	var valid bool
	switch st.Status {
	case metadata.TxnPrepareCommit, metadata.TxnPrepareAbort:
		// Kafka fences the current epoch here too; but the producer holding it ended
		// its previous transaction and may end the next (an abort of produces that
		// failed) before the markers are written: it retries after
		// CONCURRENT_TRANSACTIONS below.
		valid = retry || (st.ProducerID == pid && epoch == st.ProducerEpoch)
	case metadata.TxnCompleteCommit, metadata.TxnCompleteAbort:
		valid = retry || (st.ProducerID == pid && epoch == st.ProducerEpoch)
	default:
		valid = st.ProducerID == pid && epoch == st.ProducerEpoch
	}
	switch {
	case !valid:
		return -1, -1, kerr.ProducerFenced
	case t.writing:
		return -1, -1, kerr.ConcurrentTransactions
	}
	switch st.Status {
	case metadata.TxnOngoing:
		return c.endBumpLocked(ctx, ps, t, commit, false, newPID)
	case metadata.TxnCompleteCommit:
		switch {
		case commit && retry:
			return st.ProducerID, st.ProducerEpoch, nil
		case !commit && !retry:
			return c.endBumpLocked(ctx, ps, t, false, true, newPID)
		}
	case metadata.TxnCompleteAbort:
		switch {
		case !commit && retry:
			return st.ProducerID, st.ProducerEpoch, nil
		case !commit:
			return c.endBumpLocked(ctx, ps, t, false, true, newPID)
		}
	case metadata.TxnEmpty:
		if !commit {
			// Transactions v2 may abort a transaction that added nothing: its
			// produces may have registered partitions before they failed.
			return c.endBumpLocked(ctx, ps, t, false, true, newPID)
		}
	case metadata.TxnPrepareCommit, metadata.TxnPrepareAbort:
		if !retry || commit == (st.Status == metadata.TxnPrepareCommit) {
			return -1, -1, kerr.ConcurrentTransactions
		}
	}
	return -1, -1, kerr.InvalidTxnState
}

// endBumpLocked commits PrepareCommit or PrepareAbort with the producer's epoch bumped
// (transactions v2) and starts writing the markers; empty ends a transaction that added
// nothing (an abort only). It returns the producer id and epoch the producer continues
// with. Callers hold c.mu.
func (c *Coordinator) endBumpLocked(ctx context.Context, ps *partition, t *txnMeta, commit, empty bool, newPID int64) (int64, int16, error) {
	st := t.st
	next := st
	next.NextProducerID = -1
	if epochExhausted(st.ProducerEpoch) {
		// Kafka never hands out the last epoch: the markers take it, and the producer
		// continues under a new producer id.
		if newPID < 0 {
			return -1, -1, errNeedProducerID
		}
		next.NextProducerID = newPID
	}
	if next.ProducerEpoch < math.MaxInt16 {
		next.ProducerEpoch++
	}
	next.LastProducerID, next.LastProducerEpoch = st.ProducerID, st.ProducerEpoch
	next.TxnVersion = 2
	next.Status = metadata.TxnPrepareAbort
	if commit {
		next.Status = metadata.TxnPrepareCommit
	}
	now := c.now()
	if empty {
		next.Partitions, next.Groups, next.PendingOffsets = nil, nil, nil
		next.StartMs = now
	}
	next.LastUpdateMs = now
	t.writing = true
	if err := c.write(ctx, ps, t, next); err != nil {
		return -1, -1, err
	}
	c.startCompletionLocked(ps, t)
	if next.NextProducerID >= 0 {
		return next.NextProducerID, 0, nil
	}
	return next.ProducerID, next.ProducerEpoch, nil
}

func (c *Coordinator) endTxnV1(ctx context.Context, id string, pid int64, epoch int16, commit bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	ps, err := c.partitionFor(id)
	if err != nil {
		return err
	}
	t := ps.txns[id]
	if err := checkProducer(t, pid, epoch); err != nil {
		return err
	}
	next := t.st
	switch next.Status {
	case metadata.TxnOngoing:
	case metadata.TxnCompleteCommit:
		if commit {
			return nil // a retry
		}
		return kerr.InvalidTxnState
	case metadata.TxnCompleteAbort:
		if !commit {
			return nil
		}
		return kerr.InvalidTxnState
	case metadata.TxnPrepareCommit:
		if commit {
			return kerr.ConcurrentTransactions
		}
		return kerr.InvalidTxnState
	case metadata.TxnPrepareAbort:
		if !commit {
			return kerr.ConcurrentTransactions
		}
		return kerr.InvalidTxnState
	default:
		return kerr.InvalidTxnState
	}
	next.Status = metadata.TxnPrepareAbort
	if commit {
		next.Status = metadata.TxnPrepareCommit
	}
	next.LastUpdateMs = c.now()
	t.writing = true
	if err := c.write(ctx, ps, t, next); err != nil {
		return err
	}
	c.startCompletionLocked(ps, t)
	return nil
}

// Verify is KIP-890's check (AddPartitionsToTxn with VerifyOnly): the error for the
// whole transaction, else each partition's, nil for the partitions in the ongoing
// transaction and INVALID_TXN_STATE for the others.
func (c *Coordinator) Verify(id string, pid int64, epoch int16, partitions map[string][]int32) (map[string]map[int32]error, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ps, err := c.partitionFor(id)
	if err != nil {
		return nil, err
	}
	t := ps.txns[id]
	switch {
	case t == nil || t.st.ProducerID != pid:
		return nil, kerr.InvalidProducerIDMapping
	case t.st.ProducerEpoch != epoch:
		return nil, kerr.ProducerFenced
	case t.st.Status == metadata.TxnPrepareCommit || t.st.Status == metadata.TxnPrepareAbort:
		return nil, kerr.ConcurrentTransactions
	}
	out := map[string]map[int32]error{}
	for topic, parts := range partitions {
		out[topic] = map[int32]error{}
		for _, p := range parts {
			var err error
			if t.st.Status != metadata.TxnOngoing || !slices.Contains(t.st.Partitions[topic], p) {
				err = kerr.InvalidTxnState
			}
			out[topic][p] = err
		}
	}
	return out, nil
}

// verifyOne is the partition leader's KIP-890 check of one partition, made locally.
func (c *Coordinator) verifyOne(id string, pid int64, epoch int16, topic string, partition int32) error {
	res, err := c.Verify(id, pid, epoch, map[string][]int32{topic: {partition}})
	if err != nil {
		return err
	}
	return res[topic][partition]
}

// Describe returns id's state (DescribeTransactions).
func (c *Coordinator) Describe(id string) (metadata.TxnState, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ps, err := c.partitionFor(id)
	if err != nil {
		return metadata.TxnState{}, err
	}
	t := ps.txns[id]
	if t == nil {
		return metadata.TxnState{}, kerr.TransactionalIDNotFound
	}
	st := t.st
	st.Partitions, st.Groups = clonePartitions(st.Partitions), slices.Clone(st.Groups)
	return st, nil
}

// ListFilter selects ListTransactions' transactions; empty fields select all.
type ListFilter struct {
	States      []string
	ProducerIDs []int64
	// MinDurationMs selects transactions running at least this long (ListTransactions
	// v1); negative for all.
	MinDurationMs int64
}

// List returns the transactions of every loaded partition the filter selects, sorted
// by id, and whether a partition is still loading (COORDINATOR_LOAD_IN_PROGRESS).
func (c *Coordinator) List(f ListFilter) ([]metadata.TxnState, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	var out []metadata.TxnState
	loading := false
	for _, ps := range c.parts {
		if !ps.loaded {
			loading = true
			continue
		}
		for _, t := range ps.txns {
			st := t.st
			switch {
			case len(f.States) > 0 && !slices.Contains(f.States, st.Status.String()):
				continue
			case len(f.ProducerIDs) > 0 && !slices.Contains(f.ProducerIDs, st.ProducerID):
				continue
			case f.MinDurationMs >= 0 && now-st.StartMs < f.MinDurationMs:
				continue
			}
			out = append(out, st)
		}
	}
	slices.SortFunc(out, func(a, b metadata.TxnState) int {
		switch {
		case a.TransactionalID < b.TransactionalID:
			return -1
		case a.TransactionalID > b.TransactionalID:
			return 1
		}
		return 0
	})
	return out, loading
}

// CommitOffsets stores a TxnOffsetCommit's offsets as pending in id's transaction; the
// group's coordinator (this broker or not the transaction's) calls it under its fence.
// The controller checks the transaction: the producer's id and epoch and that
// AddOffsetsToTxn added the group.
func (c *Coordinator) CommitOffsets(ctx context.Context, fence metadata.GroupFence, id string, pid int64, epoch int16, group string, offsets []metadata.CommittedOffset) error {
	return c.store.TxnOffsetCommit(ctx, fence, id, pid, epoch, group, offsets)
}

// PendingOffsets lists the partitions of group with offsets pending in an open
// transaction: OffsetFetch with require_stable answers them UNSTABLE_OFFSET_COMMIT
// (KIP-447), so that a consumer taking over a partition does not start from an offset
// that a transaction in flight is about to move.
func (c *Coordinator) PendingOffsets(ctx context.Context, group string) (map[string][]int32, error) {
	return c.store.PendingTxnOffsets(ctx, group)
}
