package protocol

import (
	"context"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleListClientMetricsResources answers ListClientMetricsResources (key 74 v0, which
// Kafka 4.1 renamed ListConfigResources): the names of the client metrics
// subscriptions. Kafka asks for DESCRIBE_CONFIGS on the cluster.
func (s *Server) handleListClientMetricsResources(_ context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.ListConfigResourcesRequest)
	resp := req.ResponseKind().(*kmsg.ListConfigResourcesResponse)
	if !s.allowedCluster(r, kmsg.ACLOperationDescribeConfigs) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return Result{Resp: resp}
	}
	resp.ConfigResources = []kmsg.ListConfigResourcesResponseConfigResource{}
	for _, name := range slices.Sorted(maps.Keys(s.image().ClientMetrics)) {
		c := kmsg.NewListConfigResourcesResponseConfigResource()
		c.Name = name
		resp.ConfigResources = append(resp.ConfigResources, c)
	}
	return Result{Resp: resp}
}
