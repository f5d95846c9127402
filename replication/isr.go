package replication

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/partition"
)

// alterPartitionTimeout bounds one AlterPartition call; a change that times out is
// sent again after a back-off.
const alterPartitionTimeout = 10 * time.Second

// alterISRRetryMin and alterISRRetryMax bound the back-off, doubling from one to the
// other, between sends of an ISR change whose outcome is unknown (Kafka's retry.backoff.ms
// and retry.backoff.max.ms defaults). alterISRRetryMin is also how often due resends are
// looked for.
const (
	alterISRRetryMin = 100 * time.Millisecond
	alterISRRetryMax = time.Second
)

// isrRetries holds the ISR changes waiting to be sent again, one per partition (a
// partition has one change in flight at most).
type isrRetries struct {
	mu      sync.Mutex
	pending map[partition.TopicPartition]isrRetry
}

// isrRetry is an ISR change c whose outcome is unknown, to be sent again at at; send is
// what to send, c itself or its fence (ISRChangeRefused), attempt times so far.
type isrRetry struct {
	p       *partition.Partition
	c, send partition.ISRChange
	attempt int
	at      time.Time
}

// isrLoop checks the partitions this broker leads for followers that fell behind, every
// half of replica.lag.time.max.ms as Kafka does, and sends again the ISR changes whose
// outcome is unknown once their back-off has passed.
func (m *Manager) isrLoop() {
	t := time.NewTicker(max(m.cfg.ReplicaLagTimeMax/2, 10*time.Millisecond))
	defer t.Stop()
	retry := time.NewTicker(alterISRRetryMin)
	defer retry.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-retry.C:
			m.retryISRChanges(m.now())
			continue
		case <-t.C:
		}
		m.checkLag(m.now())
	}
}

// CheckISR is the ISR loop's work once, for a Driven manager's caller: it proposes to
// drop from the ISR of every partition this broker leads the followers that have not
// caught up within replica.lag.time.max.ms, and sends again the ISR changes whose
// outcome is unknown once their back-off has passed.
func (m *Manager) CheckISR() {
	now := m.now()
	m.checkLag(now)
	m.retryISRChanges(now)
}

func (m *Manager) checkLag(now time.Time) {
	for _, p := range m.parts.All() {
		if p.Role() != partition.RoleLeader {
			continue
		}
		if c, ok := p.ProposeShrink(now, m.cfg.ReplicaLagTimeMax); ok {
			m.m.isrShrinks.Inc()
			m.alterISR(p, c, c, 1)
		}
	}
}

// proposeExpand adds a caught-up follower to the ISR.
func (m *Manager) proposeExpand(p *partition.Partition, id int32) {
	if c, ok := p.ProposeExpand(id, m.now()); ok {
		m.m.isrExpands.Inc()
		m.alterISR(p, c, c, 1)
	}
}

// alterISR sends send, which is the pending ISR change c or its fence, to the controller
// in the background, for the attempt-th time. The committed change reaches the replica
// through the metadata.
func (m *Manager) alterISR(p *partition.Partition, c, send partition.ISRChange, attempt int) {
	// Follower fetches propose expansions from request goroutines, which may race Close:
	// the WaitGroup may only grow while the manager is open, else Close's Wait could
	// return with a proposal still running (or Add race the Wait).
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return // the change stays pending, which is the safe side
	}
	m.wg.Add(1)
	m.mu.Unlock()
	m.cfg.Spawn(func() {
		defer m.wg.Done()
		ctx, cancel := context.WithTimeout(m.ctx, alterPartitionTimeout)
		defer cancel()
		_, err := m.store.AlterPartition(ctx, metadata.AlterPartitionRequest{
			Topic: p.Topic(), Partition: p.Index(), LeaderEpoch: send.LeaderEpoch, PartitionEpoch: send.PartitionEpoch, NewISR: send.NewISR,
		})
		m.alterISRDone(p, c, send, attempt, err, m.now())
	})
}

