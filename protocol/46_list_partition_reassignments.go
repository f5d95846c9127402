package protocol

import (
	"context"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/metadata"
)

// handleListPartitionReassignments is Kafka's ListPartitionReassignments, answered from
// this broker's image: null topics list every reassignment in progress, named
// partitions that exist and are not being reassigned are left out, as Kafka does.
func (s *Server) handleListPartitionReassignments(_ context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.ListPartitionReassignmentsRequest)
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	if !s.allowedCluster(r, opDescribe) {
		resp.ErrorCode = errClusterDenied.Code
		return Result{Resp: resp}
	}
	im := s.image()
	add := func(t *metadata.Topic, idxs []int32) {
		rt := kmsg.NewListPartitionReassignmentsResponseTopic()
		rt.Topic = t.Name
		for _, idx := range idxs {
			if idx < 0 || int(idx) >= len(t.Partitions) || !t.Partitions[idx].Reassigning() {
				continue
			}
			p := &t.Partitions[idx]
			rp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
			rp.Partition = idx
			rp.Replicas = slices.Clone(p.Replicas)
			rp.AddingReplicas = nonNil(p.AddingReplicas)
			rp.RemovingReplicas = nonNil(p.RemovingReplicas)
			rt.Partitions = append(rt.Partitions, rp)
		}
		if len(rt.Partitions) > 0 {
			resp.Topics = append(resp.Topics, rt)
		}
	}
	if req.Topics == nil {
		for _, name := range slices.Sorted(maps.Keys(im.Topics)) {
			t := im.Topics[name]
			idxs := make([]int32, len(t.Partitions))
			for i := range idxs {
				idxs[i] = int32(i)
			}
			add(t, idxs)
		}
		return Result{Resp: resp}
	}
	for _, rt := range req.Topics {
		if t := im.Topic(rt.Topic); t != nil {
			add(t, slices.Compact(slices.Sorted(slices.Values(rt.Partitions))))
		}
	}
	return Result{Resp: resp}
}

// nonNil keeps an empty replica list an empty array on the wire.
func nonNil(s []int32) []int32 {
	if s == nil {
		return []int32{}
	}
	return slices.Clone(s)
}

// listPartitionReassignmentsAPI: every version kmsg knows.
var listPartitionReassignmentsAPI = api{key: kmsg.ListPartitionReassignments, min: 0, max: 0, handle: (*Server).handleListPartitionReassignments, errors: errorsOf(listPartitionReassignmentsError)}

func listPartitionReassignmentsError(req *kmsg.ListPartitionReassignmentsRequest, code int16) *kmsg.ListPartitionReassignmentsResponse {
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	resp.ErrorCode = code
	return resp
}
