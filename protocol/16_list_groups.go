package protocol

import (
	"context"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// classicGroupType is the only group type Shale has (KIP-848 "consumer" groups are not
// served).
const classicGroupType = "classic"

// handleListGroups lists the groups this broker coordinates; clients ask every broker.
func (s *Server) handleListGroups(ctx context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.ListGroupsRequest)
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	if r.Version >= 5 && len(req.TypesFilter) > 0 {
		wanted := false
		for _, t := range req.TypesFilter {
			wanted = wanted || strings.EqualFold(t, classicGroupType)
		}
		if !wanted {
			return Result{Resp: resp}
		}
	}
	var states []string
	if r.Version >= 4 {
		states = req.StatesFilter
	}
	groups, err := s.deps.Groups.ListGroups(ctx, states)
	if err != nil {
		resp.ErrorCode = errorCode(err)
		return Result{Resp: resp}
	}
	// DESCRIBE on the cluster lists every group; otherwise only those the principal may
	// describe, silently, as in Kafka.
	all := s.visible(r, opDescribe, resCluster, clusterResource)
	for _, g := range groups {
		if !all && !s.visible(r, opDescribe, resGroup, g.Group) {
			continue
		}
		rg := kmsg.NewListGroupsResponseGroup()
		rg.Group, rg.ProtocolType, rg.GroupState, rg.GroupType = g.Group, g.ProtocolType, g.State.String(), classicGroupType
		resp.Groups = append(resp.Groups, rg)
	}
	return Result{Resp: resp}
}
