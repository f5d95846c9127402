package protocol

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/metadata"
)

// Group configs (KIP-848, KIP-932) are GROUP config resources (type 32): per-group values
// of the group.consumer.*, group.share.* and group.streams.* broker settings, described
// and altered like client metrics subscriptions and stored through the controller. The
// share keys take effect in the share-group coordinator and the share-partition
// manager, the consumer.* keys in the consumer-group (KIP-848) coordinator; the
// streams.* keys are stored, validated and described only, since Shale has no KIP-1071
// group coordinator yet that would use them.

// groupConfigBounds are this broker's bounds and defaults for group configs.
func (s *Server) groupConfigBounds() *metadata.GroupConfigBounds {
	return metadata.GroupConfigBoundsFrom(s.cfg.BrokerConfigs)
}

// describeGroupConfigs answers DescribeConfigs for a GROUP resource: every key, with the
// broker's value for those the group does not set (any group id: group configs do not
// need the group to exist).
func (s *Server) describeGroupConfigs(res kmsg.DescribeConfigsRequestResource, req *kmsg.DescribeConfigsRequest) ([]kmsg.DescribeConfigsResponseResourceConfig, error) {
	if res.ResourceName == "" {
		return nil, fmt.Errorf("%w: group name must not be empty", kerr.InvalidRequest)
	}
	set := s.image().GroupConfigs[res.ResourceName]
	defaults := s.groupConfigBounds().Defaults
	want := wanted(res.ConfigNames)
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, k := range metadata.GroupConfigKeys {
		if !want(k.Name) {
			continue
		}
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name, c.ConfigType = k.Name, kmsg.ConfigTypeString
		if k.Int {
			c.ConfigType = kmsg.ConfigTypeInt
		}
		v, ok := set[k.Name]
		if ok {
			c.Source = kmsg.ConfigSourceGroupConfig
		} else {
			if v, ok = defaults[k.Name]; !ok {
				v = k.Default
			}
			c.Source, c.IsDefault = kmsg.ConfigSourceDefaultConfig, true
		}
		c.Value = &v
		if req.IncludeDocumentation {
			doc := k.Doc
			c.Documentation = &doc
		}
		out = append(out, c)
	}
	return out, nil
}

// alterGroupConfigs changes one group's configs through the controller and waits until
// this broker has applied them, so that the client's next request sees the change.
func (s *Server) alterGroupConfigs(ctx context.Context, group string, ops []metadata.ConfigOp, incremental, validateOnly bool) error {
	store, ok := s.deps.Meta.(metadata.GroupConfigStore)
	if !ok {
		return fmt.Errorf("%w: this broker's metadata store keeps no group configs", kerr.InvalidRequest)
	}
	// The bounds are this broker's group.* configs, which the controller does not have:
	// they are checked here only.
	bounds := s.groupConfigBounds()
	apply := func(current map[string]string, ops []metadata.ConfigOp, incremental bool) (map[string]string, error) {
		return metadata.ApplyGroupConfigOps(group, current, ops, incremental, bounds)
	}
	if _, err := apply(s.image().GroupConfigs[group], ops, incremental); err != nil {
		return err
	}
	if err := store.AlterGroupConfigs(ctx, group, ops, incremental, validateOnly); err != nil || validateOnly {
		return err
	}
	s.awaitVisible(ctx, func(im *metadata.Image) bool {
		return configsShow(im.GroupConfigs[group], ops, incremental, apply)
	})
	return nil
}
