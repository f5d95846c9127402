package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/security/acl"
)

// CreateACLs stores ACL bindings (CreateAcls). It returns one error per binding, nil for
// a stored one, and an error for the request as a whole when it got no answer.
func (c *Client) CreateACLs(ctx context.Context, bindings []acl.Binding) ([]error, error) {
	req := kmsg.NewPtrCreateACLsRequest()
	for _, b := range bindings {
		cr := kmsg.NewCreateACLsRequestCreation()
		cr.ResourceType, cr.ResourceName, cr.ResourcePatternType = b.ResourceType, b.ResourceName, b.PatternType
		cr.Principal, cr.Host, cr.Operation, cr.PermissionType = b.Principal, b.Host, b.Operation, b.Permission
		req.Creations = append(req.Creations, cr)
	}
	resp, err := req.RequestWith(ctx, c.kc)
	if err != nil {
		return nil, fmt.Errorf("create ACLs: %w", err)
	}
	if len(resp.Results) != len(bindings) {
		return nil, fmt.Errorf("create ACLs: %d results for %d bindings", len(resp.Results), len(bindings))
	}
	out := make([]error, len(bindings))
	for i, r := range resp.Results {
		out[i] = codeError(r.ErrorCode, r.ErrorMessage)
	}
	return out, nil
}

// ListACLs returns the bindings a filter matches (DescribeAcls).
func (c *Client) ListACLs(ctx context.Context, f acl.Filter) ([]acl.Binding, error) {
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType, req.ResourceName, req.ResourcePatternType = f.ResourceType, f.ResourceName, f.PatternType
	req.Principal, req.Host, req.Operation, req.PermissionType = f.Principal, f.Host, f.Operation, f.Permission
	resp, err := req.RequestWith(ctx, c.kc)
	if err != nil {
		return nil, fmt.Errorf("list ACLs: %w", err)
	}
	if err := codeError(resp.ErrorCode, resp.ErrorMessage); err != nil {
		return nil, fmt.Errorf("list ACLs: %w", err)
	}
	var out []acl.Binding
	for _, r := range resp.Resources {
		for _, a := range r.ACLs {
			out = append(out, acl.Binding{ResourceType: r.ResourceType, ResourceName: r.ResourceName, PatternType: r.ResourcePatternType,
				Principal: a.Principal, Host: a.Host, Operation: a.Operation, Permission: a.PermissionType})
		}
	}
	return out, nil
}

// DeleteACLs removes every binding the filters match (DeleteAcls) and returns them.
func (c *Client) DeleteACLs(ctx context.Context, filters []acl.Filter) ([]acl.Binding, error) {
	req := kmsg.NewPtrDeleteACLsRequest()
	for _, f := range filters {
		df := kmsg.NewDeleteACLsRequestFilter()
		df.ResourceType, df.ResourceName, df.ResourcePatternType = f.ResourceType, f.ResourceName, f.PatternType
		df.Principal, df.Host, df.Operation, df.PermissionType = f.Principal, f.Host, f.Operation, f.Permission
		req.Filters = append(req.Filters, df)
	}
	resp, err := req.RequestWith(ctx, c.kc)
	if err != nil {
		return nil, fmt.Errorf("delete ACLs: %w", err)
	}
	var out []acl.Binding
	var errs []error
	for _, r := range resp.Results {
		if err := codeError(r.ErrorCode, r.ErrorMessage); err != nil {
			errs = append(errs, err)
			continue
		}
		for _, m := range r.MatchingACLs {
			if err := codeError(m.ErrorCode, m.ErrorMessage); err != nil {
				errs = append(errs, err)
				continue
			}
			out = append(out, acl.Binding{ResourceType: m.ResourceType, ResourceName: m.ResourceName, PatternType: m.ResourcePatternType,
				Principal: m.Principal, Host: m.Host, Operation: m.Operation, Permission: m.PermissionType})
		}
	}
	if err := errors.Join(errs...); err != nil {
		return out, fmt.Errorf("delete ACLs: %w", err)
	}
	return out, nil
}

// codeError turns a response's error code and message into an error wrapping the
// *kerr.Error, nil for code 0.
func codeError(code int16, msg *string) error {
	err := kerr.ErrorForCode(code)
	if err == nil || msg == nil || *msg == "" {
		return err
	}
	return fmt.Errorf("%w: %s", err, *msg)
}
