package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleOffsetDelete(ctx context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.OffsetDeleteRequest)
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	if !s.allowed(r, opDelete, resGroup, req.Group) {
		resp.ErrorCode = errGroupDenied.Code
		return Result{Resp: resp}
	}
	mayRead := s.topicCheck(r, opRead)
	parts := map[string][]int32{}
	for _, t := range req.Topics {
		if !mayRead(t.Topic) {
			continue
		}
		for _, p := range t.Partitions {
			parts[t.Topic] = append(parts[t.Topic], p.Partition)
		}
	}
	res, err := s.deps.Groups.DeleteOffsets(ctx, req.Group, parts)
	if err != nil {
		resp.ErrorCode = errorCode(err)
		return Result{Resp: resp}
	}
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, errorCode(res[t.Topic][p.Partition])
			if !mayRead(t.Topic) {
				rp.ErrorCode = errTopicDenied.Code
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return Result{Resp: resp}
}

// offsetDeleteAPI: every version kmsg knows.
var offsetDeleteAPI = api{key: kmsg.OffsetDelete, min: 0, max: 0, handle: (*Server).handleOffsetDelete, needs: needGroups, errors: errorsOf(offsetDeleteError)}

func offsetDeleteError(req *kmsg.OffsetDeleteRequest, code int16) *kmsg.OffsetDeleteResponse {
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	resp.ErrorCode = code
	return resp
}
