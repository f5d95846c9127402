package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/metadata"
)

func (s *Server) handleCreatePartitions(ctx context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	ctx, cancel := requestContext(ctx, req.TimeoutMillis)
	defer cancel()
	specs := make([]metadata.PartitionsSpec, 0, len(req.Topics))
	denied := make([]bool, len(req.Topics))
	for i, t := range req.Topics {
		if denied[i] = !s.allowed(r, opAlter, resTopic, t.Topic); denied[i] {
			continue
		}
		spec := metadata.PartitionsSpec{Topic: t.Topic, Count: t.Count}
		for _, a := range t.Assignment {
			spec.Assignments = append(spec.Assignments, a.Replicas)
		}
		specs = append(specs, spec)
	}
	errs := s.deps.Meta.CreatePartitions(ctx, specs, req.ValidateOnly)
	if !req.ValidateOnly {
		s.awaitVisible(ctx, func(im *metadata.Image) bool {
			for i, sp := range specs {
				if i < len(errs) && errs[i] == nil {
					if t := im.Topic(sp.Topic); t == nil || int32(len(t.Partitions)) < sp.Count {
						return false
					}
				}
			}
			return true
		})
	}
	next := 0
	for i, t := range req.Topics {
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic = t.Topic
		var err error
		if denied[i] {
			err = errTopicDenied
		} else if next < len(errs) {
			err = errs[next]
			next++
		}
		if err != nil {
			rt.ErrorCode, rt.ErrorMessage = errorCode(err), errorMessage(err)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return Result{Resp: resp}
}

// createPartitionsAPI: every version kmsg knows.
var createPartitionsAPI = api{key: kmsg.CreatePartitions, min: 0, max: 3, handle: (*Server).handleCreatePartitions, errors: errorsOf(createPartitionsError)}

func createPartitionsError(req *kmsg.CreatePartitionsRequest, code int16) *kmsg.CreatePartitionsResponse {
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic, rt.ErrorCode = t.Topic, code
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
