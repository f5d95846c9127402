package protocol

import (
	"context"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	sharegroup "github.com/shalelog/shale/coordinator/share"
)

// handleListGroups lists the groups this broker coordinates, classic and share; clients
// ask every broker. From v5 a type filter picks group types ("classic", "consumer",
// "share").
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
	classic, err := s.deps.Groups.ListGroups(ctx, states)
	if err != nil {
		resp.ErrorCode = errorCode(err)
		return Result{Resp: resp}
	}
	// One list, sorted by id, of both kinds (their ids never clash).
	type listing struct{ group, protocolType, state, typ string }
	var groups []listing
	for _, g := range classic {
		groups = append(groups, listing{g.Group, g.ProtocolType, g.State.String(), g.Type})
	}
	if s.deps.ShareGroups != nil {
		shares, err := s.deps.ShareGroups.ListGroups(ctx, states)
		if err != nil {
			resp.ErrorCode = errorCode(err)
			return Result{Resp: resp}
		}
		for _, g := range shares {
			groups = append(groups, listing{g.Group, sharegroup.ProtocolType, g.State.String(), sharegroup.ProtocolType})
		}
		slices.SortFunc(groups, func(a, b listing) int { return strings.Compare(a.group, b.group) })
	}
	// DESCRIBE on the cluster lists every group; otherwise only those the principal may
	// describe, silently, as in Kafka.
	all := s.visible(r, opDescribe, resCluster, clusterResource)
	for _, g := range groups {
		if len(types) > 0 && !slices.ContainsFunc(types, func(t string) bool { return strings.EqualFold(t, g.typ) }) {
			continue
		}
		if !all && !s.visible(r, opDescribe, resGroup, g.group) {
			continue
		}
		rg := kmsg.NewListGroupsResponseGroup()
		rg.Group, rg.ProtocolType, rg.GroupState, rg.GroupType = g.group, g.protocolType, g.state, g.typ
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
