package protocol

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/security/acl"
)

// DescribeAcls (29), CreateAcls (30) and DeleteAcls (31). Bindings are stored through the
// controller; DescribeAcls answers from this broker's image, and the writes answer once
// this broker's image shows them, so that the next request through it is decided by them.

// aclWriteTimeout bounds a CreateAcls or DeleteAcls, which carry no timeout of their own.
const aclWriteTimeout = 30 * time.Second

// aclAdminError is what an ACL request gets before any binding is looked at: Kafka's
// SECURITY_DISABLED without an authorizer, CLUSTER_AUTHORIZATION_FAILED without op on
// the cluster.
func (s *Server) aclAdminError(r *Request, op kmsg.ACLOperation) error {
	if !s.authorizing() {
		return fmt.Errorf("%w: no authorizer is configured (authorizer.class.name)", kerr.SecurityDisabled)
	}
	if !s.allowedCluster(r, op) {
		return errClusterDenied
	}
	return nil
}

func (s *Server) aclStore() (metadata.ACLStore, error) {
	st, ok := s.deps.Meta.(metadata.ACLStore)
	if !ok {
		return nil, fmt.Errorf("%w: this broker's metadata store cannot change ACLs", kerr.SecurityDisabled)
	}
	return st, nil
}

// literalBefore1 is the pattern type of v0 requests, which have no field for it.
func literalBefore1(version int16, pt kmsg.ACLResourcePatternType) kmsg.ACLResourcePatternType {
	if version < 1 {
		return kmsg.ACLResourcePatternTypeLiteral
	}
	return pt
}

func (s *Server) handleDescribeACLs(_ context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.DescribeACLsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	f := acl.Filter{ResourceType: req.ResourceType, ResourceName: req.ResourceName,
		PatternType: literalBefore1(r.Version, req.ResourcePatternType), Principal: req.Principal, Host: req.Host,
		Operation: req.Operation, Permission: req.PermissionType}
	err := s.aclAdminError(r, opDescribe)
	if err == nil {
		err = f.Validate()
	}
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
		return Result{Resp: resp}
	}
	// Bindings come sorted by resource, so each resource's entries are consecutive.
	for _, b := range s.image().ACLs.Matching(f) {
		if r.Version < 1 && b.PatternType != kmsg.ACLResourcePatternTypeLiteral {
			continue // v0 cannot express other patterns
		}
		n := len(resp.Resources)
		if n == 0 || resp.Resources[n-1].ResourceType != b.ResourceType || resp.Resources[n-1].ResourceName != b.ResourceName ||
			resp.Resources[n-1].ResourcePatternType != b.PatternType {
			res := kmsg.NewDescribeACLsResponseResource()
			res.ResourceType, res.ResourceName, res.ResourcePatternType = b.ResourceType, b.ResourceName, b.PatternType
			resp.Resources = append(resp.Resources, res)
			n++
		}
		a := kmsg.NewDescribeACLsResponseResourceACL()
		a.Principal, a.Host, a.Operation, a.PermissionType = b.Principal, b.Host, b.Operation, b.Permission
		resp.Resources[n-1].ACLs = append(resp.Resources[n-1].ACLs, a)
	}
	return Result{Resp: resp}
}

func (s *Server) handleCreateACLs(ctx context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.CreateACLsRequest)
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	errs := make([]error, len(req.Creations))
	fail := func(err error) Result {
		for i := range errs {
			errs[i] = err
		}
		return createACLsResult(resp, errs)
	}
	if err := s.aclAdminError(r, opAlter); err != nil {
		return fail(err)
	}
	st, err := s.aclStore()
	if err != nil {
		return fail(err)
	}
	var valid []acl.Binding
	var at []int
	for i, c := range req.Creations {
		b := acl.Binding{ResourceType: c.ResourceType, ResourceName: c.ResourceName,
			PatternType: literalBefore1(r.Version, c.ResourcePatternType), Principal: c.Principal, Host: c.Host,
			Operation: c.Operation, Permission: c.PermissionType}
		if errs[i] = b.Validate(); errs[i] == nil {
			valid = append(valid, b)
			at = append(at, i)
		}
	}
	if len(valid) == 0 {
		return createACLsResult(resp, errs)
	}
	ctx, cancel := context.WithTimeout(ctx, aclWriteTimeout)
	defer cancel()
	results, err := st.CreateACLs(ctx, valid)
	if err != nil {
		return fail(err)
	}
	var stored []acl.Binding
	for j, e := range results {
		errs[at[j]] = e
		if e == nil {
			stored = append(stored, valid[j])
		}
	}
	s.awaitVisible(ctx, func(im *metadata.Image) bool {
		for _, b := range stored {
			if !im.ACLs.Contains(b) {
				return false
			}
		}
		return true
	})
	s.lg.Info("ACLs created", "audit", "authz", "principal", s.principalOf(r), "client", addrString(r), "bindings", len(stored))
	return createACLsResult(resp, errs)
}

