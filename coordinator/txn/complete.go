package txn

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/metadata"
)

// errCoordinatorFenced ends a completion: a leader has seen a newer coordinator epoch.
var errCoordinatorFenced = errors.New("a newer transaction coordinator exists")

type topicPartition struct {
	topic     string
	partition int32
}

// startCompletionLocked writes t's markers in the background and then its Complete*
// state. Callers hold c.mu.
func (c *Coordinator) startCompletionLocked(ps *partition, t *txnMeta) {
	if t.completed != nil || ps.ctx.Err() != nil {
		return
	}
	t.completed = make(chan struct{})
	st := t.st
	st.Partitions = clonePartitions(st.Partitions)
	c.wg.Add(1)
	go c.complete(ps, t, st)
}

func (c *Coordinator) complete(ps *partition, t *txnMeta, st metadata.TxnState) {
	defer c.wg.Done()
	commit := st.Status == metadata.TxnPrepareCommit
	if err := c.writeMarkers(ps.ctx, ps.epoch, st, commit); err != nil {
		c.mu.Lock()
		t.endCompletion()
		if errors.Is(err, errCoordinatorFenced) {
			c.lg.Info("a partition leader fenced this transaction coordinator; unloading the partition",
				"transactional_id", st.TransactionalID, "partition", ps.index, "coordinator_epoch", ps.epoch)
			c.unloadLocked(ps)
		}
		c.mu.Unlock()
		return
	}
	for attempt := 0; ; attempt++ {
		c.mu.Lock()
		if ps.ctx.Err() != nil || ps.txns[st.TransactionalID] != t || t.st.Status != st.Status {
			t.endCompletion()
			c.mu.Unlock()
			return
		}
		next := t.st
		next.Status = metadata.TxnCompleteAbort
		if commit {
			next.Status = metadata.TxnCompleteCommit
		}
		next.Partitions, next.Groups, next.PendingOffsets = nil, nil, nil
		if next.TxnVersion >= 2 && next.NextProducerID >= 0 {
			// The ended transaction exhausted the producer's epochs (KIP-890 part 2):
			// its markers are written, the producer continues under the next id.
			// LastProducerID and LastProducerEpoch keep what the producer last held.
			next.ProducerID, next.ProducerEpoch = next.NextProducerID, 0
		}
		next.NextProducerID = -1
		next.LastUpdateMs = c.now()
		t.writing = true
		ctx, cancel := c.storeCtx(ps)
		err := c.write(ctx, ps, t, next)
		cancel()
		if err == nil || ps.ctx.Err() != nil {
			t.endCompletion()
			c.mu.Unlock()
			if err == nil {
				c.lg.Debug("transaction completed", "transactional_id", st.TransactionalID, "state", next.Status.String())
			}
			return
		}
		c.mu.Unlock()
		c.lg.Warn("completing a transaction failed; retrying", "transactional_id", st.TransactionalID, "err", err)
		if !sleep(ps.ctx, c.cfg.MarkerRetryBackoff) {
			c.mu.Lock()
			t.endCompletion()
			c.mu.Unlock()
			return
		}
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// writeMarkers sends the transaction's marker to the leader of each of its partitions,
// again and again until every one has written it, the partition's topic is gone, or
// ctx ends.
func (c *Coordinator) writeMarkers(ctx context.Context, coordEpoch int32, st metadata.TxnState, commit bool) error {
	remaining := map[topicPartition]bool{}
	for topic, ps := range st.Partitions {
		for _, p := range ps {
			remaining[topicPartition{topic, p}] = true
		}
	}
	for len(remaining) > 0 {
		im := c.store.Current()
		byLeader := map[int32][]topicPartition{}
		for tp := range remaining {
			p := im.Partition(tp.topic, tp.partition)
			if p == nil {
				// Deleted with its markers' reason to exist.
				delete(remaining, tp)
				continue
			}
			if p.Leader >= 0 {
				byLeader[p.Leader] = append(byLeader[p.Leader], tp)
			}
		}
		var (
			mu     sync.Mutex
			fenced bool
			wg     sync.WaitGroup
		)
		for _, leader := range slices.Sorted(maps.Keys(byLeader)) {
			b, ok := im.Brokers[leader]
			if !ok || b.Fenced {
				continue
			}
			tps := byLeader[leader]
			wg.Add(1)
			go func() {
				defer wg.Done()
				done, f := c.sendMarkers(ctx, b, coordEpoch, st, commit, tps)
				mu.Lock()
				defer mu.Unlock()
				fenced = fenced || f
				for _, tp := range done {
					delete(remaining, tp)
				}
			}()
		}
		wg.Wait()
		if fenced {
			return errCoordinatorFenced
		}
		if len(remaining) > 0 && !sleep(ctx, c.cfg.MarkerRetryBackoff) {
			return ctx.Err()
		}
	}
	return nil
}

// sendMarkers sends one leader the markers of tps and returns those it wrote, and
// whether it fenced this coordinator.
func (c *Coordinator) sendMarkers(ctx context.Context, to metadata.Broker, coordEpoch int32, st metadata.TxnState, commit bool, tps []topicPartition) ([]topicPartition, bool) {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch = st.ProducerID, st.ProducerEpoch, commit, coordEpoch
	byTopic := map[string][]int32{}
	for _, tp := range tps {
		byTopic[tp.topic] = append(byTopic[tp.topic], tp.partition)
	}
	for _, topic := range slices.Sorted(maps.Keys(byTopic)) {
		t := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		t.Topic, t.Partitions = topic, byTopic[topic]
		m.Topics = append(m.Topics, t)
	}
	req.Markers = append(req.Markers, m)
	rctx, cancel := context.WithTimeout(ctx, c.cfg.StoreTimeout)
	defer cancel()
	resp, err := c.markers.WriteTxnMarkers(rctx, to, req)
	if err != nil {
		c.lg.Debug("WriteTxnMarkers failed; retrying", "broker", to.ID, "transactional_id", st.TransactionalID, "err", err)
		return nil, false
	}
	var done []topicPartition
	fenced := false
	for _, rm := range resp.Markers {
		for _, rt := range rm.Topics {
			for _, rp := range rt.Partitions {
				tp := topicPartition{rt.Topic, rp.Partition}
				switch err := kerr.ErrorForCode(rp.ErrorCode); err {
				case nil:
					done = append(done, tp)
				case kerr.TransactionCoordinatorFenced:
					fenced = true
				case kerr.UnsupportedForMessageFormat, kerr.UnsupportedVersion:
					// Kafka drops these partitions: they cannot hold a marker.
					c.lg.Warn("partition cannot take a transaction marker", "topic", tp.topic, "partition", tp.partition, "err", err)
					done = append(done, tp)
				case kerr.ClusterAuthorizationFailed:
					// Retried like Kafka does, but loudly: the inter-broker principal
					// needs CLUSTER_ACTION, and the transaction cannot end without it.
					c.lg.Warn("a partition leader refused a transaction marker: the inter-broker principal lacks CLUSTER_ACTION",
						"broker", to.ID, "topic", tp.topic, "partition", tp.partition)
				default:
					// NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT,
					// UNKNOWN_TOPIC_OR_PARTITION...: retried with the next image.
					c.lg.Debug("transaction marker not written; retrying", "topic", tp.topic, "partition", tp.partition, "err", err)
				}
			}
		}
	}
	return done, fenced
}
