package protocol

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/metadata"
)

func (s *Server) handleDeleteTopics(ctx context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	ctx, cancel := requestContext(ctx, req.TimeoutMillis)
	defer cancel()
	names := deleteTopicNames(req)
	// Topics the principal may not delete are answered without reaching the controller.
	all := names
	denied := make([]bool, len(all))
	names = nil
	for i, n := range all {
		if denied[i] = !s.allowed(r, opDelete, resTopic, n); !denied[i] {
			names = append(names, n)
		}
	}
	var errs []error
	if s.cfg.DeleteTopicEnable {
		ids := make([][16]byte, len(names))
		im := s.image()
		for i, n := range names {
			if t := im.Topic(n); t != nil {
				ids[i] = t.ID
			}
		}
		errs = s.deps.Meta.DeleteTopics(ctx, names)
		s.awaitVisible(ctx, func(im *metadata.Image) bool {
			for i, n := range names {
				if i < len(errs) && errs[i] == nil && !topicReplaced(im.Topic(n), ids[i]) {
					return false
				}
			}
			return true
		})
	}
	next := 0
	for i, name := range all {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		n := name
		rt.Topic = &n
		var err error
		switch {
		case denied[i]:
			err = errTopicDenied
		case !s.cfg.DeleteTopicEnable:
			err = fmt.Errorf("%w: delete.topic.enable is false", kerr.TopicDeletionDisabled)
		case next < len(errs):
			err = errs[next]
			next++
		}
		if err != nil {
			rt.ErrorCode = errorCode(err)
			rt.ErrorMessage = errorMessage(err)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return Result{Resp: resp}
}

// deleteTopicNames lists the topics of a DeleteTopics request: by name in v0-v5, and
// in v6+ by name or by id (ids are not served yet: Shale advertises up to v4).
func deleteTopicNames(req *kmsg.DeleteTopicsRequest) []string {
	names := append([]string(nil), req.TopicNames...)
	for _, t := range req.Topics {
		if t.Topic != nil {
			names = append(names, *t.Topic)
		}
	}
	return names
}

// deleteTopicsAPI: v0-v4; v6 deletes topics by id, which Shale does not serve yet.
var deleteTopicsAPI = api{key: kmsg.DeleteTopics, min: 0, max: 4, handle: (*Server).handleDeleteTopics, errors: errorsOf(deleteTopicsError)}

func deleteTopicsError(req *kmsg.DeleteTopicsRequest, code int16) *kmsg.DeleteTopicsResponse {
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	for _, name := range deleteTopicNames(req) {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		n := name
		rt.Topic, rt.ErrorCode = &n, code
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
