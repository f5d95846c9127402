package protocol_test

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestACLsShareGroupAPIs checks the permissions Kafka requires of the share-group
// coordinator APIs: READ on the group and DESCRIBE on the subscribed topics to heartbeat,
// DESCRIBE on the group (and on its assigned topics) to describe it, DELETE to delete it.
func TestACLsShareGroupAPIs(t *testing.T) {
	b := startACLBroker(t, false)
	ctx := ctxTimeout(t, 30*time.Second)
	b.topic(t, "q")
	alice := b.as("alice")

	heartbeat := func(epoch int32, topics []string) int16 {
		t.Helper()
		req := kmsg.NewPtrShareGroupHeartbeatRequest()
		req.GroupID, req.MemberID, req.MemberEpoch, req.SubscribedTopicNames = "sg", "alice-member", epoch, topics
		resp, err := req.RequestWith(ctx, alice)
		var ke *kerr.Error
		if errors.As(err, &ke) { // FindCoordinator needs DESCRIBE on the group
			return ke.Code
		}
		if err != nil {
			t.Fatal(err)
		}
		return resp.ErrorCode
	}
	describe := func() int16 {
		t.Helper()
		req := kmsg.NewPtrShareGroupDescribeRequest()
		req.GroupIDs = []string{"sg"}
		resp, err := req.RequestWith(ctx, alice)
		var ke *kerr.Error
		if errors.As(err, &ke) {
			return ke.Code
		}
		if err != nil {
			t.Fatal(err)
		}
		return resp.Groups[0].ErrorCode
	}

	if code := heartbeat(0, []string{"q"}); code != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("heartbeat with no ACL: %v", kerr.ErrorForCode(code))
	}
	b.grant(t, kadm.NewACLs().Groups("sg").Allow("User:alice").Operations(kadm.OpDescribe))
	if code := heartbeat(0, []string{"q"}); code != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("heartbeat without group READ: %v", kerr.ErrorForCode(code))
	}
	b.grant(t, kadm.NewACLs().Groups("sg").Allow("User:alice").Operations(kadm.OpRead))
	if code := heartbeat(0, []string{"q"}); code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("heartbeat without topic DESCRIBE: %v", kerr.ErrorForCode(code))
	}
	b.grant(t, kadm.NewACLs().Topics("q").Allow("User:alice").Operations(kadm.OpDescribe))
	if code := heartbeat(0, []string{"q"}); code != 0 {
		t.Fatalf("heartbeat with READ and DESCRIBE: %v", kerr.ErrorForCode(code))
	}
	if code := describe(); code != 0 {
		t.Fatalf("describe with DESCRIBE: %v", kerr.ErrorForCode(code))
	}

	// bob may describe the group but not the topic assigned in it: the group is hidden.
	bob := b.as("bob")
	b.grant(t, kadm.NewACLs().Groups("sg").Allow("User:bob").Operations(kadm.OpDescribe))
	req := kmsg.NewPtrShareGroupDescribeRequest()
	req.GroupIDs = []string{"sg"}
	resp, err := req.RequestWith(ctx, bob)
	if err != nil || resp.Groups[0].ErrorCode != kerr.TopicAuthorizationFailed.Code || len(resp.Groups[0].Members) != 0 {
		t.Fatalf("bob's describe: %v %+v", err, resp)
	}
	// Nor may he delete it, or list it with share offsets he cannot see.
	dg, err := kadm.NewClient(bob).DeleteGroup(ctx, "sg")
	if !errors.Is(err, kerr.GroupAuthorizationFailed) && !errors.Is(dg.Err, kerr.GroupAuthorizationFailed) {
		t.Fatalf("bob's delete without DELETE: %v %+v", err, dg)
	}
	oreq := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	og := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	og.GroupID = "sg"
	ot := kmsg.NewDescribeShareGroupOffsetsRequestGroupTopic()
	ot.Topic, ot.Partitions = "q", []int32{0}
	og.Topics = append(og.Topics, ot)
	oreq.Groups = append(oreq.Groups, og)
	oresp, err := oreq.RequestWith(ctx, bob)
	if err != nil || oresp.Groups[0].ErrorCode != 0 || oresp.Groups[0].Topics[0].Partitions[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("bob's share offsets of a topic he cannot describe: %v %+v", err, oresp)
	}
	// AlterShareGroupOffsets needs READ on the group; DeleteShareGroupOffsets DELETE.
	areq := kmsg.NewPtrAlterShareGroupOffsetsRequest()
	areq.GroupID = "sg"
	aresp, err := areq.RequestWith(ctx, bob)
	if err != nil || aresp.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("bob's alter: %v %+v", err, aresp)
	}
	dreq := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
	dreq.GroupID = "sg"
	dresp, err := dreq.RequestWith(ctx, alice)
	if err != nil || dresp.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("alice's delete offsets without DELETE: %v %+v", err, dresp)
	}

	// Group configs need DESCRIBE_CONFIGS on the group.
	creq := kmsg.NewPtrDescribeConfigsRequest()
	cres := kmsg.NewDescribeConfigsRequestResource()
	cres.ResourceType, cres.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "sg"
	creq.Resources = append(creq.Resources, cres)
	if cresp, err := creq.RequestWith(ctx, bob); err != nil || cresp.Resources[0].ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("bob's group configs without DESCRIBE_CONFIGS: %v %+v", err, cresp)
	}
	b.grant(t, kadm.NewACLs().Groups("sg").Allow("User:bob").Operations(kadm.OpDescribeConfigs))
	if cresp, err := creq.RequestWith(ctx, bob); err != nil || cresp.Resources[0].ErrorCode != 0 || len(cresp.Resources[0].Configs) == 0 {
		t.Fatalf("bob's group configs with DESCRIBE_CONFIGS: %v %+v", err, cresp)
	}
	// Altering them needs ALTER_CONFIGS on the group.
	setEarliest := groupOp{"share.auto.offset.reset", kmsg.StringPtr("earliest"), kmsg.IncrementalAlterConfigOpSet}
	if err := alterGroupConfigs(t, bob, "sg", false, setEarliest); err != kerr.GroupAuthorizationFailed {
		t.Fatalf("bob's group config change without ALTER_CONFIGS: %v", err)
	}
	b.grant(t, kadm.NewACLs().Groups("sg").Allow("User:bob").Operations(kadm.OpAlterConfigs))
	if err := alterGroupConfigs(t, bob, "sg", false, setEarliest); err != nil {
		t.Fatalf("bob's group config change with ALTER_CONFIGS: %v", err)
	}

	// alice leaves; with DELETE she deletes the group.
	if code := heartbeat(-1, nil); code != 0 {
		t.Fatalf("leave: %v", kerr.ErrorForCode(code))
	}
	b.grant(t, kadm.NewACLs().Groups("sg").Allow("User:alice").Operations(kadm.OpDelete))
	if dg, err := kadm.NewClient(alice).DeleteGroup(ctx, "sg"); err != nil || dg.Err != nil {
		t.Fatalf("alice's delete: %v %+v", err, dg)
	}
}
