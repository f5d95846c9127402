package protocol

import (
	"context"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/metadata"
)

// Client metrics subscriptions (KIP-714) are CLIENT_METRICS config resources (type 16),
// described and altered like topic configs and stored through the controller.

const resourceClientMetrics = kmsg.ConfigResourceTypeClientMetrics

var clientMetricsDocs = map[string]string{
	metadata.ClientMetricsMetrics: "Comma-separated metric name prefixes the matching clients push; * for every metric.",
	metadata.ClientMetricsInterval: fmt.Sprintf("How often the matching clients push, in milliseconds (%d to %d).",
		metadata.ClientMetricsMinInterval, metadata.ClientMetricsMaxInterval),
	metadata.ClientMetricsMatch: "Comma-separated selector=regex pairs a client must all match: client_instance_id, client_id, " +
		"client_software_name, client_software_version, client_source_address, client_source_port. None: every client.",
}

// describeClientMetricsConfigs answers DescribeConfigs for a CLIENT_METRICS resource: the
// three keys, with Kafka's defaults for those not set (also for a name with no
// subscription, as Kafka answers).
func (s *Server) describeClientMetricsConfigs(res kmsg.DescribeConfigsRequestResource, req *kmsg.DescribeConfigsRequest) ([]kmsg.DescribeConfigsResponseResourceConfig, error) {
	if res.ResourceName == "" {
		return nil, fmt.Errorf("%w: subscription name can't be empty", kerr.InvalidRequest)
	}
	set := s.image().ClientMetrics[res.ResourceName]
	defaults := map[string]string{metadata.ClientMetricsMetrics: "", metadata.ClientMetricsInterval: strconv.Itoa(metadata.ClientMetricsDefaultInterval), metadata.ClientMetricsMatch: ""}
	types := map[string]kmsg.ConfigType{metadata.ClientMetricsMetrics: kmsg.ConfigTypeList, metadata.ClientMetricsInterval: kmsg.ConfigTypeInt, metadata.ClientMetricsMatch: kmsg.ConfigTypeList}
	want := wanted(res.ConfigNames)
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, k := range metadata.ClientMetricsKeys {
		if !want(k) {
			continue
		}
		v, ok := set[k]
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name, c.ConfigType = k, types[k]
		if ok {
			c.Source = kmsg.ConfigSourceClientMetricsConfig
		} else {
			v = defaults[k]
			c.Source, c.IsDefault = kmsg.ConfigSourceDefaultConfig, true
		}
		c.Value = &v
		if req.IncludeDocumentation {
			doc := clientMetricsDocs[k]
			c.Documentation = &doc
		}
		out = append(out, c)
	}
	return out, nil
}

// alterClientMetrics changes one subscription through the controller and waits until
// this broker has applied it, so that the client's next request sees the change.
func (s *Server) alterClientMetrics(ctx context.Context, name string, ops []metadata.ConfigOp, incremental, validateOnly bool) error {
	store, ok := s.deps.Meta.(metadata.ClientMetricsStore)
	if !ok {
		return fmt.Errorf("%w: this broker's metadata store keeps no client metrics subscriptions", kerr.InvalidRequest)
	}
	// Validated here too, so a bad request is refused without a controller round trip.
	apply := func(current map[string]string, ops []metadata.ConfigOp, incremental bool) (map[string]string, error) {
		return metadata.ApplyClientMetricsOps(name, current, ops, incremental)
	}
	if _, err := apply(s.image().ClientMetrics[name], ops, incremental); err != nil {
		return err
	}
	if err := store.AlterClientMetrics(ctx, name, ops, incremental, validateOnly); err != nil || validateOnly {
		return err
	}
	s.awaitVisible(ctx, func(im *metadata.Image) bool {
		return configsShow(im.ClientMetrics[name], ops, incremental, apply)
	})
	return nil
}
