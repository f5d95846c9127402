package controller

import (
	"context"

	"github.com/shalelog/shale/metadata"

	pb "github.com/shalelog/shale/controller/proto"
)

// AlterClientQuotas changes client quotas through the controller (metadata.QuotaStore).
func (c *BrokerClient) AlterClientQuotas(ctx context.Context, alts []metadata.QuotaAlteration, validateOnly bool) ([]error, error) {
	req := &pb.AlterClientQuotasRequest{ValidateOnly: validateOnly}
	for _, a := range alts {
		ent := &pb.ClientQuotaAlteration{Entity: quotaEntityToPB(a.Entity)}
		for _, op := range a.Ops {
			ent.Ops = append(ent.Ops, &pb.ClientQuotaOp{Key: op.Key, Value: op.Value, Remove: op.Remove})
		}
		req.Entries = append(req.Entries, ent)
	}
	resp, err := send(ctx, c.q, c.cfg.RequestTimeout, pb.ControllerClient.AlterClientQuotas, req)
	if err != nil {
		return nil, err
	}
	return errorList(len(alts), resp.Errors, nil), nil
}
