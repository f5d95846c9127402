package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/metadata"
)

// Coordinator key types of FindCoordinator.
const (
	coordinatorGroup       int8 = 0
	coordinatorTransaction int8 = 1
)

// handleFindCoordinator answers from the image every broker shares, so any broker gives
// the same answer. Transactional ids hash like group ids: a broker coordinates the
// transactions and the groups of the same __consumer_offsets partitions (coordinator/txn).
func (s *Server) handleFindCoordinator(_ context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	find := func(key string) (metadata.Broker, error) {
		if req.CoordinatorType != coordinatorGroup && req.CoordinatorType != coordinatorTransaction {
			return metadata.Broker{}, kerr.InvalidRequest
		}
		if req.CoordinatorType == coordinatorTransaction {
			if !s.allowed(r, opDescribe, resTxnID, key) {
				return metadata.Broker{}, kerr.TransactionalIDAuthorizationFailed
			}
		} else if !s.allowed(r, opDescribe, resGroup, key) {
			return metadata.Broker{}, errGroupDenied
		}
		return s.deps.Groups.CoordinatorFor(key)
	}
	if r.Version >= 4 {
		for _, key := range req.CoordinatorKeys {
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.Key = key
			b, err := find(key)
			c.NodeID, c.Host, c.Port = coordinatorAddress(b, err, r.Listener)
			c.ErrorCode, c.ErrorMessage = errorCode(err), errorMessage(err)
			resp.Coordinators = append(resp.Coordinators, c)
		}
		return Result{Resp: resp}
	}
	b, err := find(req.CoordinatorKey)
	resp.NodeID, resp.Host, resp.Port = coordinatorAddress(b, err, r.Listener)
	resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
	return Result{Resp: resp}
}

func coordinatorAddress(b metadata.Broker, err error, listener string) (int32, string, int32) {
	if err != nil {
		return -1, "", -1
	}
	// A coordinator registered without the client's listener keeps its main address.
	if on, ok := b.On(listener); ok {
		b = on
	}
	return b.ID, b.Host, b.Port
}

// optString is a nullable Kafka string as Go's "" for null.
func optString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// nullableString is "" as null.
func nullableString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// findCoordinatorAPI: v0 for librdkafka, v4 the batched form (KIP-699). v5+ (later
// transaction and share-coordinator additions) are not served.
var findCoordinatorAPI = api{key: kmsg.FindCoordinator, min: 0, max: 4, handle: (*Server).handleFindCoordinator, needs: needGroups, errors: errorsOf(findCoordinatorError)}

func findCoordinatorError(req *kmsg.FindCoordinatorRequest, code int16) *kmsg.FindCoordinatorResponse {
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	resp.ErrorCode, resp.NodeID, resp.Port = code, -1, -1
	for _, key := range req.CoordinatorKeys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key, c.NodeID, c.Port, c.ErrorCode = key, -1, -1, code
		resp.Coordinators = append(resp.Coordinators, c)
	}
	return resp
}
