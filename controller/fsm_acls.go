package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/security/acl"

	pb "github.com/shalelog/shale/controller/proto"
)

// ACL bindings live in the image (metadata.Image.ACLs), so that brokers authorize from
// the same committed state the controller stored, in the same order as every other change.

// aclChange is what one record does to the ACLs.
type aclChange struct {
	created []acl.Binding
	deleted []acl.Binding
}

func (a *aclChange) empty() bool { return len(a.created) == 0 && len(a.deleted) == 0 }

func (a *aclChange) fill(d *pb.MetadataDelta) {
	d.AclsCreated = aclsToPB(a.created)
	d.AclsDeleted = aclsToPB(a.deleted)
}

func aclToPB(b acl.Binding) *pb.AclBinding {
	return &pb.AclBinding{ResourceType: int32(b.ResourceType), ResourceName: b.ResourceName, PatternType: int32(b.PatternType),
		Principal: b.Principal, Host: b.Host, Operation: int32(b.Operation), Permission: int32(b.Permission)}
}

func aclFromPB(b *pb.AclBinding) acl.Binding {
	return acl.Binding{ResourceType: kmsg.ACLResourceType(b.ResourceType), ResourceName: b.ResourceName,
		PatternType: kmsg.ACLResourcePatternType(b.PatternType), Principal: b.Principal, Host: b.Host,
		Operation: kmsg.ACLOperation(b.Operation), Permission: kmsg.ACLPermissionType(b.Permission)}
}

func aclsToPB(bs []acl.Binding) []*pb.AclBinding {
	if len(bs) == 0 {
		return nil
	}
	out := make([]*pb.AclBinding, len(bs))
	for i, b := range bs {
		out[i] = aclToPB(b)
	}
	return out
}

func aclsFromPB(bs []*pb.AclBinding) []acl.Binding {
	out := make([]acl.Binding, len(bs))
	for i, b := range bs {
		out[i] = aclFromPB(b)
	}
	return out
}

func aclFilterToPB(f acl.Filter) *pb.AclFilter {
	return &pb.AclFilter{ResourceType: int32(f.ResourceType), ResourceName: f.ResourceName, PatternType: int32(f.PatternType),
		Principal: f.Principal, Host: f.Host, Operation: int32(f.Operation), Permission: int32(f.Permission)}
}

func aclFilterFromPB(f *pb.AclFilter) acl.Filter {
	return acl.Filter{ResourceType: kmsg.ACLResourceType(f.ResourceType), ResourceName: f.ResourceName,
		PatternType: kmsg.ACLResourcePatternType(f.PatternType), Principal: f.Principal, Host: f.Host,
		Operation: kmsg.ACLOperation(f.Operation), Permission: kmsg.ACLPermissionType(f.Permission)}
}

// applyACLDelta returns the ACLs after a delta, nil when none are left.
func applyACLDelta(s *acl.Set, d *pb.MetadataDelta) *acl.Set {
	next := s.With(aclsFromPB(d.AclsCreated), aclsFromPB(d.AclsDeleted))
	if next.Len() == 0 {
		return nil
	}
	return next
}

// aclsNow returns the ACLs as of this change.
func (c *change) aclsNow() *acl.Set {
	if c.acls.empty() {
		return c.base.ACLs
	}
	return c.base.ACLs.With(c.acls.created, c.acls.deleted)
}

// aclResults is CreateAcls' outcome: one error (nil: stored) per binding.
type aclResults []error

// applyCreateAcls stores every valid binding of the record; a binding stored already
// succeeds without a change, as in Kafka.
func (f *fsm) applyCreateAcls(c *change, r *pb.CreateAclsRecord) applyResult {
	now := c.aclsNow()
	res := make(aclResults, len(r.Acls))
	for i, pbb := range r.Acls {
		b := aclFromPB(pbb)
		if err := b.Validate(); err != nil {
			res[i] = err
			continue
		}
		if !now.Contains(b) && !slices.Contains(c.acls.created, b) {
			c.acls.created = append(c.acls.created, b)
		}
	}
	return applyResult{value: res}
}

// aclDeletions is DeleteAcls' outcome: per filter, the bindings it removed or its error.
type aclDeletions struct {
	deleted [][]acl.Binding
	errs    []error
}

// applyDeleteAcls removes every binding any filter matches; a binding two filters match
// is reported under both, as Kafka does.
func (f *fsm) applyDeleteAcls(c *change, r *pb.DeleteAclsRecord) applyResult {
	now := c.aclsNow()
	res := aclDeletions{deleted: make([][]acl.Binding, len(r.Filters)), errs: make([]error, len(r.Filters))}
	gone := map[acl.Binding]bool{}
	for i, pf := range r.Filters {
		flt := aclFilterFromPB(pf)
		if err := flt.Validate(); err != nil {
			res.errs[i] = err
			continue
		}
		res.deleted[i] = now.Matching(flt)
		for _, b := range res.deleted[i] {
			if !gone[b] {
				gone[b] = true
				c.acls.deleted = append(c.acls.deleted, b)
			}
		}
	}
	return applyResult{value: res}
}

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

func (d aclDeletions) any() bool {
	for _, bs := range d.deleted {
		if len(bs) > 0 {
			return true
		}
	}
	return false
}

// CreateACLs stores ACL bindings through the controller; see metadata.ACLStore.
func (c *BrokerClient) CreateACLs(ctx context.Context, bindings []acl.Binding) ([]error, error) {
	req := &pb.CreateAclsRequest{Acls: aclsToPB(bindings)}
	resp, err := rpc(ctx, c, pb.ControllerClient.CreateAcls, req)
	if err != nil {
		return nil, err
	}
	if len(resp.Results) != len(bindings) {
		return nil, fmt.Errorf("controller answered %d of %d ACL creations", len(resp.Results), len(bindings))
	}
	out := make([]error, len(bindings))
	for i, e := range resp.Results {
		out[i] = fromPBError(e)
	}
	return out, nil
}

// DeleteACLs removes the bindings the filters match through the controller; see
// metadata.ACLStore.
func (c *BrokerClient) DeleteACLs(ctx context.Context, filters []acl.Filter) ([]metadata.ACLDeletion, error) {
	req := &pb.DeleteAclsRequest{Filters: make([]*pb.AclFilter, len(filters))}
	for i, f := range filters {
		req.Filters[i] = aclFilterToPB(f)
	}
	resp, err := rpc(ctx, c, pb.ControllerClient.DeleteAcls, req)
	if err != nil {
		return nil, err
	}
	if len(resp.Results) != len(filters) {
		return nil, errors.New("controller answered a different number of ACL filters")
	}
	out := make([]metadata.ACLDeletion, len(filters))
	for i, r := range resp.Results {
		out[i] = metadata.ACLDeletion{Err: fromPBError(r.Error), Deleted: aclsFromPB(r.Deleted)}
	}
	return out, nil
}

var _ metadata.ACLStore = (*BrokerClient)(nil)
