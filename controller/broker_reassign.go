package controller

import (
	"context"
	"fmt"
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
	if len(resp.Results) != len(ras) {
		return nil, fmt.Errorf("alter partition reassignments: %d results for %d partitions", len(resp.Results), len(ras))
	}
	out := make([]error, len(ras))
	for i, r := range resp.Results {
		out[i] = fromPBError(r.Error)
	}
	return out, nil
}
