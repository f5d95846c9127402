package protocol

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/metadata/topicconfig"
)

// Config resource types.
const (
	resourceTopic        = 2
	resourceBroker       = 4
	resourceBrokerLogger = 8
)

func (s *Server) handleDescribeConfigs(_ context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, res := range req.Resources {
		rr := kmsg.NewDescribeConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = res.ResourceType, res.ResourceName
		err := s.configAccess(r, res.ResourceType, res.ResourceName, opDescribeConfigs)
		switch {
		case err != nil:
		case res.ResourceType == resourceTopic:
			rr.Configs, err = s.describeTopicConfigs(res, req, r.Version)
		case res.ResourceType == resourceBroker:
			rr.Configs, err = s.describeBrokerConfigs(res, req, r.Version)
		case res.ResourceType == resourceClientMetrics:
			rr.Configs, err = s.describeClientMetricsConfigs(res, req) // client_metrics_configs.go
		case res.ResourceType == kmsg.ConfigResourceTypeGroupConfig:
			rr.Configs = s.describeGroupConfigs(res, req) // group_configs.go
		default:
			err = fmt.Errorf("%w: resource type %d is not supported", kerr.InvalidRequest, res.ResourceType)
		}
		if err != nil {
			rr.ErrorCode = errorCode(err)
			rr.ErrorMessage = errorMessage(err)
			rr.Configs = nil
		}
		resp.Resources = append(resp.Resources, rr)
	}
	return Result{Resp: resp}
}

func wanted(names []string) func(string) bool {
	if names == nil {
		return func(string) bool { return true }
	}
	set := make(map[string]bool, len(names))
	for _, n := range names {
		set[n] = true
	}
	return func(n string) bool { return set[n] }
}

func (s *Server) describeTopicConfigs(res kmsg.DescribeConfigsRequestResource, req *kmsg.DescribeConfigsRequest, version int16) ([]kmsg.DescribeConfigsResponseResourceConfig, error) {
	t := s.image().Topic(res.ResourceName)
	if t == nil {
		return nil, fmt.Errorf("%w: topic %q", kerr.UnknownTopicOrPartition, res.ResourceName)
	}
	resolved := topicconfig.Resolve(t.Configs, s.cfg.TopicDefaults)
	want := wanted(res.ConfigNames)
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, d := range topicconfig.All() {
		if !want(d.Name) {
			continue
		}
		v, src := resolved.Get(d.Name)
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name, c.Value = d.Name, &v
		c.Source = kmsg.ConfigSource(src)
		c.IsDefault = src == topicconfig.SourceDefault
		c.ConfigType = kmsg.ConfigType(d.Type)
		if req.IncludeDocumentation {
			doc := d.Doc
			c.Documentation = &doc
		}
		if req.IncludeSynonyms && version >= 1 {
			c.ConfigSynonyms = s.topicSynonyms(d, t.Configs)
		}
		out = append(out, c)
	}
	return out, nil
}

// topicSynonyms lists where a topic config could come from, most specific first.
func (s *Server) topicSynonyms(d *topicconfig.Def, set map[string]string) []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym {
	var out []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym
	add := func(name, value string, src topicconfig.Source) {
		syn := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
		v := value
		syn.Name, syn.Value, syn.Source = name, &v, kmsg.ConfigSource(src)
		out = append(out, syn)
	}
	if v, ok := set[d.Name]; ok {
		add(d.Name, v, topicconfig.SourceDynamicTopic)
	}
	if v, ok := s.cfg.TopicDefaults[d.Name]; ok && d.BrokerName != "" {
		add(d.BrokerName, v, topicconfig.SourceStaticBroker)
	}
	if d.BrokerName != "" {
		add(d.BrokerName, d.Default, topicconfig.SourceDefault)
	}
	return out
}

func (s *Server) describeBrokerConfigs(res kmsg.DescribeConfigsRequestResource, req *kmsg.DescribeConfigsRequest, version int16) ([]kmsg.DescribeConfigsResponseResourceConfig, error) {
	if res.ResourceName != "" && res.ResourceName != strconv.Itoa(int(s.cfg.NodeID)) {
		return nil, fmt.Errorf("%w: broker %q is not this broker (%d); ask that broker", kerr.InvalidRequest, res.ResourceName, s.cfg.NodeID)
	}
	want := wanted(res.ConfigNames)
	names := make([]string, 0, len(s.cfg.BrokerConfigs))
	for n := range s.cfg.BrokerConfigs {
		if want(n) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, n := range names {
		v := s.cfg.BrokerConfigs[n]
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name, c.Value = n, &v
		c.ReadOnly = true // Shale's broker configs are static
		c.Source = kmsg.ConfigSourceStaticBrokerConfig
		c.ConfigType = kmsg.ConfigTypeString
		sensitive := sensitiveConfig(n)
		if sensitive {
			c.Value, c.IsSensitive, c.ConfigType = nil, true, kmsg.ConfigTypePassword
		}
		if req.IncludeSynonyms && version >= 1 {
			syn := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			syn.Name, syn.Value, syn.Source = n, c.Value, kmsg.ConfigSourceStaticBrokerConfig
			c.ConfigSynonyms = append(c.ConfigSynonyms, syn)
		}
		out = append(out, c)
	}
	return out, nil
}

// describeConfigsAPI: every version kmsg knows.
var describeConfigsAPI = api{key: kmsg.DescribeConfigs, min: 0, max: 4, handle: (*Server).handleDescribeConfigs, errors: errorsOf(describeConfigsError)}

func describeConfigsError(req *kmsg.DescribeConfigsRequest, code int16) *kmsg.DescribeConfigsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, r := range req.Resources {
		rr := kmsg.NewDescribeConfigsResponseResource()
		rr.ResourceType, rr.ResourceName, rr.ErrorCode = r.ResourceType, r.ResourceName, code
		resp.Resources = append(resp.Resources, rr)
	}
	return resp
}
