package controller

import (
	"maps"
	"slices"

	"github.com/shalelog/shale/metadata"

	pb "github.com/shalelog/shale/controller/proto"
)

// Group configs (Kafka's GROUP config resources, KIP-848 and KIP-932) live in the image
// as client metrics subscriptions do: AlterGroupConfigs proposes one group's complete
// configs, the FSM records them in the change, and brokers receive them in deltas and
// image chunks.

// groupConfigsToPB lists every group's configs in group order.
func groupConfigsToPB(g metadata.GroupConfigs) []*pb.GroupConfigState {
	var out []*pb.GroupConfigState
	for _, group := range slices.Sorted(maps.Keys(g)) {
		out = append(out, &pb.GroupConfigState{Group: group, Configs: maps.Clone(g[group])})
	}
	return out
}

// applyGroupConfigs returns g with each state's group replaced.
func applyGroupConfigs(g metadata.GroupConfigs, states []*pb.GroupConfigState) metadata.GroupConfigs {
	for _, st := range states {
		g = g.With(st.Group, maps.Clone(st.Configs))
	}
	return g
}

func (f *fsm) applyGroupConfigsRecord(c *change, r *pb.GroupConfigsRecord) applyResult {
	for _, st := range r.Groups {
		if c.groupConfigs == nil {
			c.groupConfigs = map[string]*pb.GroupConfigState{}
		}
		c.groupConfigs[st.Group] = st
	}
	return applyResult{}
}

// groupConfigsDelta lists the change's groups for its delta.
func (c *change) groupConfigsDelta() []*pb.GroupConfigState {
	var out []*pb.GroupConfigState
	for _, group := range slices.Sorted(maps.Keys(c.groupConfigs)) {
		out = append(out, c.groupConfigs[group])
	}
	return out
}
