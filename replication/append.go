package replication

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/log/records"
	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/partition"
)

// ProducePartition is one partition's share of a produce request and, after Append, its
// outcome.
type ProducePartition struct {
	Topic   string
	Index   int32
	Records []byte
	// Legacy marks Produce v0-v2 records: magic 0/1 message sets, up-converted here.
	Legacy bool
	// TransactionalID is the request's transactional id, "" for none: a transactional
	// batch is verified with the coordinator under it (TxnVerifier).
	TransactionalID string
	// AddToTxn (Produce v12+, KIP-890 part 2) adds the partition to the producer's
	// transaction where older produces are only verified to be in it (TxnAdder).
	AddToTxn bool

	// Set by Append.
	Result partition.AppendResult
	Err    error
	// RecordCount and Bytes describe what was appended (zero for a duplicate).
	RecordCount int32
	Bytes       int

	p *partition.Partition
}

// LogStartOffset is the partition's log start offset after the append, -1 on error.
func (pp *ProducePartition) LogStartOffset() int64 {
	if pp.p == nil || pp.Err != nil {
		return -1
	}
	return pp.p.LogStartOffset()
}

// Append validates and appends every partition's records as leader, as Kafka's
// LogValidator and Partition.appendRecordsToLeader do: the batch header is parsed once
// and the records validated once, then recompressed only when the topic's
// compression.type asks for it. Partitions of one request run in parallel so that a
// single producer connection can use every core. acks=-1 is checked against
// min.insync.replicas under the partition lock. A producer's first transactional batch
// to a partition is verified with the transaction coordinator first (KIP-890); ctx
// bounds that.
func (m *Manager) Append(ctx context.Context, acks int16, parts []*ProducePartition) {
	defer func() {
		for _, pp := range parts {
			m.traffic.produced(pp)
		}
	}()
	var todo []*ProducePartition
	for _, pp := range parts {
		if pp.Err != nil {
			continue
		}
		p, err := m.Leader(pp.Topic, pp.Index, -1)
		if err != nil {
			pp.Err = err
			continue
		}
		if mt := m.Image().Mirror(pp.Topic); mt.Active() {
			pp.Err = metadata.ErrMirrorReadOnly(mt)
			continue
		}
		pp.p = p
		todo = append(todo, pp)
	}
	if len(todo) <= 1 {
		for _, pp := range todo {
			m.appendOne(ctx, pp, acks)
		}
		return
	}
	workers := min(len(todo), runtime.GOMAXPROCS(0))
	var next int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				if next == len(todo) {
					mu.Unlock()
					return
				}
				pp := todo[next]
				next++
				mu.Unlock()
				m.appendOne(ctx, pp, acks)
			}
		}()
	}
	wg.Wait()
}

func (m *Manager) appendOne(ctx context.Context, pp *ProducePartition, acks int16) {
	p := pp.p
	set := p.Settings()
	if pp.Legacy {
		batch, err := records.UpconvertMessageSet(pp.Records, time.Now().UnixMilli())
		if err != nil {
			pp.Err = err
			return
		}
		pp.Records = batch
	}
	// The header alone first: the size checks need no CRC or decompression.
	h, err := shalelog.ParseHeader(pp.Records)
	if err != nil {
		pp.Err = err
		return
	}
	if h.Size() != len(pp.Records) {
		pp.Err = fmt.Errorf("%w: produce requests may carry exactly one record batch per partition", kerr.InvalidRecord)
		return
	}
	if max := set.Log.MaxMessageBytes; max > 0 && int64(h.Size()) > int64(max) {
		pp.Err = fmt.Errorf("%w: batch of %d bytes exceeds max.message.bytes %d", kerr.MessageTooLarge, h.Size(), max)
		return
	}
	sum, err := records.ValidateSummary(pp.Records, records.ValidateOptions{
		MaxTimestampDiffMs: set.MaxTimestampDiffMs, NowMs: time.Now().UnixMilli(), LogAppendTime: set.LogAppendTime,
		Compacted: set.Compaction.Compact, SchemaIDs: m.schemaIDs(pp.Topic, set.SchemaIDs),
	})
	if sum.SchemaRefused > 0 {
		m.m.schemaRefused(pp.Topic, sum.SchemaRefused)
	}
	if err != nil {
		pp.Err = err
		return
	}
	h = sum.Header
	if h.IsTransactional() && h.HasProducer() {
		if err := m.verifyTxn(ctx, pp, h); err != nil {
			pp.Err = err
			return
		}
	}
	batch := pp.Records
	if set.Codec >= 0 && set.Codec != h.Codec() {
		batch, err = records.Recompress(batch, set.Codec)
		if err != nil {
			pp.Err = fmt.Errorf("recompress to the topic's compression.type: %w", err)
			return
		}
		if h, err = shalelog.ParseHeader(batch); err != nil {
			pp.Err = err
			return
		}
	}
	res, err := p.AppendAsLeader(batch, h, acks)
	if err != nil {
		if isStorageError(err) {
			m.lg.Error("append failed", "topic", pp.Topic, "partition", pp.Index, "err", err)
		}
		pp.Err = m.ReplicaGone(pp.Topic, pp.Index, err)
		return
	}
	pp.Result = res
	if !res.Duplicate {
		pp.RecordCount, pp.Bytes = h.RecordCount, len(batch)
	}
}

