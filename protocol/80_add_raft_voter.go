package protocol

import (
	"context"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/metadata"
)

// handleAddRaftVoter is KIP-853's AddRaftVoter, forwarded to the active controller: the
// new controller is given by its id and its CONTROLLER listener (the first listener
// when none is named so). The controller replicates the log to it before it votes, so
// the answer may take as long as it needs to catch up. The directory id is not used:
// Shale's controllers keep one directory each.
func (s *Server) handleAddRaftVoter(ctx context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.AddRaftVoterRequest)
	resp := req.ResponseKind().(*kmsg.AddRaftVoterResponse)
	fail := func(code int16, msg string) Result {
		resp.ErrorCode = code
		if msg != "" {
			resp.ErrorMessage = &msg
		}
		return Result{Resp: resp}
	}
	if !s.allowedCluster(r, opAlter) {
		return fail(errClusterDenied.Code, "")
	}
	if code, msg := s.checkClusterID(req.ClusterID); code != 0 {
		return fail(code, msg)
	}
	if len(req.Listeners) == 0 {
		return fail(kerr.InvalidRequest.Code, "the new voter has no listener")
	}
	l := req.Listeners[0]
	for _, cand := range req.Listeners {
		if cand.Name == "CONTROLLER" {
			l = cand
		}
	}
	addr := net.JoinHostPort(l.Host, strconv.Itoa(int(l.Port)))
	ctx, cancel := requestContext(ctx, req.TimeoutMillis)
	defer cancel()
	if err := s.deps.Meta.(metadata.QuorumAdmin).AddVoter(ctx, req.VoterID, addr); err != nil {
		resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
	}
	return Result{Resp: resp}
}

// checkClusterID refuses a quorum request meant for another cluster.
func (s *Server) checkClusterID(id *string) (int16, string) {
	if id == nil || *id == "" {
		return 0, ""
	}
	if have := s.image().ClusterID; have != "" && *id != have {
		return kerr.InconsistentClusterID.Code, "the request is for cluster " + *id + ", this is cluster " + have
	}
	return 0, ""
}

// addRaftVoterAPI: every version kmsg knows, where the metadata store can forward to the
// controller quorum.
var addRaftVoterAPI = api{key: kmsg.AddRaftVoter, min: 0, max: 1, handle: (*Server).handleAddRaftVoter, needs: needQuorumAdmin}
