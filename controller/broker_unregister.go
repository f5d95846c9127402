package controller

import (
	"context"

	pb "github.com/shalelog/shale/controller/proto"
)

// UnregisterBroker removes a broker's registration.
func (c *BrokerClient) UnregisterBroker(ctx context.Context, id int32, force bool) error {
	_, err := rpc(ctx, c, pb.ControllerClient.UnregisterBroker, &pb.UnregisterBrokerRequest{BrokerId: id, Force: force})
	return err
}
