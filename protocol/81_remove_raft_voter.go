package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/metadata"
)

// handleRemoveRaftVoter is KIP-853's RemoveRaftVoter, forwarded to the active
// controller. The removed controller stops serving once it learns of its removal.
func (s *Server) handleRemoveRaftVoter(ctx context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.RemoveRaftVoterRequest)
	resp := req.ResponseKind().(*kmsg.RemoveRaftVoterResponse)
	if !s.allowedCluster(r, opAlter) {
		resp.ErrorCode = errClusterDenied.Code
		return Result{Resp: resp}
	}
	if code, msg := s.checkClusterID(req.ClusterID); code != 0 {
		resp.ErrorCode, resp.ErrorMessage = code, &msg
		return Result{Resp: resp}
	}
	ctx, cancel := context.WithTimeout(ctx, quorumTimeout)
	defer cancel()
	if err := s.deps.Meta.(metadata.QuorumAdmin).RemoveVoter(ctx, req.VoterID); err != nil {
		resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
	}
	return Result{Resp: resp}
}

// removeRaftVoterAPI: every version kmsg knows, where the metadata store can forward to
// the controller quorum.
var removeRaftVoterAPI = api{key: kmsg.RemoveRaftVoter, min: 0, max: 0, handle: (*Server).handleRemoveRaftVoter, needs: needQuorumAdmin}
