package controller

import (
	"context"
	"slices"

	"github.com/shalelog/shale/metadata"

	pb "github.com/shalelog/shale/controller/proto"
)

// AlterPartitionReassignments starts, replaces or cancels reassignments; see
// metadata.Store.
func (c *BrokerClient) AlterPartitionReassignments(ctx context.Context, ras []metadata.Reassignment) ([]error, error) {
	req := &pb.AlterPartitionReassignmentsRequest{Reassignments: make([]*pb.PartitionReassignment, len(ras))}
	for i, ra := range ras {
		req.Reassignments[i] = &pb.PartitionReassignment{Topic: ra.Topic, Partition: ra.Partition,
			Replicas: slices.Clone(ra.Replicas), Cancel: ra.Replicas == nil, RefuseReplicationFactorChange: ra.RefuseReplicationFactorChange}
	}
	resp, err := rpc(ctx, c, pb.ControllerClient.AlterPartitionReassignments, req)
	if err != nil {
		return nil, err
	}
	return perItem("partition reassignments", len(ras), resp.Results, func(r *pb.PartitionError) error { return fromPBError(r.Error) })
}
