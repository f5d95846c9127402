package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleDeleteGroups(ctx context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.DeleteGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for i, err := range s.deps.Groups.DeleteGroups(ctx, req.Groups) {
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group, rg.ErrorCode = req.Groups[i], errorCode(err)
		resp.Groups = append(resp.Groups, rg)
	}
	return Result{Resp: resp}
}
