package protocol

import (
	"context"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleListGroups lists the groups this broker coordinates, classic and share; clients
// ask every broker. From v5 a type filter picks group types ("consumer", KIP-848's, has
// no groups here).
func (s *Server) handleListGroups(ctx context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.ListGroupsRequest)
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	var types []string
	if r.Version >= 5 {
		types = req.TypesFilter
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
		if len(types) > 0 && !slices.ContainsFunc(types, func(t string) bool { return strings.EqualFold(t, g.Type) }) {
			continue
		}
		if !all && !s.visible(r, opDescribe, resGroup, g.Group) {
			continue
		}
		rg := kmsg.NewListGroupsResponseGroup()
		rg.Group, rg.ProtocolType, rg.GroupState, rg.GroupType = g.Group, g.ProtocolType, g.StateName(), g.Type
		resp.Groups = append(resp.Groups, rg)
	}
	return Result{Resp: resp}
}

// listGroupsAPI: every version kmsg knows.
var listGroupsAPI = api{key: kmsg.ListGroups, min: 0, max: 5, handle: (*Server).handleListGroups, needs: needGroups, errors: errorsOf(listGroupsError)}

func listGroupsError(req *kmsg.ListGroupsRequest, code int16) *kmsg.ListGroupsResponse {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	resp.ErrorCode = code
	return resp
}
