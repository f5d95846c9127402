package controller

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

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

func (d aclDeletions) any() bool {
	for _, bs := range d.deleted {
		if len(bs) > 0 {
			return true
		}
	}
	return false
}
