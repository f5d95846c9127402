package protocol

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleDescribeCluster(_ context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	im := s.image()
	resp.ClusterID = im.ClusterID
	resp.ControllerID = s.cfg.NodeID
	resp.EndpointType = 1
	if req.EndpointType != 0 && req.EndpointType != 1 {
		// Shale serves broker endpoints only; controllers are not reachable over Kafka.
		resp.ErrorCode = 42 // INVALID_REQUEST
		msg := "only broker endpoints (1) can be described"
		resp.ErrorMessage = &msg
		return Result{Resp: resp}
	}
	resp.ClusterAuthorizedOperations = authorizedOpsUnset
	if req.IncludeClusterAuthorizedOperations {
		resp.ClusterAuthorizedOperations = clusterAllOps
	}
	ids := make([]int32, 0, len(im.Brokers))
	for id, b := range im.Brokers {
		if !b.Fenced {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		b := im.Brokers[id]
		rb := kmsg.NewDescribeClusterResponseBroker()
		rb.NodeID, rb.Host, rb.Port = b.ID, b.Host, b.Port
		if b.Rack != "" {
			rack := b.Rack
			rb.Rack = &rack
		}
		resp.Brokers = append(resp.Brokers, rb)
	}
	return Result{Resp: resp}
}
