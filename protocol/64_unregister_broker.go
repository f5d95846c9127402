package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/metadata"
)

// UnregisterForceTag is the tagged field of UnregisterBroker v0 with which `shale broker
// unregister --force` asks to unregister a broker that still holds replicas. Kafka's
// clients never send it, so they get the safe behaviour: a broker holding replicas is
// not unregistered.
const UnregisterForceTag = 10_064

// handleUnregisterBroker is Kafka's UnregisterBroker, forwarded to the active
// controller, which refuses it while the broker still holds replicas (unless forced).
func (s *Server) handleUnregisterBroker(ctx context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.UnregisterBrokerRequest)
	resp := req.ResponseKind().(*kmsg.UnregisterBrokerResponse)
	if !s.allowedCluster(r, opAlter) {
		resp.ErrorCode = errClusterDenied.Code
		return Result{Resp: resp}
	}
	force := false
	req.UnknownTags.Each(func(key uint32, val []byte) {
		if key == UnregisterForceTag && len(val) == 1 && val[0] == 1 {
			force = true
		}
	})
	ctx, cancel := context.WithTimeout(ctx, quorumTimeout)
	defer cancel()
	if err := s.deps.Meta.(metadata.QuorumAdmin).UnregisterBroker(ctx, req.BrokerID, force); err != nil {
		resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
	}
	return Result{Resp: resp}
}

// unregisterBrokerAPI: every version kmsg knows, where the metadata store can forward to
// the controller quorum.
var unregisterBrokerAPI = api{key: kmsg.UnregisterBroker, min: 0, max: 0, handle: (*Server).handleUnregisterBroker, needs: needQuorumAdmin}
