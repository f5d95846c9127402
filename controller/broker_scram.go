package controller

import (
	"cmp"
	"context"
	"slices"

	"github.com/shalelog/shale/metadata"

	pb "github.com/shalelog/shale/controller/proto"
)

var _ metadata.ScramStore = (*BrokerClient)(nil)

// AlterScramCredentials commits credential changes through the quorum.
func (c *BrokerClient) AlterScramCredentials(ctx context.Context, upserts []metadata.ScramCredential, deletions []metadata.ScramCredentialKey) ([]error, []error, error) {
	req := &pb.AlterScramCredentialsRequest{}
	for _, u := range upserts {
		req.Upserts = append(req.Upserts, scramToPB(u))
	}
	for _, d := range deletions {
		req.Deletions = append(req.Deletions, &pb.ScramCredentialKey{User: d.User, Mechanism: d.Mechanism})
	}
	resp, err := rpc(ctx, c, pb.ControllerClient.AlterScramCredentials, req)
	if err != nil {
		return nil, nil, err
	}
	errsOf := func(pbs []*pb.Error, n int) []error {
		out := make([]error, n)
		for i := range out {
			if i < len(pbs) {
				out[i] = fromPBError(pbs[i])
			}
		}
		return out
	}
	return errsOf(resp.UpsertErrors, len(upserts)), errsOf(resp.DeletionErrors, len(deletions)), nil
}

// ScramCredentials reads credentials from the active controller.
func (c *BrokerClient) ScramCredentials(ctx context.Context, users []string) ([]metadata.ScramCredential, error) {
	resp, err := rpc(ctx, c, pb.ControllerClient.DescribeScramCredentials, &pb.DescribeScramCredentialsRequest{Users: users})
	if err != nil {
		return nil, err
	}
	out := make([]metadata.ScramCredential, 0, len(resp.Credentials))
	for _, pc := range resp.Credentials {
		out = append(out, metadata.ScramCredential{User: pc.User, Mechanism: pc.Mechanism, Salt: pc.Salt,
			StoredKey: pc.StoredKey, ServerKey: pc.ServerKey, Iterations: pc.Iterations})
	}
	slices.SortFunc(out, func(a, b metadata.ScramCredential) int {
		return cmp.Or(cmp.Compare(a.User, b.User), cmp.Compare(a.Mechanism, b.Mechanism))
	})
	return out, nil
}
