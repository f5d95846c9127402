package group

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/controller/controllertest"
	"github.com/shalelog/shale/metadata"
)

// newTestNode starts a real controller (one voter) with broker 1 registered, and topics
// t (4 partitions) and u (2) in broker 1's metadata cache.
func newTestNode(t testing.TB) *controllertest.Node {
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
	return n
}

// newTestStore is broker 1's metadata.Store from newTestNode.
func newTestStore(t testing.TB) metadata.Store { return newTestNode(t).Store() }

func testConfig() Config {
	return Config{NodeID: 1, MinSessionTimeout: 10 * time.Millisecond, MaxSessionTimeout: time.Minute,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

func newTestCoordinator(t *testing.T, cfg Config, store metadata.Store) *Coordinator {
	t.Helper()
	c := New(cfg, store)
	t.Cleanup(func() { c.Close() })
	return c
}

func consumerMeta(topics ...string) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Topics = topics
	return m.AppendTo(nil)
}

func joinReq(group, member string) JoinRequest {
	return JoinRequest{
		Group: group, MemberID: member, ClientID: "cl", ClientHost: "/127.0.0.1",
		SessionTimeout: 10 * time.Second, RebalanceTimeout: 5 * time.Second,
		ProtocolType: "consumer", Protocols: []Protocol{{Name: "range", Metadata: consumerMeta("t")}},
		RequireKnownMemberID: true,
	}
}

func wait[T any](t *testing.T, w interface{ Wait(context.Context) T }) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return w.Wait(ctx)
}

// joinNew runs the MEMBER_ID_REQUIRED round trip and returns the pending second join.
func joinNew(t *testing.T, c *Coordinator, req JoinRequest) *JoinCall {
	t.Helper()
	req.MemberID = ""
	first := wait[JoinResult](t, c.Join(req))
	if !errors.Is(first.Err, errMemberIDRequired) || first.MemberID == "" {
		t.Fatalf("first join: %+v, want MEMBER_ID_REQUIRED with an id", first)
	}
	req.MemberID = first.MemberID
	return c.Join(req)
}

func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func (c *Coordinator) stateOf(id string) (State, int32, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[id]
	if g == nil {
		return Dead, -1, 0
	}
	return g.state, g.generation, len(g.members)
}

var errMemberIDRequired = kerr.MemberIDRequired

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mu.Unlock()
}
