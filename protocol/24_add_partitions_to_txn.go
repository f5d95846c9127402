package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/metadata"
)

// handleAddPartitionsToTxn adds partitions to a producer's transaction (v0-v3, from
// clients) or, in v4+'s batches, runs partition leaders' KIP-890 checks (VerifyOnly)
// and adds (transactions v2: a Produce v12 joins the transaction at its leader).
func (s *Server) handleAddPartitionsToTxn(ctx context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.AddPartitionsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	if r.Version < 4 {
		resp.Topics = s.addPartitionsToTxn(ctx, r, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Topics)
		return Result{Resp: resp}
	}
	// The batched form is broker-to-broker.
	if !s.allowedCluster(r, opClusterAction) {
		resp.ErrorCode = errClusterDenied.Code
		return Result{Resp: resp}
	}
	for _, t := range req.Transactions {
		rt := kmsg.NewAddPartitionsToTxnResponseTransaction()
		rt.TransactionalID = t.TransactionalID
		var results []kmsg.AddPartitionsToTxnResponseTopic
		if t.VerifyOnly {
			results = s.verifyTxn(t)
		} else {
			results = s.brokerAddToTxn(ctx, t)
		}
		for _, res := range results {
			tt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
			tt.Topic = res.Topic
			for _, p := range res.Partitions {
				tp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
				tp.Partition, tp.ErrorCode = p.Partition, p.ErrorCode
				tt.Partitions = append(tt.Partitions, tp)
			}
			rt.Topics = append(rt.Topics, tt)
		}
		resp.Transactions = append(resp.Transactions, rt)
	}
	return Result{Resp: resp}
}

// addPartitionsToTxn is one client's AddPartitionsToTxn, answered per partition as
// Kafka does: denied or unknown partitions get their own error and the others
// OPERATION_NOT_ATTEMPTED, else the coordinator's answer applies to every partition.
func (s *Server) addPartitionsToTxn(ctx context.Context, r *Request, id string, pid int64, epoch int16, topics []kmsg.AddPartitionsToTxnRequestTopic) []kmsg.AddPartitionsToTxnResponseTopic {
	errs := map[string]map[int32]int16{}
	set := func(topic string, p int32, code int16) {
		if errs[topic] == nil {
			errs[topic] = map[int32]int16{}
		}
		errs[topic][p] = code
	}
	failed := false
	if !s.allowed(r, opWrite, resTxnID, id) {
		for _, t := range topics {
			for _, p := range t.Partitions {
				set(t.Topic, p, kerr.TransactionalIDAuthorizationFailed.Code)
			}
		}
		return partitionsResponse(topics, errs, 0)
	}
	im := s.image()
	mayWrite := s.topicCheck(r, opWrite)
	add := map[string][]int32{}
	for _, t := range topics {
		for _, p := range t.Partitions {
			switch {
			case !mayWrite(t.Topic):
				set(t.Topic, p, errTopicDenied.Code)
				failed = true
			case im.Partition(t.Topic, p) == nil:
				set(t.Topic, p, kerr.UnknownTopicOrPartition.Code)
				failed = true
			default:
				add[t.Topic] = append(add[t.Topic], p)
			}
		}
	}
	if failed {
		return partitionsResponse(topics, errs, kerr.OperationNotAttempted.Code)
	}
	err := s.deps.Txn.AddPartitions(ctx, id, pid, epoch, add)
	return partitionsResponse(topics, errs, txnErrorCode(err, r.Version < 2))
}

// brokerAddToTxn is one add of a v4+ request, from the partition leader of a Produce
// v12 or the group coordinator of a TxnOffsetCommit v5 (the group as its
// __consumer_offsets partition): CLUSTER_ACTION covers it, the sender having authorized
// the client.
func (s *Server) brokerAddToTxn(ctx context.Context, t kmsg.AddPartitionsToTxnRequestTransaction) []kmsg.AddPartitionsToTxnResponseTopic {
	topics := make([]kmsg.AddPartitionsToTxnRequestTopic, len(t.Topics))
	errs := map[string]map[int32]int16{}
	im := s.image()
	add := map[string][]int32{}
	unknown := false
	for i, tt := range t.Topics {
		topics[i] = kmsg.AddPartitionsToTxnRequestTopic{Topic: tt.Topic, Partitions: tt.Partitions}
		for _, p := range tt.Partitions {
			offsets := tt.Topic == metadata.OffsetsTopic && p >= 0 && int(p) < len(im.Coordinators)
			if !offsets && im.Partition(tt.Topic, p) == nil {
				if errs[tt.Topic] == nil {
					errs[tt.Topic] = map[int32]int16{}
				}
				errs[tt.Topic][p] = kerr.UnknownTopicOrPartition.Code
				unknown = true
				continue
			}
			add[tt.Topic] = append(add[tt.Topic], p)
		}
	}
	if unknown {
		return partitionsResponse(topics, errs, kerr.OperationNotAttempted.Code)
	}
	err := s.deps.Txn.AddPartitions(ctx, t.TransactionalID, t.ProducerID, t.ProducerEpoch, add)
	return partitionsResponse(topics, nil, errorCode(err))
}

// verifyTxn is one VerifyOnly transaction of a v4+ request.
func (s *Server) verifyTxn(t kmsg.AddPartitionsToTxnRequestTransaction) []kmsg.AddPartitionsToTxnResponseTopic {
	topics := make([]kmsg.AddPartitionsToTxnRequestTopic, len(t.Topics))
	parts := map[string][]int32{}
	for i, tt := range t.Topics {
		topics[i] = kmsg.AddPartitionsToTxnRequestTopic{Topic: tt.Topic, Partitions: tt.Partitions}
		parts[tt.Topic] = append(parts[tt.Topic], tt.Partitions...)
	}
	res, err := s.deps.Txn.Verify(t.TransactionalID, t.ProducerID, t.ProducerEpoch, parts)
	if err != nil {
		return partitionsResponse(topics, nil, errorCode(err))
	}
	errs := map[string]map[int32]int16{}
	for topic, ps := range res {
		errs[topic] = map[int32]int16{}
		for p, err := range ps {
			errs[topic][p] = errorCode(err)
		}
	}
	return partitionsResponse(topics, errs, 0)
}

// partitionsResponse answers every requested partition with its code in errs, else
// with code.
func partitionsResponse(topics []kmsg.AddPartitionsToTxnRequestTopic, errs map[string]map[int32]int16, code int16) []kmsg.AddPartitionsToTxnResponseTopic {
	var out []kmsg.AddPartitionsToTxnResponseTopic
	for _, t := range topics {
		rt := kmsg.NewAddPartitionsToTxnResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p, code
			if c, ok := errs[t.Topic][p]; ok {
				rp.ErrorCode = c
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		out = append(out, rt)
	}
	return out
}

// addPartitionsToTxnAPI: v0-v3 from clients and v4, the brokers' VerifyOnly form; v5
// with transaction.version 2, a partition leader's or group coordinator's implicit add
// (KIP-890's second part). The transaction APIs need the group coordinator too, for
// TxnOffsetCommit.
var addPartitionsToTxnAPI = api{key: kmsg.AddPartitionsToTxn, min: 0, max: 4, maxV2: 5, handle: (*Server).handleAddPartitionsToTxn, needs: needTxn | needGroups}
