package protocol_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/IBM/sarama"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/metadata"
)

// startReassignBroker is a broker (1) with topic "ra" of two partitions on it, and a
// second registered broker (2) that runs no replica manager: a reassignment onto it
// stays in progress, since it never fetches, which lets the test observe it.
func startReassignBroker(t *testing.T) *testBroker {
	t.Helper()
	tb := startBroker(t, withoutAutoCreate())
	tb.createTopic("ra", 2, nil)
	tb.node.AddBroker(2, "127.0.0.1", 1)
	tb.waitApplied("broker 2 unfenced", func(im *metadata.Image) bool {
		b, ok := im.Brokers[2]
		return ok && !b.Fenced
	})
	return tb
}

func TestPartitionReassignmentsKadm(t *testing.T) {
	tb := startReassignBroker(t)
	adm := tb.admin()
	ctx := ctxTimeout(t, 30*time.Second)

	var req kadm.AlterPartitionAssignmentsReq
	req.Assign("ra", 0, []int32{2, 1})
	req.Assign("ra", 1, []int32{1, 1})
	req.Assign("missing", 0, []int32{1})
	resps, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[int32]error{
		"ra":      {0: nil, 1: kerr.InvalidReplicaAssignment},
		"missing": {0: kerr.UnknownTopicOrPartition},
	}
	for topic, ps := range want {
		for p, werr := range ps {
			if got := resps[topic][p].Err; !errors.Is(got, werr) && got != werr {
				t.Errorf("%s-%d: %v, want %v", topic, p, got, werr)
			}
		}
	}
	for _, bad := range [][]int32{{}, {1, 9}} {
		var req kadm.AlterPartitionAssignmentsReq
		req.Assign("ra", 1, bad)
		resps, err := adm.AlterPartitionAssignments(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if got := resps["ra"][1].Err; !errors.Is(got, kerr.InvalidReplicaAssignment) {
			t.Errorf("target %v: %v", bad, got)
		}
	}
	// KIP-860: a target of another size is refused when the client forbids it.
	var rf kadm.AlterPartitionAssignmentsReq
	rf.Assign("ra", 1, []int32{1, 2})
	if resps, err := adm.AlterPartitionAssignments(kadm.ForbidAlterRf(ctx), rf); err != nil {
		t.Fatal(err)
	} else if got := resps["ra"][1].Err; !errors.Is(got, kerr.InvalidReplicationFactor) {
		t.Errorf("forbidden replication factor change: %v", got)
	}

	// ra-0 is moving onto broker 2, which never catches up: in progress.
	list, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{"ra": {0: {}, 1: {}}, "missing": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	got, ok := list["ra"][0]
	if !ok || len(list["ra"]) != 1 || len(list) != 1 {
		t.Fatalf("listed %+v", list)
	}
	if !slices.Equal(got.Replicas, []int32{2, 1}) || !slices.Equal(got.AddingReplicas, []int32{2}) || len(got.RemovingReplicas) != 0 {
		t.Fatalf("ra-0: %+v", got)
	}
	// Null topics: every reassignment in progress.
	all := kmsg.NewPtrListPartitionReassignmentsRequest()
	allResp, err := all.RequestWith(ctx, tb.client())
	if err != nil || allResp.ErrorCode != 0 || len(allResp.Topics) != 1 || allResp.Topics[0].Topic != "ra" || len(allResp.Topics[0].Partitions) != 1 {
		t.Fatalf("list all: %+v, %v", allResp, err)
	}
	// Metadata shows the replicas being added.
	if p := tb.store.Current().Partition("ra", 0); p.Leader != 1 || !slices.Equal(p.ISR, []int32{1}) {
		t.Fatalf("ra-0 while reassigning: %+v", p)
	}

	// Cancel: back to broker 1 alone; a second cancel finds nothing to cancel.
	var cancel kadm.AlterPartitionAssignmentsReq
	cancel.CancelAssign("ra", 0)
	if resps, err := adm.AlterPartitionAssignments(ctx, cancel); err != nil || resps["ra"][0].Err != nil {
		t.Fatalf("cancel: %+v, %v", resps, err)
	}
	if p := tb.store.Current().Partition("ra", 0); !slices.Equal(p.Replicas, []int32{1}) || p.Reassigning() {
		t.Fatalf("ra-0 after cancel: %+v", p)
	}
	if list, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{"ra": {0: {}}}); err != nil || len(list) != 0 {
		t.Fatalf("listed after cancel: %+v, %v", list, err)
	}
	if resps, err := adm.AlterPartitionAssignments(ctx, cancel); err != nil || !errors.Is(resps["ra"][0].Err, kerr.NoReassignmentInProgress) {
		t.Fatalf("second cancel: %+v, %v", resps, err)
	}
	// A reorder within the ISR completes at once.
	var reorder kadm.AlterPartitionAssignmentsReq
	reorder.Assign("ra", 1, []int32{1})
	if resps, err := adm.AlterPartitionAssignments(ctx, reorder); err != nil || resps["ra"][1].Err != nil {
		t.Fatalf("reorder: %+v, %v", resps, err)
	}
}

// Both versions of AlterPartitionReassignments, raw.
func TestAlterPartitionReassignmentsVersions(t *testing.T) {
	tb := startReassignBroker(t)
	rc := dialRaw(t, tb.addr)
	for v := int16(0); v <= 1; v++ {
		req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
		req.Version, req.TimeoutMillis, req.AllowReplicationFactorChange = v, 5000, false
		rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
		rt.Topic = "ra"
		rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
		rp.Partition, rp.Replicas = 0, []int32{1, 2}
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := rc.roundTrip(req).(*kmsg.AlterPartitionAssignmentsResponse)
		if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("v%d: %+v", v, resp)
		}
		code := resp.Topics[0].Partitions[0].ErrorCode
		// v0 knows no AllowReplicationFactorChange: growing to two replicas is allowed.
		if wantCode := map[int16]int16{0: 0, 1: kerr.InvalidReplicationFactor.Code}[v]; code != wantCode {
			t.Errorf("v%d: code %d, want %d", v, code, wantCode)
		}
		if v == 1 && resp.AllowReplicationFactorChange {
			t.Errorf("v1 response does not echo AllowReplicationFactorChange")
		}
	}
}

