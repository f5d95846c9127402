package controller

import (
	"maps"
	"slices"

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

func scramToPB(u metadata.ScramCredential) *pb.ScramCredential {
	return &pb.ScramCredential{User: u.User, Mechanism: u.Mechanism, Salt: u.Salt, StoredKey: u.StoredKey,
		ServerKey: u.ServerKey, Iterations: u.Iterations}
}
