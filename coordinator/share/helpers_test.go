package share

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/controller/controllertest"
	"github.com/shalelog/shale/coordinator/group"
	"github.com/shalelog/shale/metadata"
)

// newTestStore starts a real controller (one voter) with broker 1 registered, and
// returns broker 1's metadata.Store once topics t (4 partitions) and u (2) are in it.
func newTestStore(t testing.TB) metadata.Store {
	t.Helper()
	n := controllertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res := n.Store().CreateTopics(ctx, []metadata.TopicSpec{
		{Name: "t", NumPartitions: 4, ReplicationFactor: 1},
		{Name: "u", NumPartitions: 2, ReplicationFactor: 1},
	}, false)
	for _, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	controllertest.WaitFor(t, n.Store(), "topics t and u", func(im *metadata.Image) bool {
		return im.Topic("t") != nil && im.Topic("u") != nil
	})
	return n.Store()
}

func testConfig() Config {
	return Config{NodeID: 1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// testCoordinator is a share-group coordinator wired, as the broker wires it, to a
// classic group coordinator over the same store.
type testCoordinator struct {
	*Coordinator
	classic *group.Coordinator
}

func newTestCoordinator(t *testing.T, cfg Config, store metadata.Store) testCoordinator {
	t.Helper()
	classic := group.New(group.Config{NodeID: cfg.NodeID, MinSessionTimeout: 10 * time.Millisecond, MaxSessionTimeout: time.Minute,
		Logger: cfg.Logger}, store)
	cfg.Classic = classic
	c := New(cfg, store)
	classic.SetShareGroups(c)
	t.Cleanup(func() {
		c.Close()
		classic.Close()
	})
	return testCoordinator{c, classic}
}

func wait[T any](t *testing.T, w interface{ Wait(context.Context) T }) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return w.Wait(ctx)
}

func classicJoinReq(g string) group.JoinRequest {
	m := kmsg.NewConsumerMemberMetadata()
	m.Topics = []string{"t"}
	return group.JoinRequest{
		Group: g, ClientID: "cl", ClientHost: "/127.0.0.1",
		SessionTimeout: 10 * time.Second, RebalanceTimeout: 5 * time.Second,
		ProtocolType: "consumer", Protocols: []group.Protocol{{Name: "range", Metadata: m.AppendTo(nil)}},
	}
}

// stableClassicGroup makes g a Stable classic group of one member.
func stableClassicGroup(t *testing.T, c *group.Coordinator, g string) {
	t.Helper()
	j := wait[group.JoinResult](t, c.Join(classicJoinReq(g)))
	if j.Err != nil {
		t.Fatalf("classic join: %v", j.Err)
	}
	s := wait[group.SyncResult](t, c.Sync(group.SyncRequest{Group: g, MemberID: j.MemberID, Generation: j.Generation,
		Assignments: map[string][]byte{j.MemberID: []byte("a")}}))
	if s.Err != nil {
		t.Fatalf("classic sync: %v", s.Err)
	}
}
