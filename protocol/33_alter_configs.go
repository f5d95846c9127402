package protocol

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/metadata"
)

// handleAlterConfigs replaces a topic's whole config set (configs left out revert to
// their defaults), as Kafka's legacy AlterConfigs does.
func (s *Server) handleAlterConfigs(ctx context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	for _, res := range req.Resources {
		rr := kmsg.NewAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = res.ResourceType, res.ResourceName
		ops := make([]metadata.ConfigOp, 0, len(res.Configs))
		for _, c := range res.Configs {
			ops = append(ops, metadata.ConfigOp{Name: c.Name, Value: c.Value, Op: metadata.ConfigSet})
		}
		err := s.configAccess(r, res.ResourceType, res.ResourceName, opAlterConfigs)
		if err == nil {
			err = s.alterConfigs(ctx, res.ResourceType, res.ResourceName, ops, false, req.ValidateOnly)
		}
		rr.ErrorCode, rr.ErrorMessage = errorCode(err), errorMessage(err)
		resp.Resources = append(resp.Resources, rr)
	}
	return Result{Resp: resp}
}

func (s *Server) alterConfigs(ctx context.Context, resourceType kmsg.ConfigResourceType, name string, ops []metadata.ConfigOp, incremental, validateOnly bool) error {
	switch resourceType {
	case resourceTopic:
		var id [16]byte
		var current map[string]string
		if t := s.image().Topic(name); t != nil {
			id, current = t.ID, t.Configs
		}
		// Applied here too, so that malformed ops are refused without a controller
		// round trip; the controller applies them again and validates the result.
		if _, err := metadata.ApplyConfigOps(current, ops, incremental); err != nil {
			return err
		}
		if err := s.deps.Meta.AlterTopicConfigs(ctx, name, ops, incremental, validateOnly); err != nil || validateOnly {
			return err
		}
		s.awaitVisible(ctx, func(im *metadata.Image) bool {
			t := im.Topic(name)
			return topicReplaced(t, id) || configsShow(t.Configs, ops, incremental, metadata.ApplyConfigOps)
		})
		return nil
	case resourceBroker, resourceBrokerLogger:
		return fmt.Errorf("%w: Shale's broker configs are static; set them in server.properties or flags", kerr.InvalidRequest)
	case resourceClientMetrics:
		return s.alterClientMetrics(ctx, name, ops, incremental, validateOnly) // client_metrics_configs.go
	case kmsg.ConfigResourceTypeGroupConfig:
		return fmt.Errorf("%w: Shale has no per-group configs; share groups take group.share.* and share.auto.offset.reset from the broker configs", kerr.InvalidConfig)
	}
	return fmt.Errorf("%w: resource type %d is not supported", kerr.InvalidRequest, resourceType)
}

// alterConfigsAPI: v0-v1; v2, the flexible form, is not served.
var alterConfigsAPI = api{key: kmsg.AlterConfigs, min: 0, max: 1, handle: (*Server).handleAlterConfigs, errors: errorsOf(alterConfigsError)}

func alterConfigsError(req *kmsg.AlterConfigsRequest, code int16) *kmsg.AlterConfigsResponse {
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	for _, r := range req.Resources {
		rr := kmsg.NewAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName, rr.ErrorCode = r.ResourceType, r.ResourceName, code
		resp.Resources = append(resp.Resources, rr)
	}
	return resp
}