// alterISRDone acts on the answer to send, the pending ISR change c or its fence. No
// answer drops c: it stays pending, so that the high watermark keeps respecting the ISR
// it may have committed (the maximal ISR), until the replica sees newer state or stops
// leading (Kafka's Partition.handleAlterPartitionError and AlterPartitionManager's
// retries). An answer that leaves the outcome unknown sends the same again after a
// back-off. A refusal proves only that this send was not applied, while an earlier one
// may still be on its way: then the leader sends the fence (ISRChangeRefused), whose
// commit refuses every earlier send and brings the newer state. (Kafka drops the change
// on a refusal, and only waits for the metadata after a stale-epoch answer; resending
// then too costs the controller a dry run a second at most, and recovers should the
// answer have come from a controller whose state lagged this broker's.)
func (m *Manager) alterISRDone(p *partition.Partition, c, send partition.ISRChange, attempt int, err error, now time.Time) {
	lg := m.lg.With("topic", p.Topic(), "partition", p.Index(), "isr", send.NewISR, "leader_epoch", send.LeaderEpoch, "partition_epoch", send.PartitionEpoch)
	switch {
	case err == nil:
		lg.Info("ISR changed")
	case m.ctx.Err() != nil:
		// Closing: the replica closes with its change pending, which is the safe side.
	case !p.ISRChangePending(c):
		// Newer state arrived meanwhile, or the replica no longer leads: the outcome is
		// known, and a resend would only be refused.
	case alterISRNotApplied(err):
		fence, ok := p.ISRChangeRefused(c, now)
		if !ok {
			return
		}
		// Without the fenced brokers, which the controller would refuse again (leaving
		// one out of the ISR is always safe).
		fence.NewISR = slices.DeleteFunc(fence.NewISR, func(id int32) bool { return id != m.cfg.NodeID && !m.brokerAlive(id) })
		lg.Warn("ISR change refused; fencing off earlier sends of it before proposing another", "err", err, "fence_isr", fence.NewISR)
		m.scheduleISRResend(p, c, fence, attempt, now)
	default:
		lvl := slog.LevelDebug
		if attempt == 1 {
			lvl = slog.LevelWarn
		}
		lg.Log(m.ctx, lvl, "ISR change not known to be applied or refused; the high watermark respects the larger ISR until it is, and the change is sent again",
			"attempt", attempt, "retry_in", alterISRRetryDelay(attempt), "err", err)
		m.scheduleISRResend(p, c, send, attempt, now)
	}
}

// scheduleISRResend sends send again after the back-off of its attempt-th failure.
func (m *Manager) scheduleISRResend(p *partition.Partition, c, send partition.ISRChange, attempt int, now time.Time) {
	m.isrRetries.mu.Lock()
	defer m.isrRetries.mu.Unlock()
	if m.isrRetries.pending == nil {
		m.isrRetries.pending = map[partition.TopicPartition]isrRetry{}
	}
	m.isrRetries.pending[partition.TopicPartition{Topic: p.Topic(), Index: p.Index()}] = isrRetry{
		p: p, c: c, send: send, attempt: attempt, at: now.Add(alterISRRetryDelay(max(attempt, 1)))}
}

// retryISRChanges sends again, as they were, the ISR changes whose back-off has passed
// by now and that are still pending, and returns how many it sent.
func (m *Manager) retryISRChanges(now time.Time) int {
	m.isrRetries.mu.Lock()
	var due []isrRetry
	for tp, r := range m.isrRetries.pending {
		if !r.at.After(now) {
			due = append(due, r)
			delete(m.isrRetries.pending, tp)
		}
	}
	m.isrRetries.mu.Unlock()
	n := 0
	for _, r := range due {
		if m.parts.Get(r.p.Topic(), r.p.Index()) != r.p || !r.p.ISRChangePending(r.c) {
			continue // removed, stepped down, or newer state arrived
		}
		m.alterISR(r.p, r.c, r.send, r.attempt+1)
		n++
	}
	return n
}

// alterISRRetryDelay is the back-off after the attempt-th send of a change failed.
func alterISRRetryDelay(attempt int) time.Duration {
	d := alterISRRetryMin
	for i := 1; i < attempt && d < alterISRRetryMax; i++ {
		d *= 2
	}
	return min(d, alterISRRetryMax)
}

// alterISRNotApplied reports whether an AlterPartition error proves that this send was
// not committed and never will be. The controller checks the leader and partition epochs
// before the replicas (controller/fsm_topics.go applyAlterPartition), so
// INELIGIBLE_REPLICA says the epochs were current, hence no earlier send of the change
// was committed yet, and this one was refused; so does OPERATION_NOT_ATTEMPTED in Kafka.
// Every other answer leaves the outcome unknown: a timeout, a transport error or an
// unreachable quorum may follow a commit, and INVALID_UPDATE_VERSION or
// FENCED_LEADER_EPOCH is what a resend of a committed change gets (the quorum client
// resends by itself when the controller changes, so even a first answer can be one).
func alterISRNotApplied(err error) bool {
	return errors.Is(err, kerr.IneligibleReplica) || errors.Is(err, kerr.OperationNotAttempted)
}
