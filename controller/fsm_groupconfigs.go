package controller

import (
	"github.com/shalelog/shale/metadata"

	pb "github.com/shalelog/shale/controller/proto"
)

// Group configs (Kafka's GROUP config resources, KIP-848 and KIP-932) are named configs
// (namedconfigs.go), as client metrics subscriptions are: AlterGroupConfigs proposes one
// group's complete configs, the FSM records them in the change, and brokers receive them
// in deltas and image chunks.

// groupConfigsToPB lists every group's configs in group order.
func groupConfigsToPB(g metadata.GroupConfigs) []*pb.GroupConfigState {
	return namedConfigsToPB(g, func(group string, configs map[string]string) *pb.GroupConfigState {
		return &pb.GroupConfigState{Group: group, Configs: configs}
	})
}

// applyGroupConfigs returns g with each state's group replaced.
func applyGroupConfigs(g metadata.GroupConfigs, states []*pb.GroupConfigState) metadata.GroupConfigs {
	return applyNamedConfigs(g, states, (*pb.GroupConfigState).GetGroup)
}

func (f *fsm) applyGroupConfigsRecord(c *change, r *pb.GroupConfigsRecord) applyResult {
	recordNamedConfigs(&c.groupConfigs, r.Groups, (*pb.GroupConfigState).GetGroup)
	return applyResult{}
}

// groupConfigsDelta lists the change's groups for its delta.
func (c *change) groupConfigsDelta() []*pb.GroupConfigState {
	return namedConfigsDelta(c.groupConfigs)
}
