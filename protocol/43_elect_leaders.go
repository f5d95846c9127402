package protocol

import (
	"context"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleElectLeaders is Kafka's ElectLeaders (kafka-leader-election.sh): v0 always
// elects preferred leaders; v1+ carries the election type. Null topics mean every
// partition, and then only the partitions an election was attempted for are answered.
func (s *Server) handleElectLeaders(ctx context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.ElectLeadersRequest)
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	ctx, cancel := requestContext(ctx, req.TimeoutMillis)
	defer cancel()

	// answerAll gives every requested partition one error: v0 has no top-level code.
	answerAll := func(code int16, msg *string) Result {
		resp.ErrorCode = code
		for _, t := range req.Topics {
			rt := kmsg.NewElectLeadersResponseTopic()
			rt.Topic = t.Topic
			for _, idx := range t.Partitions {
				rp := kmsg.NewElectLeadersResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.ErrorMessage = idx, code, msg
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return Result{Resp: resp}
	}

	if !s.allowedCluster(r, opAlter) {
		return answerAll(errClusterDenied.Code, nil)
	}
	preferred := true
	if req.Version >= 1 {
		switch req.ElectionType {
		case 0: // PREFERRED
		case 1: // UNCLEAN
			preferred = false
		default:
			msg := "unknown election type"
			return answerAll(kerr.InvalidRequest.Code, &msg)
		}
	}
	var parts map[string][]int32
	if req.Topics != nil {
		parts = make(map[string][]int32, len(req.Topics))
		for _, t := range req.Topics {
			parts[t.Topic] = append(parts[t.Topic], t.Partitions...)
		}
	}
	results, err := s.deps.Meta.ElectLeaders(ctx, preferred, parts)
	if err != nil {
		return answerAll(errorCode(err), errorMessage(err))
	}

	add := func(topic string, idxs []int32) {
		rt := kmsg.NewElectLeadersResponseTopic()
		rt.Topic = topic
		for _, idx := range idxs {
			rp := kmsg.NewElectLeadersResponseTopicPartition()
			rp.Partition = idx
			if err := results[topic][idx]; err != nil {
				rp.ErrorCode, rp.ErrorMessage = errorCode(err), errorMessage(err)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if req.Topics == nil {
		for _, topic := range slices.Sorted(maps.Keys(results)) {
			add(topic, slices.Sorted(maps.Keys(results[topic])))
		}
		return Result{Resp: resp}
	}
	seen := map[string]bool{}
	for _, t := range req.Topics {
		if seen[t.Topic] {
			continue // merged into the topic's first entry
		}
		seen[t.Topic] = true
		add(t.Topic, slices.Compact(slices.Sorted(slices.Values(parts[t.Topic]))))
	}
	return Result{Resp: resp}
}

// electLeadersAPI: every version kmsg knows.
var electLeadersAPI = api{key: kmsg.ElectLeaders, min: 0, max: 2, handle: (*Server).handleElectLeaders, errors: errorsOf(electLeadersError)}

// electLeadersError is Kafka's: the top-level code (v1+) and the code on every
// partition named.
func electLeadersError(req *kmsg.ElectLeadersRequest, code int16) *kmsg.ElectLeadersResponse {
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	resp.ErrorCode = code
	for _, t := range req.Topics {
		rt := kmsg.NewElectLeadersResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewElectLeadersResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
