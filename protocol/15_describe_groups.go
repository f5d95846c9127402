package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupAllOps: READ 3, DELETE 6, DESCRIBE 8 — the group operations; Shale has no
// authorizer, so a client may do them all.
const groupAllOps = 1<<3 | 1<<6 | 1<<8

func (s *Server) handleDescribeGroups(ctx context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.DescribeGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, d := range s.deps.Groups.DescribeGroups(ctx, req.Groups) {
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group = d.Group
		rg.ErrorCode = errorCode(d.Err)
		rg.State = d.State.String()
		rg.ProtocolType = d.ProtocolType
		rg.Protocol = d.Protocol
		rg.AuthorizedOperations = authorizedOpsUnset
		if req.IncludeAuthorizedOperations {
			rg.AuthorizedOperations = groupAllOps
		}
		for _, m := range d.Members {
			rm := kmsg.NewDescribeGroupsResponseGroupMember()
			rm.MemberID, rm.InstanceID, rm.ClientID, rm.ClientHost = m.MemberID, nullableString(m.InstanceID), m.ClientID, m.ClientHost
			rm.ProtocolMetadata, rm.MemberAssignment = nonNilBytes(m.Metadata), nonNilBytes(m.Assignment)
			rg.Members = append(rg.Members, rm)
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return Result{Resp: resp}
}

func nonNilBytes(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
