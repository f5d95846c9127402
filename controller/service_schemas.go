package controller

import (
	"context"
	"errors"

	"github.com/shalelog/shale/metadata"

	pb "github.com/shalelog/shale/controller/proto"
)

func (v *service) AlterSchemaRegistry(ctx context.Context, req *pb.AlterSchemaRegistryRequest) (*pb.AlterSchemaRegistryResponse, error) {
	if _, err := v.s.awaitSession(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	if req.Record == nil {
		return &pb.AlterSchemaRegistryResponse{RegistryErrorCode: metadata.RegistryInternalError, Message: "no record"}, nil
	}
	res, _, err := v.s.propose(ctx, &pb.Record{Record: &pb.Record_SchemaRegistry{SchemaRegistry: req.Record}})
	if err != nil {
		return nil, v.rpcError(err)
	}
	resp := &pb.AlterSchemaRegistryResponse{}
	if res.err != nil {
		var re *metadata.RegistryError
		if errors.As(res.err, &re) {
			resp.RegistryErrorCode, resp.Message = int32(re.Code), re.Message
		} else {
			resp.RegistryErrorCode, resp.Message = metadata.RegistryStoreError, res.err.Error()
		}
		return resp, nil
	}
	if r, ok := res.value.(metadata.RegistryResult); ok {
		resp.SchemaId, resp.Version, resp.Versions = r.ID, r.Version, r.Versions
	}
	return resp, nil
}
