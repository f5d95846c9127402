package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleDeleteGroups(ctx context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.DeleteGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	var asked []string
	denied := make([]bool, len(req.Groups))
	for i, g := range req.Groups {
		if denied[i] = !s.allowed(r, opDelete, resGroup, g); !denied[i] {
			asked = append(asked, g)
		}
	}
	errs := s.deleteGroups(ctx, asked)
	for i, g := range req.Groups {
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group, rg.ErrorCode = g, errGroupDenied.Code
		if !denied[i] {
			rg.ErrorCode = errorCode(errs[0])
			errs = errs[1:]
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return Result{Resp: resp}
}

// deleteGroupsAPI: v0-v2; v3 is not served.
var deleteGroupsAPI = api{key: kmsg.DeleteGroups, min: 0, max: 2, handle: (*Server).handleDeleteGroups, needs: needGroups, errors: errorsOf(deleteGroupsError)}

func deleteGroupsError(req *kmsg.DeleteGroupsRequest, code int16) *kmsg.DeleteGroupsResponse {
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, g := range req.Groups {
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group, rg.ErrorCode = g, code
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}

// deleteGroups deletes share groups through the share-group coordinator and leaves the
// rest, classic groups and ids of no group, to the classic one.
func (s *Server) deleteGroups(ctx context.Context, ids []string) []error {
	errs := make([]error, len(ids))
	var classic []string
	var at []int
	for i, id := range ids {
		if s.deps.ShareGroups != nil {
			if handled, err := s.deps.ShareGroups.DeleteGroup(ctx, id); handled {
				errs[i] = err
				continue
			}
		}
		classic = append(classic, id)
		at = append(at, i)
	}
	for j, err := range s.deps.Groups.DeleteGroups(ctx, classic) {
		errs[at[j]] = err
	}
	return errs
}
