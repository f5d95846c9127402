package protocol

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/metadata/topicconfig"
)

func (s *Server) handleCreateTopics(ctx context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	ctx, cancel := requestContext(ctx, req.TimeoutMillis)
	defer cancel()

	specs := make([]metadata.TopicSpec, 0, len(req.Topics))
	denied := make([]bool, len(req.Topics))
	for i, t := range req.Topics {
		if denied[i] = !s.mayCreateTopic(r, t.Topic); denied[i] {
			continue
		}
		spec := metadata.TopicSpec{Name: t.Topic, NumPartitions: t.NumPartitions, ReplicationFactor: t.ReplicationFactor}
		if len(t.ReplicaAssignment) > 0 {
			spec.Assignments = make([][]int32, len(t.ReplicaAssignment))
			for _, a := range t.ReplicaAssignment {
				if a.Partition >= 0 && int(a.Partition) < len(spec.Assignments) {
					spec.Assignments[a.Partition] = a.Replicas
				}
			}
		}
		if len(t.Configs) > 0 {
			spec.Configs = make(map[string]string, len(t.Configs))
			for _, c := range t.Configs {
				if c.Value != nil {
					spec.Configs[c.Name] = *c.Value
				}
			}
		}
		specs = append(specs, spec)
	}
	results := s.deps.Meta.CreateTopics(ctx, specs, req.ValidateOnly)
	if !req.ValidateOnly {
		// Answer once this broker serves the new topics, so that a client that goes on
		// to produce through it finds them (other brokers catch up on their own).
		var created []string
		for _, res := range results {
			if res.Err == nil {
				created = append(created, res.Name)
			}
		}
		s.waitApplied(ctx, func(im *metadata.Image) bool { return hasTopics(im, created) })
	}
	next := 0 // results are for the topics not denied, in order
	for i, t := range req.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = t.Topic
		rt.NumPartitions, rt.ReplicationFactor = -1, -1
		var res metadata.TopicResult
		if denied[i] {
			res.Err = errTopicDenied
		} else if next < len(results) {
			res = results[next]
			next++
		}
		if res.Err != nil {
			rt.ErrorCode = errorCode(res.Err)
			rt.ErrorMessage = errorMessage(res.Err)
		} else if res.Topic != nil {
			rt.TopicID = res.Topic.ID
			rt.NumPartitions = int32(len(res.Topic.Partitions))
			if len(res.Topic.Partitions) > 0 {
				rt.ReplicationFactor = int16(len(res.Topic.Partitions[0].Replicas))
			}
			rt.Configs = s.createdConfigs(res.Topic.Configs)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return Result{Resp: resp}
}

// createdConfigs is the v5+ description of a new topic's effective configs.
func (s *Server) createdConfigs(set map[string]string) []kmsg.CreateTopicsResponseTopicConfig {
	resolved := topicconfig.Resolve(set, s.cfg.TopicDefaults)
	var out []kmsg.CreateTopicsResponseTopicConfig
	for _, d := range topicconfig.All() {
		v, src := resolved.Get(d.Name)
		c := kmsg.NewCreateTopicsResponseTopicConfig()
		c.Name = d.Name
		c.Value = &v
		c.Source = int8(src)
		out = append(out, c)
	}
	return out
}

// requestContext bounds a controller call by the request's own timeout.
func requestContext(ctx context.Context, timeoutMillis int32) (context.Context, context.CancelFunc) {
	if timeoutMillis <= 0 {
		timeoutMillis = 30_000
	}
	return context.WithTimeout(ctx, time.Duration(timeoutMillis)*time.Millisecond)
}

// hasTopics reports whether im holds every valid name of names.
func hasTopics(im *metadata.Image, names []string) bool {
	for _, n := range names {
		if im.Topic(n) == nil && metadata.ValidateTopicName(n) == nil {
			return false
		}
	}
	return true
}

// createTopicsAPI: v0-v5 (v5 describes the new topics' configs); v6+ are not served.
var createTopicsAPI = api{key: kmsg.CreateTopics, min: 0, max: 5, handle: (*Server).handleCreateTopics, errors: errorsOf(createTopicsError)}

func createTopicsError(req *kmsg.CreateTopicsRequest, code int16) *kmsg.CreateTopicsResponse {
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic, rt.ErrorCode = t.Topic, code
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
