package protocol_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestACLsConsumerGroupDescribe checks the permissions Kafka requires to describe a
// KIP-848 group: DESCRIBE on the group, then DESCRIBE on every topic in its members'
// assignments, or the whole group is hidden (one audited denial); and the authorized
// operations reported when asked.
func TestACLsConsumerGroupDescribe(t *testing.T) {
	b := startACLBroker(t, false)
	ctx := ctxTimeout(t, 30*time.Second)
	b.topic(t, "q")
	b.grant(t, kadm.NewACLs().Groups("cg").Allow("User:alice").Operations(kadm.OpRead, kadm.OpDescribe))
	b.grant(t, kadm.NewACLs().Topics("q").Allow("User:alice").Operations(kadm.OpDescribe))
	b.grant(t, kadm.NewACLs().Groups("cg").Allow("User:bob").Operations(kadm.OpDescribe))

	alice := b.as("alice")
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group, hb.MemberID, hb.MemberEpoch, hb.SubscribedTopicNames = "cg", "alice-member", 0, []string{"q"}
	hb.RebalanceTimeoutMillis, hb.Topics = 30000, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if hresp, err := hb.RequestWith(ctx, alice); err != nil || hresp.ErrorCode != 0 {
		t.Fatalf("alice's heartbeat: %v %+v", err, hresp)
	}

	// Straight to the broker: through the coordinator lookup a principal without
	// DESCRIBE on the group would be refused by FindCoordinator instead.
	describe := func(cl *kgo.Client) kmsg.ConsumerGroupDescribeResponseGroup {
		t.Helper()
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups, req.IncludeAuthorizedOperations = []string{"cg"}, true
		kresp, err := cl.Broker(1).Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return kresp.(*kmsg.ConsumerGroupDescribeResponse).Groups[0]
	}
	hasQ := func(tps []kmsg.AssignmentTopicPartition) bool {
		for _, tp := range tps {
			if tp.Topic == "q" {
				return true
			}
		}
		return false
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		g := describe(alice)
		if g.ErrorCode != 0 || len(g.Members) != 1 || g.Members[0].MemberID != "alice-member" {
			t.Fatalf("alice's describe: %+v", g)
		}
		if want := int32(1<<kmsg.ACLOperationRead | 1<<kmsg.ACLOperationDescribe); g.AuthorizedOperations != want {
			t.Fatalf("alice's authorized operations %b, want %b", g.AuthorizedOperations, want)
		}
		if hasQ(g.Members[0].TargetAssignment.TopicPartitions) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("q never in alice's target assignment: %+v", g)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// bob may describe the group but not the topic assigned in it: the group is hidden,
	// and the check stops at the first denied topic.
	bobDenials := func() int {
		n := 0
		for _, d := range b.log.denials() {
			if d["principal"] == "User:bob" {
				n++
			}
		}
		return n
	}
	before := bobDenials()
	g := describe(b.as("bob"))
	if g.ErrorCode != kerr.TopicAuthorizationFailed.Code || len(g.Members) != 0 || g.State != "" || g.AuthorizedOperations != -2147483648 {
		t.Fatalf("bob's describe: %+v", g)
	}
	if n := bobDenials() - before; n != 1 {
		t.Fatalf("bob's describe audited %d denials, want 1: %v", n, b.log.denials())
	}

	// carol may not describe the group at all.
	g = describe(b.as("carol"))
	if g.ErrorCode != kerr.GroupAuthorizationFailed.Code || len(g.Members) != 0 || g.AuthorizedOperations != -2147483648 {
		t.Fatalf("carol's describe: %+v", g)
	}
}