func createACLsResult(resp *kmsg.CreateACLsResponse, errs []error) Result {
	for _, err := range errs {
		res := kmsg.NewCreateACLsResponseResult()
		res.ErrorCode, res.ErrorMessage = errorCode(err), errorMessage(err)
		resp.Results = append(resp.Results, res)
	}
	return Result{Resp: resp}
}

func (s *Server) handleDeleteACLs(ctx context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.DeleteACLsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	out := make([]metadata.ACLDeletion, len(req.Filters))
	fail := func(err error) Result {
		for i := range out {
			out[i] = metadata.ACLDeletion{Err: err}
		}
		return deleteACLsResult(resp, out)
	}
	if err := s.aclAdminError(r, opAlter); err != nil {
		return fail(err)
	}
	st, err := s.aclStore()
	if err != nil {
		return fail(err)
	}
	var valid []acl.Filter
	var at []int
	for i, f := range req.Filters {
		flt := acl.Filter{ResourceType: f.ResourceType, ResourceName: f.ResourceName,
			PatternType: literalBefore1(r.Version, f.ResourcePatternType), Principal: f.Principal, Host: f.Host,
			Operation: f.Operation, Permission: f.PermissionType}
		if out[i].Err = flt.Validate(); out[i].Err == nil {
			valid = append(valid, flt)
			at = append(at, i)
		}
	}
	if len(valid) == 0 {
		return deleteACLsResult(resp, out)
	}
	ctx, cancel := context.WithTimeout(ctx, aclWriteTimeout)
	defer cancel()
	results, err := st.DeleteACLs(ctx, valid)
	if err != nil {
		return fail(err)
	}
	var gone []acl.Binding
	for j, d := range results {
		out[at[j]] = d
		gone = append(gone, d.Deleted...)
	}
	s.awaitVisible(ctx, func(im *metadata.Image) bool {
		for _, b := range gone {
			if im.ACLs.Contains(b) {
				return false
			}
		}
		return true
	})
	s.lg.Info("ACLs deleted", "audit", "authz", "principal", s.principalOf(r), "client", addrString(r), "bindings", len(gone))
	return deleteACLsResult(resp, out)
}

func deleteACLsResult(resp *kmsg.DeleteACLsResponse, out []metadata.ACLDeletion) Result {
	for _, d := range out {
		res := kmsg.NewDeleteACLsResponseResult()
		res.ErrorCode, res.ErrorMessage = errorCode(d.Err), errorMessage(d.Err)
		for _, b := range d.Deleted {
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType, m.ResourceName, m.ResourcePatternType = b.ResourceType, b.ResourceName, b.PatternType
			m.Principal, m.Host, m.Operation, m.PermissionType = b.Principal, b.Host, b.Operation, b.Permission
			res.MatchingACLs = append(res.MatchingACLs, m)
		}
		resp.Results = append(resp.Results, res)
	}
	return Result{Resp: resp}
}

func addrString(r *Request) string {
	if r.Remote == nil {
		return ""
	}
	return r.Remote.String()
}

// The ACL APIs: every version kmsg knows. Without an authorizer they answer
// SECURITY_DISABLED rather than not being advertised, as Kafka does.
var (
	describeACLsAPI = api{key: kmsg.DescribeACLs, min: 0, max: 3, handle: (*Server).handleDescribeACLs}
	createACLsAPI   = api{key: kmsg.CreateACLs, min: 0, max: 3, handle: (*Server).handleCreateACLs}
	deleteACLsAPI   = api{key: kmsg.DeleteACLs, min: 0, max: 3, handle: (*Server).handleDeleteACLs}
)
