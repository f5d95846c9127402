package protocol

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/log/records"
	"github.com/shalelog/shale/replication"
)

// producePart ties one partition of a produce request to its place in the response.
type producePart struct {
	*replication.ProducePartition
	rt, rp int // indexes into the response
}

// handleProduce translates Produce to the replica manager's Append and, for acks=-1,
// AwaitReplication.
func (s *Server) handleProduce(ctx context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)

	var reqErr error
	switch {
	case req.Acks != 0 && req.Acks != 1 && req.Acks != -1:
		reqErr = fmt.Errorf("%w: acks must be -1, 0 or 1, not %d", kerr.InvalidRequiredAcks, req.Acks)
	case req.TransactionID != nil && !s.allowed(r, opWrite, kmsg.ACLResourceTypeTransactionalId, *req.TransactionID):
		reqErr = fmt.Errorf("%w: WRITE on transactional id %q is denied", kerr.TransactionalIDAuthorizationFailed, *req.TransactionID)
	}
	var txnID string
	if req.TransactionID != nil {
		txnID = *req.TransactionID
	}

	var parts []producePart
	var all []*replication.ProducePartition
	for i, t := range req.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic = t.Topic
		topicErr := cmp.Or(reqErr, internalTopicWriteError(t.Topic))
		if topicErr == nil && !s.allowed(r, opWrite, resTopic, t.Topic) {
			topicErr = errTopicDenied
		}
		for j, p := range t.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition = p.Partition
			rt.Partitions = append(rt.Partitions, rp)
			pp := &replication.ProducePartition{Topic: t.Topic, Index: p.Partition, Records: p.Records, Legacy: r.Version < 3,
				TransactionalID: txnID, AddToTxn: r.Version >= 12, Err: topicErr}
			parts = append(parts, producePart{ProducePartition: pp, rt: i, rp: j})
			all = append(all, pp)
		}
		resp.Topics = append(resp.Topics, rt)
	}

	s.deps.Replicas.Append(ctx, req.Acks, all)

	anyErr := false
	var waiting []*replication.ProducePartition
	for _, pp := range parts {
		rp := &resp.Topics[pp.rt].Partitions[pp.rp]
		if pp.Err != nil {
			anyErr = true
			s.producePartitionError(rp, pp.Err, r.Version)
			continue
		}
		if pp.RecordCount > 0 {
			s.cfg.Metrics.MessagesIn.WithLabelValues(pp.Topic).Add(float64(pp.RecordCount))
			s.cfg.Metrics.TopicBytesIn.WithLabelValues(pp.Topic).Add(float64(pp.Bytes))
		}
		rp.BaseOffset, rp.LogAppendTime = pp.Result.BaseOffset, pp.Result.LogAppendTime
		rp.LogStartOffset = pp.LogStartOffset()
		if req.Acks == -1 && pp.NeedsReplication() || req.Acks == 1 && pp.NeedsFlush() {
			waiting = append(waiting, pp.ProducePartition)
		} else if pp.Err != nil {
			s.producePartitionError(rp, pp.Err, r.Version)
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
		if req.Acks == 1 {
			s.deps.Replicas.AwaitFlush(ctx, waiting, timeout)
		} else {
			s.deps.Replicas.AwaitReplication(ctx, waiting, timeout)
		}
		for _, pp := range parts {
			if pp.Err != nil {
				s.producePartitionError(&resp.Topics[pp.rt].Partitions[pp.rp], pp.Err, r.Version)
			}
		}
		return Result{Resp: resp}
	}}
}

func (s *Server) producePartitionError(rp *kmsg.ProduceResponseTopicPartition, err error, version int16) {
	rp.ErrorCode = errorCode(err)
	rp.BaseOffset, rp.LogAppendTime, rp.LogStartOffset = -1, -1, -1
	if version >= 8 {
		rp.ErrorMessage = errorMessage(err)
		// Records a topic rule refused (timestamp range, key on a compacted topic) are
		// listed one by one, with Kafka's summary as the message.
		var ve *records.ValidationError
		if errors.As(err, &ve) {
			msg := ve.Message()
			rp.ErrorMessage = &msg
			for _, re := range ve.Records {
				e := kmsg.NewProduceResponseTopicPartitionErrorRecord()
				m := re.Message
				e.RelativeOffset, e.ErrorMessage = int32(re.Index), &m
				rp.ErrorRecords = append(rp.ErrorRecords, e)
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

// produceAPI: v0-v2 carry legacy message sets, up-converted on append, and librdkafka
// before 2.10 compresses only when v0 is in range. With transaction.version 2 and the
// transaction and group coordinators, v12 (v10 and v11 only add optional tagged fields
// to the response, KIP-951), whose transactional batches join their transaction without
// AddPartitionsToTxn (KIP-890's second part); v9 otherwise. Topic ids (v13) are not
// served.
var produceAPI = api{key: kmsg.Produce, min: 0, max: 9, maxV2: 12, needsV2: needTxn | needGroups,
	handle: (*Server).handleProduce, errors: errorsOf(produceError)}