func TestPartitionReassignmentsSarama(t *testing.T) {
	tb := startReassignBroker(t)
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_8_0_0
	adm, err := sarama.NewClusterAdmin([]string{tb.addr}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	if err := adm.AlterPartitionReassignments("ra", [][]int32{{1, 2}}); err != nil {
		t.Fatal(err)
	}
	st, err := adm.ListPartitionReassignments("ra", []int32{0, 1})
	if err != nil {
		t.Fatal(err)
	}
	if s := st["ra"][0]; s == nil || !slices.Equal(s.Replicas, []int32{1, 2}) || !slices.Equal(s.AddingReplicas, []int32{2}) || len(st["ra"]) != 1 {
		t.Fatalf("listed %+v", st)
	}
	err = adm.AlterPartitionReassignments("ra", [][]int32{nil, nil})
	// ra-0 is cancelled; ra-1 has nothing in progress.
	if !errors.Is(err, sarama.ErrNoReassignmentInProgress) {
		t.Fatalf("cancel: %v", err)
	}
	if p := tb.store.Current().Partition("ra", 0); p.Reassigning() {
		t.Fatalf("ra-0 after cancel: %+v", p)
	}
}

func TestPartitionReassignmentsKafkaGo(t *testing.T) {
	tb := startReassignBroker(t)
	cl := &kafkago.Client{Addr: kafkago.TCP(tb.addr), Transport: &kafkago.Transport{}}
	ctx := ctxTimeout(t, 30*time.Second)
	resp, err := cl.AlterPartitionReassignments(ctx, &kafkago.AlterPartitionReassignmentsRequest{
		Topic: "ra", Assignments: []kafkago.AlterPartitionReassignmentsRequestAssignment{{PartitionID: 1, BrokerIDs: []int{2, 1}}},
	})
	if err != nil || resp.Error != nil || len(resp.PartitionResults) != 1 || resp.PartitionResults[0].Error != nil {
		t.Fatalf("alter: %+v, %v", resp, err)
	}
	lr, err := cl.ListPartitionReassignments(ctx, &kafkago.ListPartitionReassignmentsRequest{
		Topics: map[string]kafkago.ListPartitionReassignmentsRequestTopic{"ra": {PartitionIndexes: []int{0, 1}}},
	})
	if err != nil || lr.Error != nil {
		t.Fatalf("list: %+v, %v", lr, err)
	}
	ps := lr.Topics["ra"].Partitions
	if len(ps) != 1 || ps[0].PartitionIndex != 1 || !slices.Equal(ps[0].AddingReplicas, []int{2}) {
		t.Fatalf("listed %+v", lr.Topics)
	}
}

// AlterPartitionReassignments needs ALTER on the cluster, ListPartitionReassignments
// DESCRIBE, as in Kafka.
func TestPartitionReassignmentsNeedClusterACLs(t *testing.T) {
	b := startACLBroker(t, false)
	b.topic(t, "mine")
	ctx := ctxTimeout(t, 20*time.Second)
	alice := kadm.NewClient(b.as("alice"))
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign("mine", 0, []int32{1})
	// kadm reports the top-level code as the call's error.
	resps, err := alice.AlterPartitionAssignments(ctx, req)
	if !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alter without ALTER cluster: %+v, %v", resps, err)
	}
	if _, err := alice.ListPartitionReassignments(ctx, kadm.TopicsSet{"mine": {0: {}}}); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("list without DESCRIBE cluster: %v", err)
	}
	b.grant(t, kadm.NewACLs().Clusters().Allow("User:alice").Operations(kadm.OpAlter, kadm.OpDescribe))
	if resps, err := alice.AlterPartitionAssignments(ctx, req); err != nil || resps["mine"][0].Err != nil {
		t.Fatalf("alter with ALTER cluster: %+v, %v", resps, err)
	}
	if _, err := alice.ListPartitionReassignments(ctx, kadm.TopicsSet{"mine": {0: {}}}); err != nil {
		t.Fatalf("list with DESCRIBE cluster: %v", err)
	}
}
