package controller

import (
	"context"
	"errors"
	"fmt"

	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/security/acl"

	pb "github.com/shalelog/shale/controller/proto"
)

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
