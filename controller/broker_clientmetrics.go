package controller

import (
	"context"

	"github.com/shalelog/shale/metadata"

	pb "github.com/shalelog/shale/controller/proto"
)

// AlterClientMetrics changes a client metrics subscription through the controller
// (metadata.ClientMetricsStore).
func (c *BrokerClient) AlterClientMetrics(ctx context.Context, name string, ops []metadata.ConfigOp, incremental, validateOnly bool) error {
	req := &pb.AlterClientMetricsRequest{Name: name, Incremental: incremental, ValidateOnly: validateOnly}
	for _, op := range ops {
		req.Ops = append(req.Ops, &pb.ConfigOp{Name: op.Name, Value: op.Value, Op: int32(op.Op)})
	}
	_, err := rpc(ctx, c, pb.ControllerClient.AlterClientMetrics, req)
	return err
}
