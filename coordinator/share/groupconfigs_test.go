package share

import (
	"context"
	"testing"
	"time"

	"github.com/shalelog/shale/controller/controllertest"
	"github.com/shalelog/shale/metadata"
)

// setGroupConfigs sets group configs through the controller and waits until the store
// has them.
func setGroupConfigs(t *testing.T, store metadata.Store, group string, kv ...string) {
	t.Helper()
	var ops []metadata.ConfigOp
	for i := 0; i < len(kv); i += 2 {
		ops = append(ops, metadata.ConfigOp{Name: kv[i], Value: &kv[i+1], Op: metadata.ConfigSet})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := store.(metadata.GroupConfigStore).AlterGroupConfigs(ctx, group, ops, true, false); err != nil {
		t.Fatal(err)
	}
	controllertest.WaitFor(t, store, "group configs", func(im *metadata.Image) bool {
		return im.GroupConfigs[group][kv[0]] == kv[1]
	})
}

// TestShareGroupConfigsTimeouts: a group's share.heartbeat.interval.ms and
// share.session.timeout.ms group configs override the coordinator's for that group only.
func TestShareGroupConfigsTimeouts(t *testing.T) {
	store := newTestStore(t)
	c := newTestCoordinator(t, testConfig(), store) // 45s sessions, 5s heartbeats
	setGroupConfigs(t, store, "quick", metadata.GroupShareSessionTimeout, "50", metadata.GroupShareHeartbeatInterval, "10")
	ctx := context.Background()
	if r := mustShare(t, c.Heartbeat(ctx, shareJoinReq("quick", "gone", "t"))); r.HeartbeatInterval != 10*time.Millisecond {
		t.Fatalf("heartbeat interval %v, want the group's 10ms", r.HeartbeatInterval)
	}
	if r := mustShare(t, c.Heartbeat(ctx, shareJoinReq("slow", "stays", "t"))); r.HeartbeatInterval != 5*time.Second {
		t.Fatalf("another group's heartbeat interval %v, want the coordinator's 5s", r.HeartbeatInterval)
	}
	// The silent member of "quick" expires after the group's 50ms, not 45s.
	deadline := time.Now().Add(20 * time.Second)
	for len(c.DescribeGroups(ctx, []string{"quick"})[0].Members) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the silent member outlived its group's session timeout")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if d := c.DescribeGroups(ctx, []string{"slow"})[0]; len(d.Members) != 1 {
		t.Fatalf("the other group's member: %+v", d.Members)
	}
}
