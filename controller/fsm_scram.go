package controller

import (
	"cmp"
	"context"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/metadata"

	pb "github.com/shalelog/shale/controller/proto"
)

// SCRAM credentials (KIP-554) live in the FSM beside the image rather than in it: only
// the broker authenticating a client needs them, and it asks the active controller
// (DescribeScramCredentials), so they never travel in the metadata stream to every broker.

// applyScramCredentials applies deletions, then upserts. Each credential map is replaced,
// never modified, so snapshots may share them.
func (f *fsm) applyScramCredentials(_ *change, r *pb.ScramCredentialsRecord) applyResult {
	if f.scram == nil {
		f.scram = map[string]map[string]*pb.ScramCredential{}
	}
	touched := map[string]map[string]*pb.ScramCredential{}
	get := func(user string) map[string]*pb.ScramCredential {
		if m, ok := touched[user]; ok {
			return m
		}
		m := maps.Clone(f.scram[user])
		if m == nil {
			m = map[string]*pb.ScramCredential{}
		}
		touched[user] = m
		return m
	}
	for _, d := range r.Deletions {
		delete(get(d.User), d.Mechanism)
	}
	for _, u := range r.Upserts {
		get(u.User)[u.Mechanism] = u
	}
	for user, m := range touched {
		if len(m) == 0 {
			delete(f.scram, user)
		} else {
			f.scram[user] = m
		}
	}
	return applyResult{}
}

// scramCredentials returns the credentials of users (all when empty), sorted.
func (f *fsm) scramCredentials(users []string) []*pb.ScramCredential {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var out []*pb.ScramCredential
	add := func(m map[string]*pb.ScramCredential) {
		for _, mech := range slices.Sorted(maps.Keys(m)) {
			out = append(out, m[mech])
		}
	}
	if len(users) == 0 {
		for _, u := range slices.Sorted(maps.Keys(f.scram)) {
			add(f.scram[u])
		}
		return out
	}
	for _, u := range users {
		add(f.scram[u])
	}
	return out
}

// scramSnapshotLocked lists every credential for a snapshot; callers hold f.mu.
func (f *fsm) scramSnapshotLocked() []*pb.ScramCredential {
	var out []*pb.ScramCredential
	for _, u := range slices.Sorted(maps.Keys(f.scram)) {
		for _, mech := range slices.Sorted(maps.Keys(f.scram[u])) {
			out = append(out, f.scram[u][mech])
		}
	}
	return out
}

func restoreScram(m map[string]map[string]*pb.ScramCredential, c *pb.ScramCredential) {
	if m[c.User] == nil {
		m[c.User] = map[string]*pb.ScramCredential{}
	}
	m[c.User][c.Mechanism] = c
}

func (v *service) AlterScramCredentials(ctx context.Context, req *pb.AlterScramCredentialsRequest) (*pb.AlterScramCredentialsResponse, error) {
	if _, err := v.s.awaitSession(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	resp := &pb.AlterScramCredentialsResponse{
		DeletionErrors: make([]*pb.Error, len(req.Deletions)),
		UpsertErrors:   make([]*pb.Error, len(req.Upserts)),
	}
	// A deletion of a credential that does not exist fails alone, as in Kafka; it is
	// checked against the committed state before proposing.
	rec := &pb.ScramCredentialsRecord{Upserts: req.Upserts}
	existing := map[metadata.ScramCredentialKey]bool{}
	for _, c := range v.s.fsm.scramCredentials(nil) {
		existing[metadata.ScramCredentialKey{User: c.User, Mechanism: c.Mechanism}] = true
	}
	for i, d := range req.Deletions {
		if !existing[metadata.ScramCredentialKey{User: d.User, Mechanism: d.Mechanism}] {
			resp.DeletionErrors[i] = toPBError(kafkaErrorf(kerr.ResourceNotFound, "user %q has no %s credential", d.User, d.Mechanism))
			continue
		}
		rec.Deletions = append(rec.Deletions, d)
	}
	if len(rec.Deletions) == 0 && len(rec.Upserts) == 0 {
		return resp, nil
	}
	res, _, err := v.s.propose(ctx, &pb.Record{Record: &pb.Record_ScramCredentials{ScramCredentials: rec}})
	if err != nil {
		return nil, v.rpcError(err)
	}
	if res.err != nil {
		resp.Error = toPBError(res.err)
	}
	return resp, nil
}

func (v *service) DescribeScramCredentials(ctx context.Context, req *pb.DescribeScramCredentialsRequest) (*pb.DescribeScramCredentialsResponse, error) {
	if _, err := v.s.awaitSession(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	if err := v.s.verifyLeader(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	return &pb.DescribeScramCredentialsResponse{Credentials: v.s.fsm.scramCredentials(req.Users)}, nil
}

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

func scramToPB(u metadata.ScramCredential) *pb.ScramCredential {
	return &pb.ScramCredential{User: u.User, Mechanism: u.Mechanism, Salt: u.Salt, StoredKey: u.StoredKey,
		ServerKey: u.ServerKey, Iterations: u.Iterations}
}
