package protocol

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupConfigs are the share-group configs of KIP-932 (Kafka's GroupConfig) that Shale
// has, each with the broker config it takes its value from and Kafka's default. Shale
// keeps no per-group configs: DescribeConfigs on a GROUP resource reports the broker-wide
// values, read-only, and IncrementalAlterConfigs refuses GROUP resources.
var groupConfigs = []struct {
	name, broker, def string
	typ               kmsg.ConfigType
	doc               string
}{
	{"share.auto.offset.reset", "share.auto.offset.reset", "latest", kmsg.ConfigTypeString,
		"Where a share group starts on a partition it has no state for: latest or earliest."},
	{"share.heartbeat.interval.ms", "group.share.heartbeat.interval.ms", "5000", kmsg.ConfigTypeInt,
		"How often share-group members heartbeat."},
	{"share.isolation.level", "", "read_uncommitted", kmsg.ConfigTypeString,
		"Which records share-group members read; Shale has only read_uncommitted."},
	{"share.record.lock.duration.ms", "group.share.record.lock.duration.ms", "30000", kmsg.ConfigTypeInt,
		"How long a member holds a record it acquired before it is released."},
	{"share.session.timeout.ms", "group.share.session.timeout.ms", "45000", kmsg.ConfigTypeInt,
		"How long a share-group member may go without a heartbeat before it leaves the group."},
}

// describeGroupConfigs answers DescribeConfigs for a GROUP resource (any group id: group
// configs do not need the group to exist).
func (s *Server) describeGroupConfigs(res kmsg.DescribeConfigsRequestResource, req *kmsg.DescribeConfigsRequest) []kmsg.DescribeConfigsResponseResourceConfig {
	want := wanted(res.ConfigNames)
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, g := range groupConfigs {
		if !want(g.name) {
			continue
		}
		v, ok := s.cfg.BrokerConfigs[g.broker]
		if !ok || g.broker == "" {
			v = g.def
		}
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name, c.Value = g.name, &v
		c.ReadOnly = true // no per-group values: they follow the broker's
		c.Source, c.IsDefault = kmsg.ConfigSourceDefaultConfig, true
		c.ConfigType = g.typ
		if req.IncludeDocumentation {
			doc := g.doc
			c.Documentation = &doc
		}
		out = append(out, c)
	}
	return out
}
