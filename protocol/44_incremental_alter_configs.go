package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/metadata"
)

func (s *Server) handleIncrementalAlterConfigs(ctx context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	for _, res := range req.Resources {
		rr := kmsg.NewIncrementalAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = res.ResourceType, res.ResourceName
		ops := make([]metadata.ConfigOp, 0, len(res.Configs))
		for _, c := range res.Configs {
			ops = append(ops, metadata.ConfigOp{Name: c.Name, Value: c.Value, Op: metadata.ConfigOpType(c.Op)})
		}
		err := s.configAccess(r, res.ResourceType, res.ResourceName, opAlterConfigs)
		if err == nil {
			err = s.alterConfigs(ctx, res.ResourceType, res.ResourceName, ops, true, req.ValidateOnly)
		}
		rr.ErrorCode, rr.ErrorMessage = errorCode(err), errorMessage(err)
		resp.Resources = append(resp.Resources, rr)
	}
	return Result{Resp: resp}
}

// incrementalAlterConfigsAPI: every version kmsg knows.
var incrementalAlterConfigsAPI = api{key: kmsg.IncrementalAlterConfigs, min: 0, max: 1, handle: (*Server).handleIncrementalAlterConfigs, errors: errorsOf(incrementalAlterConfigsError)}

func incrementalAlterConfigsError(req *kmsg.IncrementalAlterConfigsRequest, code int16) *kmsg.IncrementalAlterConfigsResponse {
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	for _, r := range req.Resources {
		rr := kmsg.NewIncrementalAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName, rr.ErrorCode = r.ResourceType, r.ResourceName, code
		resp.Resources = append(resp.Resources, rr)
	}
	return resp
}
