package group

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/coordinator/timer/timertest"
)

func (cl *consumerClient) static(instance string) *consumerClient {
	cl.instance = &instance
	return cl
}

// TestConsumerStaticMembership: a static member that leaves with epoch -2 keeps its
// partitions; a new member with its group.instance.id takes them over without a new
// group epoch; the instance id cannot be taken while its member is still there; and a
// static member whose session expires is removed like any other.
func TestConsumerStaticMembership(t *testing.T) {
	clock := &timertest.Manual{}
	c, _ := newConsumerCoordinator(t, clock)
	s := newConsumerClient(t, c, "g", "s1", "t").static("i1")
	a := newConsumerClient(t, c, "g", "a", "t")
	s.mustHeartbeat()
	a.mustHeartbeat()
	for range 3 {
		s.mustHeartbeat()
		a.mustHeartbeat()
	}
	if s.count() != 2 || a.count() != 2 {
		t.Fatalf("s %+v, a %+v, want 2 each", s.owned, a.owned)
	}
	_, epoch := c.consumerState("g")
	kept := s.owned

	// Taking the instance id while s is there is refused.
	dup := newConsumerClient(t, c, "g", "s2", "t").static("i1")
	if resp := dup.heartbeat(); !errors.Is(resp.Err, kerr.UnreleasedInstanceID) {
		t.Fatalf("join with a used instance id: %v, want UNRELEASED_INSTANCE_ID", resp.Err)
	}

	// s leaves temporarily: its partitions stay with it, the group epoch stays.
	req := s.request()
	req.MemberEpoch = -2
	if resp := c.ConsumerHeartbeat(t.Context(), req); resp.Err != nil || resp.MemberEpoch != -2 {
		t.Fatalf("static leave: %+v", resp)
	}
	a.mustHeartbeat()
	if a.count() != 2 {
		t.Fatalf("a got %+v after s left temporarily, want its own 2 only", a.owned)
	}
	if _, e := c.consumerState("g"); e != epoch {
		t.Fatalf("group epoch %d after a static leave, want %d", e, epoch)
	}

	// Its restarted instance takes over its assignment at once.
	s2 := newConsumerClient(t, c, "g", "s2", "t").static("i1")
	s2.mustHeartbeat()
	if !sameOwned(s2.owned, kept) || s2.epoch != epoch {
		t.Fatalf("replacing member: %+v at epoch %d, want %+v at %d", s2.owned, s2.epoch, kept, epoch)
	}
	if _, e := c.consumerState("g"); e != epoch {
		t.Fatalf("group epoch %d after the static member came back, want %d", e, epoch)
	}
	if resp := s.heartbeat(); resp.Err == nil {
		t.Fatal("the replaced member's heartbeat was accepted")
	}
	checkDisjoint(t, []*consumerClient{s2, a})

	// A static member gone for longer than its session is removed.
	req = s2.request()
	req.MemberEpoch = -2
	if resp := c.ConsumerHeartbeat(t.Context(), req); resp.Err != nil {
		t.Fatal(resp.Err)
	}
	for range 10 {
		clock.Advance(10 * time.Second)
		a.mustHeartbeat()
	}
	if a.count() != 4 {
		t.Fatalf("a %+v after the static member's session expired, want all 4", a.owned)
	}
}

func sameOwned(x, y []TopicPartitions) bool {
	return ownedOf(x).equal(ownedOf(y))
}

// TestConsumerListAndDescribeLoadGroup: a coordinator that takes a consumer group over
// lists and describes it from the quorum before any member has heartbeated to it.
func TestConsumerListAndDescribeLoadGroup(t *testing.T) {
	store := newTestStore(t)
	cfg := testConfig()
	cfg.Clock = &timertest.Manual{}
	c1 := New(cfg, store)
	a := newConsumerClient(t, c1, "g", "a", "t")
	a.mustHeartbeat()
	b := newConsumerClient(t, c1, "h", "b", "u")
	b.mustHeartbeat()
	c1.Close()

	c2 := newTestCoordinator(t, cfg, store)
	ls, err := c2.ListGroups(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 2 || ls[0].Group != "g" || ls[0].Type != ConsumerGroupType || ls[0].State != Stable || ls[1].Group != "h" || ls[1].Type != ConsumerGroupType {
		t.Fatalf("listed after the takeover: %+v, want g and h, consumer groups, Stable", ls)
	}

	c3 := newTestCoordinator(t, cfg, store)
	d := c3.DescribeConsumerGroups(t.Context(), []string{"h"})[0]
	if d.Err != nil || d.State != Stable || len(d.Members) != 1 || d.Members[0].MemberID != "b" || len(d.Members[0].Assignment) != 1 {
		t.Fatalf("described after the takeover: %+v", d)
	}
}
