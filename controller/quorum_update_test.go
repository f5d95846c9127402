package controller

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/internal/testutil"
)

// TestUpdateVoterErrors: what UpdateVoter refuses, and that a voter's own address again
// (a retry whose first answer was lost) is a success that changes nothing.
func TestUpdateVoterErrors(t *testing.T) {
	checkNoGoroutineLeak(t)
	q := newTestQuorum(t, 3, nil)
	q.leader()
	b := q.broker(1, "")
	ctx := ctxFor(t)
	before := q.servers[q.leader()].Voters()
	for _, tc := range []struct {
		what string
		id   int32
		addr string
		want *kerr.Error
	}{
		{"an unknown voter", 42, "127.0.0.1:1", kerr.VoterNotFound},
		{"an address without a port", 2, "no-port", kerr.InvalidRequest},
		{"port 0", 2, "127.0.0.1:0", kerr.InvalidRequest},
		{"another voter's address", 2, q.voters[2].Addr, kerr.InvalidRequest},
	} {
		if err := b.UpdateVoter(ctx, tc.id, tc.addr); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.what, err, tc.want)
		}
	}
	for range 2 {
		if err := b.UpdateVoter(ctx, 2, q.voters[1].Addr); err != nil {
			t.Fatalf("the same address: %v", err)
		}
	}
	if after := q.servers[q.leader()].Voters(); !slices.Equal(after, before) {
		t.Fatalf("voters changed by refused or no-op updates: %v, were %v", after, before)
	}
}

// TestRestartWithStaleVotersUsesBootstrapServers moves a stopped follower to a new
// address with UpdateVoter, then starts it again configured with the old voters
// (its old address among them) but with controller.quorum.bootstrap.servers: it learns
// its new address from the running quorum and votes again there. With one of the other
// two controllers stopped, nothing commits without it.
func TestRestartWithStaleVotersUsesBootstrapServers(t *testing.T) {
	checkNoGoroutineLeak(t)
	q := newTestQuorum(t, 3, nil)
	lead := q.leader()
	b := q.broker(1, "")
	ctx := ctxFor(t)
	moved, other := (lead+1)%3, (lead+2)%3
	id := q.voters[moved].ID
	stale := q.config(moved) // controller.quorum.voters as it was set up
	stale.Voters = slices.Clone(stale.Voters)
	q.stop(moved)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	newAddr := ln.Addr().String()
	if err := b.UpdateVoter(ctx, id, newAddr); err != nil {
		ln.Close()
		t.Fatalf("move controller %d to %s: %v", id, newAddr, err)
	}
	want := slices.Clone(q.voters)
	want[moved].Addr = newAddr
	if got := q.servers[lead].Voters(); !slices.Equal(got, want) {
		ln.Close()
		t.Fatalf("voters after the move: %v, want %v", got, want)
	}

	cfg := stale
	cfg.Listener = ln
	cfg.BootstrapServers = []string{q.voters[other].Addr, q.voters[lead].Addr}
	s, err := NewServer(cfg)
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	q.servers[moved] = s
	// A new slice: the running servers' configs share the old one's backing array.
	q.voters = slices.Clone(q.voters)
	q.voters[moved].Addr = newAddr
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.cfg.Voters, want) || s.cfg.selfAddr() != newAddr {
		t.Fatalf("restarted controller uses voters %v (self %s), want %v", s.cfg.Voters, s.cfg.selfAddr(), want)
	}

	q.stop(other)
	mustCreateTopic(t, b, "after-move", 1, 1)
	testutil.Eventually(t, 20*time.Second, "moved controller caught up", func() bool { return s.Image().Topic("after-move") != nil })
}

// TestBootstrapServersUnreachable: a quorum formed for the first time, whose bootstrap
// servers do not answer yet, forms from controller.quorum.voters.
func TestBootstrapServersUnreachable(t *testing.T) {
	checkNoGoroutineLeak(t)
	// Claimed and never bound: nothing answers there for the whole test, where a port
	// the kernel handed out and took back could be bound again by another test.
	dead := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	q := newTestQuorum(t, 1, func(c *Config) {
		c.BootstrapServers = []string{dead}
		c.BootstrapTimeout = 300 * time.Millisecond
	})
	s := q.servers[q.leader()]
	if got := voterIDs(s.Voters()); !slices.Equal(got, []int32{1}) {
		t.Fatalf("voters %v", got)
	}
}
