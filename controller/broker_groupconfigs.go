package controller

import (
	"context"

	"github.com/shalelog/shale/metadata"

	pb "github.com/shalelog/shale/controller/proto"
)

var _ metadata.GroupConfigStore = (*BrokerClient)(nil)

// AlterGroupConfigs changes a group's configs through the controller
// (metadata.GroupConfigStore).
func (c *BrokerClient) AlterGroupConfigs(ctx context.Context, group string, ops []metadata.ConfigOp, incremental, validateOnly bool) error {
	req := &pb.AlterGroupConfigsRequest{Group: group, Incremental: incremental, ValidateOnly: validateOnly}
	for _, op := range ops {
		req.Ops = append(req.Ops, &pb.ConfigOp{Name: op.Name, Value: op.Value, Op: int32(op.Op)})
	}
	_, err := rpc(ctx, c, pb.ControllerClient.AlterGroupConfigs, req)
	return err
}
