package protocol

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupAllOps: READ 3, DELETE 6, DESCRIBE 8 — the group operations; Shale has no
// authorizer, so a client may do them all.
const groupAllOps = 1<<3 | 1<<6 | 1<<8

func (s *Server) handleDescribeGroups(ctx context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.DescribeGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	// Groups the principal may not describe are answered with only their error, in
	// request order.
	var asked []string
	denied := make([]bool, len(req.Groups))
	for i, g := range req.Groups {
		if denied[i] = !s.allowed(r, opDescribe, resGroup, g); !denied[i] {
			asked = append(asked, g)
		}
	}
	described := s.deps.Groups.DescribeGroups(ctx, asked)
	for i, g := range req.Groups {
		if denied[i] {
			rg := kmsg.NewDescribeGroupsResponseGroup()
			rg.Group, rg.ErrorCode, rg.AuthorizedOperations = g, errGroupDenied.Code, authorizedOpsUnset
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		d := described[0]
		described = described[1:]
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group = d.Group
		rg.ErrorCode = errorCode(d.Err)
		if r.Version < 6 && errors.Is(d.Err, kerr.GroupIDNotFound) {
			// A group of another type (KIP-848): before v6 Kafka answers Dead without an
			// error.
			rg.ErrorCode = 0
		}
		rg.State = d.State.String()
		rg.ProtocolType = d.ProtocolType
		rg.Protocol = d.Protocol
		rg.AuthorizedOperations = authorizedOpsUnset
		if req.IncludeAuthorizedOperations {
			rg.AuthorizedOperations = groupAllOps
			if s.authorizing() {
				rg.AuthorizedOperations = s.authorizedOps(r, resGroup, g)
			}
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

// describeGroupsAPI: v0-v5; v6 is not served yet.
var describeGroupsAPI = api{key: kmsg.DescribeGroups, min: 0, max: 5, handle: (*Server).handleDescribeGroups, needs: needGroups, errors: errorsOf(describeGroupsError)}

func describeGroupsError(req *kmsg.DescribeGroupsRequest, code int16) *kmsg.DescribeGroupsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, g := range req.Groups {
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group, rg.ErrorCode, rg.State = g, code, "Dead"
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}
