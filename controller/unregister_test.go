package controller

import (
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/metadata"
)

// TestUnregisterBroker: a broker that still holds replicas is not unregistered (with a
// message naming them) unless forced; an empty one is; every cache drops it.
func TestUnregisterBroker(t *testing.T) {
	checkNoGoroutineLeak(t)
	q := newTestQuorum(t, 1, nil)
	q.leader()
	b1, b2, b3 := q.broker(1, ""), q.broker(2, ""), q.broker(3, "")
	ctx := ctxFor(t)
	for name, replicas := range map[string][]int32{"t": {1}, "u": {3, 1}} {
		if r := b1.CreateTopics(ctx, []metadata.TopicSpec{{Name: name, NumPartitions: -1, ReplicationFactor: -1,
			Assignments: [][]int32{replicas}}}, false); r[0].Err != nil {
			t.Fatal(r[0].Err)
		}
	}
	err := b1.UnregisterBroker(ctx, 1, false)
	if !errors.Is(err, kerr.PolicyViolation) || !strings.Contains(err.Error(), "t-0") || !strings.Contains(err.Error(), "u-0") {
		t.Fatalf("unregistering a broker with replicas: %v", err)
	}
	if err := b1.UnregisterBroker(ctx, 9, false); !errors.Is(err, kerr.BrokerIDNotRegistered) {
		t.Fatalf("unregistering an unknown broker: %v", err)
	}

	b2.Close()
	if err := b1.UnregisterBroker(ctx, 2, false); err != nil {
		t.Fatal(err)
	}
	waitImage(t, b1, "broker 2 gone", func(im *metadata.Image) bool { _, ok := im.Brokers[2]; return !ok })

	// Forced: broker 3 leads u-0; it is fenced first, so leadership moves to 1.
	b3.silentClose.Store(true)
	b3.Close()
	if err := b1.UnregisterBroker(ctx, 3, true); err != nil {
		t.Fatal(err)
	}
	im := waitImage(t, b1, "broker 3 gone", func(im *metadata.Image) bool { _, ok := im.Brokers[3]; return !ok })
	if p := im.Partition("u", 0); p.Leader != 1 || len(p.Replicas) != 2 {
		t.Fatalf("u-0 after forcing broker 3 out: %+v", *p)
	}
	if _, ok := q.servers[0].Image().Brokers[3]; ok {
		t.Fatal("the controller's image still lists broker 3")
	}
}
