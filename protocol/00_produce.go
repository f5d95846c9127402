package protocol

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/internal/records"
	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/partition"
)

// producePart is one partition's share of a produce request and its outcome.
type producePart struct {
	topic   string
	rt, rp  int // indexes into the response
	records []byte
	part    *partition.Partition
	res     partition.AppendResult
	err     error
	// legacy: Produce v0-v2, whose records are magic 0/1 message sets.
	legacy bool
}

func (s *Server) handleProduce(ctx context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)

	var reqErr error
	switch {
	case req.Acks != 0 && req.Acks != 1 && req.Acks != -1:
		reqErr = fmt.Errorf("%w: acks must be -1, 0 or 1, not %d", kerr.InvalidRequiredAcks, req.Acks)
	case req.TransactionID != nil:
		reqErr = fmt.Errorf("%w: Shale does not support transactions yet", kerr.TransactionalIDAuthorizationFailed)
	}

	im := s.image()
	leaseOK := s.deps.Meta.LeaseValid()
	var parts []*producePart
	for i, t := range req.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic = t.Topic
		for j, p := range t.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition = p.Partition
			rt.Partitions = append(rt.Partitions, rp)
			pp := &producePart{topic: t.Topic, rt: i, rp: j, records: p.Records, legacy: r.Version < 3}
			switch {
			case reqErr != nil:
				pp.err = reqErr
			case im.Partition(t.Topic, p.Partition) == nil:
				pp.err = kerr.UnknownTopicOrPartition
			default:
				pp.part = s.deps.Partitions.Get(t.Topic, p.Partition)
				if pp.part == nil || pp.part.Role() != partition.RoleLeader || !leaseOK {
					pp.err = kerr.NotLeaderForPartition
				}
			}
			parts = append(parts, pp)
		}
		resp.Topics = append(resp.Topics, rt)
	}

	s.appendAll(parts, req.Acks)

	anyErr := false
	var waiting []*producePart
	for _, pp := range parts {
		rp := &resp.Topics[pp.rt].Partitions[pp.rp]
		if pp.err != nil {
			anyErr = true
			rp.ErrorCode = errorCode(pp.err)
			rp.BaseOffset, rp.LogAppendTime, rp.LogStartOffset = -1, -1, -1
			if r.Version >= 8 {
				rp.ErrorMessage = errorMessage(pp.err)
			}
			continue
		}
		rp.BaseOffset, rp.LogAppendTime = pp.res.BaseOffset, pp.res.LogAppendTime
		rp.LogStartOffset = pp.part.LogStartOffset()
		if req.Acks == -1 && pp.part.HighWatermark() <= pp.res.LastOffset {
			waiting = append(waiting, pp)
		}
	}

	if req.Acks == 0 {
		// No response at all; on an error Kafka closes the connection so that the
		// producer notices and refreshes its metadata.
		return Result{NoResponse: true, CloseConn: anyErr}
	}
	if len(waiting) == 0 {
		return Result{Resp: resp}
	}
	timeout := time.Duration(req.TimeoutMillis) * time.Millisecond
	return Result{Wait: func(ctx context.Context) Result {
		s.awaitReplication(ctx, waiting, timeout)
		for _, pp := range waiting {
			if pp.err != nil {
				rp := &resp.Topics[pp.rt].Partitions[pp.rp]
				rp.ErrorCode = errorCode(pp.err)
				if r.Version >= 8 {
					rp.ErrorMessage = errorMessage(pp.err)
				}
			}
		}
		return Result{Resp: resp}
	}}
}

// appendAll appends every valid partition's batch; partitions of one request are spread
// over goroutines so that a single producer connection can use every core.
func (s *Server) appendAll(parts []*producePart, acks int16) {
	var todo []*producePart
	for _, pp := range parts {
		if pp.err == nil {
			todo = append(todo, pp)
		}
	}
	if len(todo) <= 1 {
		for _, pp := range todo {
			s.produceOne(pp, acks)
		}
		return
	}
	workers := min(len(todo), runtime.GOMAXPROCS(0))
	var next int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
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
				s.produceOne(pp, acks)
			}
		}()
	}
	wg.Wait()
}

