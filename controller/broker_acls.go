package controller

import (
	"context"

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
	return perItem("ACL bindings", len(bindings), resp.Results, fromPBError)
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
	return perItem("ACL filters", len(filters), resp.Results, func(r *pb.DeleteAclsFilterResult) metadata.ACLDeletion {
		return metadata.ACLDeletion{Err: fromPBError(r.Error), Deleted: aclsFromPB(r.Deleted)}
	})
}

var _ metadata.ACLStore = (*BrokerClient)(nil)
