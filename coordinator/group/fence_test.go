package group

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/controller"
	"github.com/shalelog/shale/controller/controllertest"
	"github.com/shalelog/shale/metadata"
)

// laggingStore is a broker whose metadata cache stopped at img: it still believes what
// the controller committed then, as a broker cut off from the metadata stream does.
type laggingStore struct {
	metadata.Store
	img *metadata.Image
}

func (s *laggingStore) Current() *metadata.Image { return s.img }

func (s *laggingStore) Watch(ctx context.Context) <-chan *metadata.Image {
	ch := make(chan *metadata.Image)
	go func() {
		<-ctx.Done()
		close(ch)
	}()
	return ch
}

// groupCoordinatedBy finds a group whose coordinator in im is broker id.
func groupCoordinatedBy(t *testing.T, im *metadata.Image, id int32) string {
	t.Helper()
	for i := range 10000 {
		g := fmt.Sprintf("g-%d", i)
		if _, co, ok := im.CoordinatorOf(g); ok && co.Broker == id {
			return g
		}
	}
	t.Fatalf("no group is coordinated by broker %d", id)
	return ""
}

func committed(t *testing.T, c *Coordinator, group string) int64 {
	t.Helper()
	offs, err := c.FetchOffsets(t.Context(), group, map[string][]int32{"t": {0}})
	if err != nil || len(offs) != 1 {
		t.Fatalf("fetch offsets of %s: %v %v", group, offs, err)
	}
	return offs[0].Offset
}

// Two brokers both believe they coordinate a group: broker 1's cache predates broker 2,
// to which the controller has since moved the group. The stale coordinator's commit must
// not move the group's offset backwards.
func TestStaleCoordinatorCommitIsFenced(t *testing.T) {
	node := newTestNode(t)
	stale := &laggingStore{Store: node.Store(), img: node.Store().Current()}
	b2 := node.AddBroker(2, "127.0.0.1", 9093)
	im := controllertest.WaitFor(t, b2, "broker 2 coordinating", func(im *metadata.Image) bool {
		for _, co := range im.Coordinators {
			if co.Broker == 2 {
				return true
			}
		}
		return false
	})
	group := groupCoordinatedBy(t, im, 2)
	if _, co, _ := stale.img.CoordinatorOf(group); co.Broker != 1 {
		t.Fatalf("broker 1's stale view has %+v as the coordinator of %s", co, group)
	}

	a := newTestCoordinator(t, testConfig(), stale)
	cfg := testConfig()
	cfg.NodeID = 2
	b := newTestCoordinator(t, cfg, b2)
	ctx := t.Context()

	errs, err := b.CommitOffsets(ctx, CommitRequest{Group: group, Generation: -1, Offsets: offsets("t", 0, 100)})
	if err != nil || errs[0] != nil {
		t.Fatalf("commit on the current coordinator: %v %v", errs, err)
	}
	// Broker 1 still believes it coordinates the group, so it accepts the commit; the
	// controller must refuse it.
	errs, err = a.CommitOffsets(ctx, CommitRequest{Group: group, Generation: -1, Offsets: offsets("t", 0, 50)})
	if err == nil && !errors.Is(errs[0], kerr.NotCoordinator) {
		t.Fatalf("commit on the stale coordinator: %v %v, want NOT_COORDINATOR", errs, err)
	}
	if got := committed(t, b, group); got != 100 {
		t.Fatalf("committed offset %d after the stale commit, want 100", got)
	}
	// The stale coordinator forgot the group, and its deletions are fenced too.
	if st, _, _ := a.stateOf(group); st != Dead {
		t.Fatalf("stale coordinator still holds the group (%v)", st)
	}
	if errs := a.DeleteGroups(ctx, []string{group}); !errors.Is(errs[0], kerr.NotCoordinator) {
		t.Fatalf("delete on the stale coordinator: %v, want NOT_COORDINATOR", errs[0])
	}
	if got := committed(t, b, group); got != 100 {
		t.Fatalf("committed offset %d after the stale delete, want 100", got)
	}
}

// A coordinator that lost a group and got it back, without seeing the images between,
// must not let a member of its old generation commit: another broker coordinated the
// group meanwhile.
func TestCoordinatorEpochOutlivesAMissedMove(t *testing.T) {
	node := newTestNode(t)
	store := &laggingStore{Store: node.Store(), img: node.Store().Current()}
	a := newTestCoordinator(t, testConfig(), store)
	// A group whose partition broker 2 wins once it registers.
	var group string
	for i := 0; group == ""; i++ {
		g := fmt.Sprintf("g-%d", i)
		if controller.PickCoordinator(metadata.OffsetsPartition(g, len(store.img.Coordinators)), []int32{1, 2}) == 2 {
			group = g
		}
	}
	_, before, _ := store.img.CoordinatorOf(group)
	ids := stableGroup(t, a, group, 1)
	_, gen, _ := a.stateOf(group)
	ctx := t.Context()
	if errs, err := a.CommitOffsets(ctx, CommitRequest{Group: group, MemberID: ids[0], Generation: gen, Offsets: offsets("t", 0, 10)}); err != nil || errs[0] != nil {
		t.Fatalf("commit: %v %v", errs, err)
	}

	// The group moves to broker 2 and back while broker 1's cache is stuck.
	b2 := node.AddBroker(2, "127.0.0.1", 9093)
	if err := b2.Close(); err != nil {
		t.Fatal(err)
	}
	controllertest.WaitFor(t, node.Store(), "broker 1 coordinating again", func(im *metadata.Image) bool {
		_, co, _ := im.CoordinatorOf(group)
		return co.Broker == 1 && co.Epoch >= before.Epoch+2
	})

	errs, err := a.CommitOffsets(ctx, CommitRequest{Group: group, MemberID: ids[0], Generation: gen, Offsets: offsets("t", 0, 5)})
	if err == nil && !errors.Is(errs[0], kerr.NotCoordinator) {
		t.Fatalf("commit from the generation formed before the move: %v %v, want NOT_COORDINATOR", errs, err)
	}
	if got := committed(t, a, group); got != 10 {
		t.Fatalf("committed offset %d, want 10", got)
	}
}
