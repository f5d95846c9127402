package protocol

import (
	"context"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/metadata"
)

// handleUpdateRaftVoter is KIP-853's UpdateRaftVoter, forwarded to the active controller:
// voter VoterID is reachable at its CONTROLLER listener (the first listener when none is
// named so) from now on. The same address again is a success that changes nothing, so a
// retry after a lost answer is harmless. Shale's quorum runs at kraft.version 1 (dynamic
// voters), so a voter that cannot support it is refused as Kafka does. The directory id
// is not used (one directory per controller), and the current leader is left unknown
// (-1): the caller reaches it through this broker.
func (s *Server) handleUpdateRaftVoter(ctx context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.UpdateRaftVoterRequest)
	resp := req.ResponseKind().(*kmsg.UpdateRaftVoterResponse)
	fail := func(code int16) Result {
		resp.ErrorCode = code
		return Result{Resp: resp}
	}
	if !s.allowedCluster(r, opAlter) {
		return fail(errClusterDenied.Code)
	}
	if code, _ := s.checkClusterID(req.ClusterID); code != 0 {
		return fail(code)
	}
	if f := req.KRaftVersionFeature; f.MinSupportedVersion > f.MaxSupportedVersion || f.MinSupportedVersion > 1 || f.MaxSupportedVersion < 1 {
		return fail(kerr.InvalidRequest.Code)
	}
	if len(req.Listeners) == 0 {
		return fail(kerr.InvalidRequest.Code)
	}
	l := req.Listeners[0]
	for _, cand := range req.Listeners {
		if cand.Name == "CONTROLLER" {
			l = cand
		}
	}
	addr := net.JoinHostPort(l.Host, strconv.Itoa(int(l.Port)))
	ctx, cancel := context.WithTimeout(ctx, quorumTimeout)
	defer cancel()
	if err := s.deps.Meta.(metadata.QuorumAdmin).UpdateVoter(ctx, req.VoterID, addr); err != nil {
		resp.ErrorCode = errorCode(err)
	}
	return Result{Resp: resp}
}

// updateRaftVoterAPI: every version kmsg knows, where the metadata store can forward to
// the controller quorum.
var updateRaftVoterAPI = api{key: kmsg.UpdateRaftVoter, min: 0, max: 0, handle: (*Server).handleUpdateRaftVoter, needs: needQuorumAdmin}
