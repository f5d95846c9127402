package controller

import (
	"context"

	pb "github.com/shalelog/shale/controller/proto"
)

func (v *service) AlterClientQuotas(ctx context.Context, req *pb.AlterClientQuotasRequest) (*pb.AlterClientQuotasResponse, error) {
	if _, err := v.s.awaitSession(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	v.s.adminMu.Lock()
	defer v.s.adminMu.Unlock()
	resp := &pb.AlterClientQuotasResponse{Errors: make([]*pb.Error, len(req.Entries))}
	cur := v.s.fsm.image().ClientQuotas
	rec := &pb.ClientQuotasRecord{}
	for i, ent := range req.Entries {
		e := quotaEntityFromPB(ent.Entity)
		if err := validateQuotaEntity(e); err != nil {
			resp.Errors[i] = toPBError(err)
			continue
		}
		values, err := applyQuotaOps(cur[e], ent.Ops)
		if err != nil {
			resp.Errors[i] = toPBError(err)
			continue
		}
		// Later entries for the same entity see the earlier ones.
		cur = cur.With(e, values)
		rec.Quotas = append(rec.Quotas, quotaStateToPB(e, values))
	}
	if req.ValidateOnly || len(rec.Quotas) == 0 {
		return resp, nil
	}
	if _, _, err := v.s.propose(ctx, &pb.Record{Record: &pb.Record_ClientQuotas{ClientQuotas: rec}}); err != nil {
		return nil, v.rpcError(err)
	}
	return resp, nil
}
