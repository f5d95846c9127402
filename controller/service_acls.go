package controller

import (
	"context"

	"github.com/shalelog/shale/security/acl"

	pb "github.com/shalelog/shale/controller/proto"
)

func (v *service) CreateAcls(ctx context.Context, req *pb.CreateAclsRequest) (*pb.CreateAclsResponse, error) {
	if _, err := v.s.awaitSession(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	full := &pb.Record{Record: &pb.Record_CreateAcls{CreateAcls: &pb.CreateAclsRecord{Acls: req.Acls}}}
	// Creating only bindings that exist already (or are invalid) is answered without
	// growing the log.
	res := v.s.fsm.dryRun(full)
	if res.err == nil && !aclCreateWouldChange(v.s.fsm.image().ACLs, req.Acls, res.value) {
		return createAclsResponse(res), nil
	}
	res, _, err := v.s.propose(ctx, full)
	if err != nil {
		return nil, v.rpcError(err)
	}
	if n := len(req.Acls); n > 0 && res.err == nil {
		v.s.log.Info("ACLs created", "bindings", n)
	}
	return createAclsResponse(res), nil
}

func aclCreateWouldChange(now *acl.Set, bs []*pb.AclBinding, value any) bool {
	results, _ := value.(aclResults)
	for i, b := range bs {
		if i < len(results) && results[i] == nil && !now.Contains(aclFromPB(b)) {
			return true
		}
	}
	return false
}

func createAclsResponse(res applyResult) *pb.CreateAclsResponse {
	if res.err != nil {
		return &pb.CreateAclsResponse{Error: toPBError(res.err)}
	}
	results, _ := res.value.(aclResults)
	resp := &pb.CreateAclsResponse{Results: make([]*pb.Error, len(results))}
	for i, err := range results {
		resp.Results[i] = toPBError(err)
	}
	return resp
}

func (v *service) DeleteAcls(ctx context.Context, req *pb.DeleteAclsRequest) (*pb.DeleteAclsResponse, error) {
	if _, err := v.s.awaitSession(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	full := &pb.Record{Record: &pb.Record_DeleteAcls{DeleteAcls: &pb.DeleteAclsRecord{Filters: req.Filters}}}
	res := v.s.fsm.dryRun(full)
	if del, ok := res.value.(aclDeletions); res.err != nil || !ok || del.any() {
		var err error
		if res, _, err = v.s.propose(ctx, full); err != nil {
			return nil, v.rpcError(err)
		}
	}
	if res.err != nil {
		return &pb.DeleteAclsResponse{Error: toPBError(res.err)}, nil
	}
	del, _ := res.value.(aclDeletions)
	resp := &pb.DeleteAclsResponse{Results: make([]*pb.DeleteAclsFilterResult, len(del.errs))}
	n := 0
	for i := range del.errs {
		resp.Results[i] = &pb.DeleteAclsFilterResult{Error: toPBError(del.errs[i]), Deleted: aclsToPB(del.deleted[i])}
		n += len(del.deleted[i])
	}
	if n > 0 {
		v.s.log.Info("ACLs deleted", "bindings", n)
	}
	return resp, nil
}