// produceOne validates and appends one partition's records, as Kafka's LogValidator
// and Partition.appendRecordsToLeader do.
func (s *Server) produceOne(pp *producePart, acks int16) {
	p := pp.part
	set := p.Settings()
	if pp.legacy {
		batch, err := records.UpconvertMessageSet(pp.records, time.Now().UnixMilli())
		if err != nil {
			pp.err = err
			return
		}
		pp.records = batch
	}
	h, err := shalelog.ParseHeader(pp.records)
	if err != nil {
		pp.err = err
		return
	}
	if h.Size() != len(pp.records) {
		pp.err = fmt.Errorf("%w: produce requests may carry exactly one record batch per partition", kerr.InvalidRecord)
		return
	}
	if max := set.Log.MaxMessageBytes; max > 0 && int64(h.Size()) > int64(max) {
		pp.err = fmt.Errorf("%w: batch of %d bytes exceeds max.message.bytes %d", kerr.MessageTooLarge, h.Size(), max)
		return
	}
	h, err = records.Validate(pp.records, records.ValidateOptions{MaxTimestampDiffMs: set.MaxTimestampDiffMs, NowMs: time.Now().UnixMilli(), LogAppendTime: set.LogAppendTime})
	if err != nil {
		pp.err = err
		return
	}
	if acks == -1 {
		if isr := len(p.State().ISR); isr < set.MinInsyncReplicas {
			pp.err = fmt.Errorf("%w: %d in-sync replicas, min.insync.replicas is %d", kerr.NotEnoughReplicas, isr, set.MinInsyncReplicas)
			return
		}
	}
	batch := pp.records
	if set.Codec >= 0 && set.Codec != h.Codec() {
		batch, err = records.Recompress(batch, set.Codec)
		if err != nil {
			pp.err = fmt.Errorf("recompress to the topic's compression.type: %w", err)
			return
		}
		h, err = shalelog.ParseHeader(batch)
		if err != nil {
			pp.err = err
			return
		}
	}
	res, err := p.AppendAsLeader(batch, h)
	if err != nil {
		if errors.Is(err, shalelog.ErrStorage) {
			s.lg.Error("append failed", "topic", pp.topic, "partition", p.Index(), "err", err)
		}
		pp.err = err
		return
	}
	pp.res = res
	if !res.Duplicate {
		s.cfg.Metrics.MessagesIn.WithLabelValues(pp.topic).Add(float64(h.RecordCount))
		s.cfg.Metrics.TopicBytesIn.WithLabelValues(pp.topic).Add(float64(len(batch)))
	}
}

// awaitReplication waits until each partition's high watermark passes its batch, the
// request times out (REQUEST_TIMED_OUT), or the connection closes.
func (s *Server) awaitReplication(ctx context.Context, parts []*producePart, timeout time.Duration) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for _, pp := range parts {
		for pp.part.HighWatermark() <= pp.res.LastOffset {
			if pp.part.Role() != partition.RoleLeader {
				pp.err = kerr.NotLeaderForPartition
				break
			}
			select {
			case <-pp.part.Waiter():
			case <-deadline.C:
				for _, rest := range parts {
					if rest.err == nil && rest.part.HighWatermark() <= rest.res.LastOffset {
						rest.err = fmt.Errorf("%w: not replicated to the in-sync replicas within %v", kerr.RequestTimedOut, timeout)
					}
				}
				return
			case <-ctx.Done():
				pp.err = ctx.Err()
				return
			}
		}
	}
}

// produceError answers every partition of a produce request with code.
func produceError(req *kmsg.ProduceRequest, code int16) *kmsg.ProduceResponse {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition, rp.ErrorCode, rp.BaseOffset, rp.LogAppendTime, rp.LogStartOffset = p.Partition, code, -1, -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