// NeedsReplication reports whether an acks=-1 append still waits for its ISR.
func (pp *ProducePartition) NeedsReplication() bool {
	if pp.Err != nil || pp.p == nil {
		return false
	}
	done, err := pp.p.ReplicationDone(pp.Result.LastOffset, pp.Result.LeaderEpoch)
	if err != nil {
		pp.Err = err
		return false
	}
	return !done
}

// NeedsFlush reports whether an acks=1 append still waits for the leader's fsync: under
// flush.messages=1 Kafka fsyncs every append before it answers, whatever the acks, and
// the group commit has moved that fsync off the request goroutine, so the answer waits
// for it instead. (acks=-1 waits for it through the high watermark.)
func (pp *ProducePartition) NeedsFlush() bool {
	if pp.Err != nil || pp.p == nil || pp.p.Settings().Log.FlushMessages != 1 {
		return false
	}
	done, err := flushDone(pp)
	if err != nil {
		pp.Err = err
		return false
	}
	return !done
}

// flushDone reports whether pp's batch is below the leader's flushed offset, in the
// leader epoch it was appended in. The flushed offset is loaded before the role and epoch
// are checked, as ReplicationDone loads the high watermark: a flushed offset past the
// batch that this leadership still holds covers this batch, not a successor's.
func flushDone(pp *ProducePartition) (bool, error) {
	p := pp.p
	flushed := p.FlushedOffset()
	if p.Role() != partition.RoleLeader || p.LeaderEpoch() != pp.Result.LeaderEpoch {
		return false, fmt.Errorf("%w: leadership changed before the batch was flushed", kerr.NotLeaderForPartition)
	}
	if flushed > pp.Result.LastOffset {
		return true, nil
	}
	if err := p.SyncErr(); err != nil {
		return false, err // wraps ErrStorage: KAFKA_STORAGE_ERROR
	}
	return false, nil
}

// AwaitFlush waits until every partition's batch is flushed on the leader (NeedsFlush),
// the leader steps down, its fsync fails (KAFKA_STORAGE_ERROR), the timeout passes
// (REQUEST_TIMED_OUT) or ctx ends. Every partition not flushed by then gets an error.
func (m *Manager) AwaitFlush(ctx context.Context, parts []*ProducePartition, timeout time.Duration) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for i, pp := range parts {
		for pp.Err == nil {
			w := pp.p.FlushWaiter()
			done, err := flushDone(pp)
			if err != nil {
				pp.Err = err
			}
			if done || err != nil {
				break
			}
			pp.p.RequestSync()
			var cause error
			select {
			case <-w:
				continue
			case <-deadline.C:
				cause = fmt.Errorf("%w: not flushed within %v", kerr.RequestTimedOut, timeout)
			case <-ctx.Done():
				cause = fmt.Errorf("%w: the request ended before its records were flushed: %w", kerr.RequestTimedOut, ctx.Err())
			}
			for _, rest := range parts[i:] {
				if rest.Err != nil {
					continue
				}
				if done, err := flushDone(rest); err != nil {
					rest.Err = err
				} else if !done {
					rest.Err = cause
				}
			}
			return
		}
	}
}

// AwaitReplication waits until every partition's batch is committed in the leader epoch
// it was appended in (the high watermark passed it), the leader steps down
// (NOT_LEADER_OR_FOLLOWER), the timeout passes (REQUEST_TIMED_OUT) or ctx ends (the
// client hung up, or the broker is stopping). Every partition not committed by then gets
// an error: a batch is answered as written only once it is committed.
func (m *Manager) AwaitReplication(ctx context.Context, parts []*ProducePartition, timeout time.Duration) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	// settle gives every partition still without an answer its final one.
	settle := func(cause error) {
		for _, pp := range parts {
			if pp.Err != nil {
				continue
			}
			if done, err := pp.p.ReplicationDone(pp.Result.LastOffset, pp.Result.LeaderEpoch); err != nil {
				pp.Err = err
			} else if !done {
				pp.Err = cause
			}
		}
	}
	for _, pp := range parts {
		for pp.Err == nil {
			w := pp.p.Waiter()
			done, err := pp.p.ReplicationDone(pp.Result.LastOffset, pp.Result.LeaderEpoch)
			if err != nil {
				pp.Err = err
			}
			if done || err != nil {
				break
			}
			select {
			case <-w:
			case <-deadline.C:
				settle(fmt.Errorf("%w: not replicated to the in-sync replicas within %v", kerr.RequestTimedOut, timeout))
				return
			case <-ctx.Done():
				settle(fmt.Errorf("%w: the request ended before its records were replicated: %w", kerr.RequestTimedOut, ctx.Err()))
				return
			}
		}
	}
}

// ErrStorage reports whether err is a log-directory failure (KAFKA_STORAGE_ERROR).
func ErrStorage(err error) bool { return errors.Is(err, shalelog.ErrStorage) }
