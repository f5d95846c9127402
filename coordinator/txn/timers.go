package txn

import (
	"context"
	"time"

	"github.com/shalelog/shale/coordinator/timer"
	"github.com/shalelog/shale/metadata"
)

// timers aborts timed-out transactions every AbortTimedOutInterval and forgets expired
// transactional ids every RemoveExpiredInterval. Each sweep runs here rather than in
// its timer's callback, which holds c.mu, and its timer is re-armed before it runs, as
// a ticker would fire.
func (c *Coordinator) timers(ctx context.Context) {
	defer c.wg.Done()
	abort, expire := make(chan struct{}, 1), make(chan struct{}, 1)
	arm := func(s *timer.Slot, d time.Duration, ch chan struct{}) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.sweeps.Arm(s, d, func() {
			select {
			case ch <- struct{}{}:
			default:
			}
		})
	}
	arm(&c.abortTimer, c.cfg.AbortTimedOutInterval, abort)
	arm(&c.expireTimer, c.cfg.RemoveExpiredInterval, expire)
	for {
		select {
		case <-ctx.Done():
			return
		case <-abort:
			arm(&c.abortTimer, c.cfg.AbortTimedOutInterval, abort)
			c.AbortTimedOut()
		case <-expire:
			arm(&c.expireTimer, c.cfg.RemoveExpiredInterval, expire)
			c.RemoveExpired()
		}
	}
}

type txnRef struct {
	ps *partition
	t  *txnMeta
	// epoch is the producer epoch when selected: a transaction whose producer moved on
	// meanwhile is left alone.
	epoch int16
}

func (c *Coordinator) selectTxns(pick func(st metadata.TxnState, now int64) bool) []txnRef {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	var out []txnRef
	for _, ps := range c.parts {
		if !ps.loaded {
			continue
		}
		for _, t := range ps.txns {
			if !t.writing && pick(t.st, now) {
				out = append(out, txnRef{ps, t, t.st.ProducerEpoch})
			}
		}
	}
	return out
}

// AbortTimedOut aborts, with an epoch bump that fences their producers, the
// transactions open longer than their transaction.timeout.ms.
func (c *Coordinator) AbortTimedOut() {
	timedOut := func(st metadata.TxnState, now int64) bool {
		return st.Status == metadata.TxnOngoing && st.StartMs >= 0 && now-st.StartMs > int64(st.TimeoutMs)
	}
	for _, r := range c.selectTxns(timedOut) {
		c.mu.Lock()
		if r.ps.txns[r.t.st.TransactionalID] == r.t && !r.t.writing && r.t.st.ProducerEpoch == r.epoch && timedOut(r.t.st, c.now()) {
			c.lg.Info("aborting a timed out transaction", "transactional_id", r.t.st.TransactionalID,
				"producer_id", r.t.st.ProducerID, "producer_epoch", r.t.st.ProducerEpoch, "timeout_ms", r.t.st.TimeoutMs)
			ctx, cancel := c.storeCtx(r.ps)
			if err := c.fenceAndAbortLocked(ctx, r.ps, r.t); err != nil {
				c.lg.Warn("aborting a timed out transaction failed", "transactional_id", r.t.st.TransactionalID, "err", err)
			}
			cancel()
		}
		c.mu.Unlock()
	}
}

// RemoveExpired forgets the transactional ids with no transaction for
// transactional.id.expiration.ms.
func (c *Coordinator) RemoveExpired() {
	expiration := c.cfg.IDExpiration.Milliseconds()
	expired := func(st metadata.TxnState, now int64) bool {
		switch st.Status {
		case metadata.TxnEmpty, metadata.TxnCompleteCommit, metadata.TxnCompleteAbort:
			return now-st.LastUpdateMs >= expiration
		}
		return false
	}
	for _, r := range c.selectTxns(expired) {
		c.mu.Lock()
		id := r.t.st.TransactionalID
		if r.ps.txns[id] != r.t || r.t.writing || !expired(r.t.st, c.now()) {
			c.mu.Unlock()
			continue
		}
		r.t.writing = true
		st := r.t.st
		fence := metadata.GroupFence{Broker: c.cfg.NodeID, Epoch: r.ps.epoch}
		c.mu.Unlock()
		ctx, cancel := c.storeCtx(r.ps)
		err := c.store.WriteTxnState(ctx, fence, st, true)
		cancel()
		c.mu.Lock()
		r.t.writing = false
		if err == nil {
			if r.ps.txns[id] == r.t {
				delete(r.ps.txns, id)
			}
			c.lg.Info("transactional id expired", "transactional_id", id)
		} else {
			c.lg.Warn("expiring a transactional id failed", "transactional_id", id, "err", err)
		}
		c.mu.Unlock()
	}
}
