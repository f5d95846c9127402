package controller

import (
	"context"

	"github.com/shalelog/shale/metadata"

	pb "github.com/shalelog/shale/controller/proto"
)

var _ metadata.SchemaRegistryStore = (*BrokerClient)(nil)

// AlterSchemaRegistry commits one registry write through the active controller.
func (c *BrokerClient) AlterSchemaRegistry(ctx context.Context, op metadata.RegistryOp) (metadata.RegistryResult, error) {
	rec, err := registryOpToPB(op)
	if err != nil {
		return metadata.RegistryResult{}, err
	}
	resp, err := send(ctx, c.q, c.cfg.RequestTimeout, pb.ControllerClient.AlterSchemaRegistry, &pb.AlterSchemaRegistryRequest{Record: rec})
	if err != nil {
		return metadata.RegistryResult{}, err
	}
	if resp.RegistryErrorCode != 0 {
		return metadata.RegistryResult{}, &metadata.RegistryError{Code: int(resp.RegistryErrorCode), Message: resp.Message}
	}
	return metadata.RegistryResult{ID: resp.SchemaId, Version: resp.Version, Versions: resp.Versions}, nil
}
