package controller

import (
	"bytes"
	"io"
	"log/slog"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/shalelog/shale/controller/proto"
)

func scramRec(upserts []*pb.ScramCredential, deletions ...*pb.ScramCredentialKey) *pb.Record {
	return &pb.Record{Record: &pb.Record_ScramCredentials{ScramCredentials: &pb.ScramCredentialsRecord{Upserts: upserts, Deletions: deletions}}}
}

func cred(user, mech string, iters int32) *pb.ScramCredential {
	return &pb.ScramCredential{User: user, Mechanism: mech, Salt: []byte("salt-" + user), StoredKey: []byte("sk"), ServerKey: []byte("svk"), Iterations: iters}
}

// SCRAM credentials are upserted, replaced and deleted by record, survive a snapshot,
// and a snapshot taken before a change is not changed by it.
func TestScramCredentialsRecordsAndSnapshot(t *testing.T) {
	h := newHarness(t)
	h.apply(scramRec([]*pb.ScramCredential{cred("alice", "SCRAM-SHA-256", 4096), cred("alice", "SCRAM-SHA-512", 4096), cred("bob", "SCRAM-SHA-512", 8192)}))
	h.apply(scramRec([]*pb.ScramCredential{cred("alice", "SCRAM-SHA-512", 16384)}, &pb.ScramCredentialKey{User: "bob", Mechanism: "SCRAM-SHA-512"}))
	got := h.f.scramCredentials(nil)
	if len(got) != 2 || got[0].Mechanism != "SCRAM-SHA-256" || got[1].Iterations != 16384 {
		t.Fatalf("credentials %v", got)
	}
	if bob := h.f.scramCredentials([]string{"bob"}); len(bob) != 0 {
		t.Fatalf("bob survived his deletion: %v", bob)
	}
	snap, err := h.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	h.apply(scramRec(nil, &pb.ScramCredentialKey{User: "alice", Mechanism: "SCRAM-SHA-256"}))
	var buf bytes.Buffer
	if err := snap.(*fsmSnapshot).write(&buf); err != nil {
		t.Fatal(err)
	}
	g := newFSM(slog.New(slog.DiscardHandler))
	if err := g.Restore(io.NopCloser(bytes.NewReader(buf.Bytes()))); err != nil {
		t.Fatal(err)
	}
	restored := g.scramCredentials(nil)
	if len(restored) != 2 {
		t.Fatalf("restored %v, want alice's two credentials as of the snapshot", restored)
	}
	for i := range got {
		if !proto.Equal(restored[i], got[i]) {
			t.Errorf("restored %v, want %v", restored[i], got[i])
		}
	}
}
