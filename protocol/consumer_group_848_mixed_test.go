package protocol_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/coordinator/group"
)

// TestConsumerGroupKIP848MixedProtocols runs classic franz-go consumers
// (cooperative-sticky) and KIP-848 ones (ServerSideBalancer) in one group while a
// producer writes: the live classic group is upgraded when the first KIP-848 member
// joins, its classic members are assigned by the server, and it is downgraded when the
// last KIP-848 member leaves. No partition is owned by two members at once, and every
// record is consumed.
func TestConsumerGroupKIP848MixedProtocols(t *testing.T) {
	gcfg := &group.Config{NodeID: 1, ConsumerHeartbeatInterval: 100 * time.Millisecond, ConsumerSessionTimeout: 10 * time.Second}
	tb := launch(t, t.TempDir(), nil, brokerConfig(), gcfg)
	const topic, groupID, parts = "mixed848", "gmixed", 12
	tb.createTopic(topic, parts, nil)

	own := newOwnership()
	start := func(name string, serverSide bool) *kgoMember {
		opts := []kgo.Opt{
			kgo.Balancers(kgo.CooperativeStickyBalancer()),
			kgo.HeartbeatInterval(100 * time.Millisecond), kgo.SessionTimeout(10 * time.Second),
		}
		if serverSide {
			opts = append(opts, kgo.ServerSideBalancer())
		}
		return own.startMember(t, tb.addr, groupID, topic, name, opts...)
	}

	prod := &numberedProducer{cl: tb.client(kgo.DefaultProduceTopic(topic))}
	defer prod.cl.Close()
	groupType := func() string {
		t.Helper()
		req := kmsg.NewPtrListGroupsRequest()
		resp, err := req.RequestWith(ctxTimeout(t, 10*time.Second), tb.client())
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range resp.Groups {
			if g.Group == groupID {
				return g.GroupType
			}
		}
		return ""
	}
	waitType := func(want string) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for groupType() != want {
			if time.Now().After(deadline) {
				t.Fatalf("group type %q, want %q", groupType(), want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	classic1 := start("classic1", false)
	prod.produce(t, 200)
	own.waitConsumed(t, prod.n)
	if typ := groupType(); typ != "classic" {
		t.Fatalf("group type %q with only a classic member, want classic", typ)
	}
	kip1 := start("kip1", true)
	waitType("consumer")
	prod.produce(t, 200)
	classic2 := start("classic2", false)
	kip2 := start("kip2", true)
	prod.produce(t, 200)
	own.waitConsumed(t, prod.n)
	// Every member, classic or not, has been given partitions by the server.
	deadline := time.Now().Add(60 * time.Second)
	for {
		got := own.everGiven()
		if got["classic1"] && got["classic2"] && got["kip1"] && got["kip2"] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("members assigned partitions: %v, want all four", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if typ := groupType(); typ != "consumer" {
		t.Fatalf("group type %q with KIP-848 members, want consumer", typ)
	}

	// Both KIP-848 members leave under load: the group goes back to classic.
	kip1.leave()
	prod.produce(t, 100)
	kip2.leave()
	waitType("classic")
	prod.produce(t, 200)
	own.waitConsumed(t, prod.n)
	classic1.leave()
	prod.produce(t, 100)
	own.waitConsumed(t, prod.n)
	classic2.leave()

	own.check(t, numberedValue, prod.n)
}
