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

// listClientMetricsResourcesAPI is ListConfigResources v0, where the metadata store
// keeps subscriptions; v1 (KIP-1142, Kafka 4.1) lists every config resource type and is
// not served.
var listClientMetricsResourcesAPI = api{key: kmsg.ListConfigResources, min: 0, max: 0, handle: (*Server).handleListClientMetricsResources, needs: needClientMetrics}
