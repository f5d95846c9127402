package protocol

import (
	"context"

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
		if s.authorizing() {
			resp.ClusterAuthorizedOperations = s.authorizedOps(r, resCluster, clusterResource)
		}
	}
	for _, b := range liveBrokers(im, r.Listener) {
		rb := kmsg.NewDescribeClusterResponseBroker()
		rb.NodeID, rb.Host, rb.Port, rb.Rack = b.ID, b.Host, b.Port, rackOf(b)
		resp.Brokers = append(resp.Brokers, rb)
	}
	return Result{Resp: resp}
}

// describeClusterAPI: v0-v1; v2 is not served.
var describeClusterAPI = api{key: kmsg.DescribeCluster, min: 0, max: 1, handle: (*Server).handleDescribeCluster, errors: errorsOf(describeClusterError)}

func describeClusterError(req *kmsg.DescribeClusterRequest, code int16) *kmsg.DescribeClusterResponse {
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.ErrorCode = code
	return resp
}
