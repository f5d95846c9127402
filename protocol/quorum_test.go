package protocol_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/client"
)

func describeQuorumRequest(topic string, partition int32) *kmsg.DescribeQuorumRequest {
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewDescribeQuorumRequestTopicPartition()
	rp.Partition = partition
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// TestDescribeQuorum: the broker forwards DescribeQuorum to the quorum (one voter here)
// and answers at the version the client negotiates (v2: with the voters' listeners);
// anything but __cluster_metadata-0 is UNKNOWN_TOPIC_OR_PARTITION.
func TestDescribeQuorum(t *testing.T) {
	tb := startBroker(t)
	cl := tb.client()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := describeQuorumRequest("__cluster_metadata", 0).RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Version != 2 || resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("response %+v", resp)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || p.LeaderID != 1 || p.LeaderEpoch < 1 || p.HighWatermark <= 0 {
		t.Fatalf("partition %+v", p)
	}
	if len(p.CurrentVoters) != 1 || p.CurrentVoters[0].ReplicaID != 1 || p.CurrentVoters[0].LogEndOffset < p.HighWatermark {
		t.Fatalf("voters %+v", p.CurrentVoters)
	}
	if len(p.Observers) != 1 || p.Observers[0].ReplicaID != 1 {
		t.Fatalf("observers (the broker) %+v", p.Observers)
	}
	if len(resp.Nodes) != 1 || resp.Nodes[0].NodeID != 1 || len(resp.Nodes[0].Listeners) != 1 || resp.Nodes[0].Listeners[0].Port == 0 {
		t.Fatalf("nodes %+v", resp.Nodes)
	}

	for _, bad := range []*kmsg.DescribeQuorumRequest{describeQuorumRequest("orders", 0), describeQuorumRequest("__cluster_metadata", 1)} {
		resp, err := bad.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("%+v: %+v", bad.Topics, resp)
		}
	}
}

// TestQuorumChangesAndUnregister: the Kafka errors of refused quorum changes and of
// unregistering a broker that holds replicas, as Kafka clients see them.
func TestQuorumChangesAndUnregister(t *testing.T) {
	tb := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := client.New(client.Options{Brokers: []string{tb.addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.Admin().CreateTopic(ctx, 1, 1, nil, "held"); err != nil {
		t.Fatal(err)
	}
	q, err := cl.DescribeQuorum(ctx)
	if err != nil || len(q.Voters) != 1 {
		t.Fatalf("%+v %v", q, err)
	}
	for _, tc := range []struct {
		what string
		err  error
		want *kerr.Error
	}{
		{"add the voter again", cl.AddController(ctx, 1, q.Voters[0].Addr), kerr.DuplicateVoter},
		{"remove the only voter", cl.RemoveController(ctx, 1), kerr.InvalidRequest},
		{"remove an unknown voter", cl.RemoveController(ctx, 5), kerr.VoterNotFound},
		{"unregister a broker holding replicas", cl.UnregisterBroker(ctx, 1, false), kerr.PolicyViolation},
		{"unregister an unknown broker", cl.UnregisterBroker(ctx, 9, true), kerr.BrokerIDNotRegistered},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.what, tc.err, tc.want)
		}
	}
	// The force tag (protocol.UnregisterForceTag) lets it through; the broker, still
	// running, registers again at its next heartbeat.
	if err := cl.UnregisterBroker(ctx, 1, true); err != nil {
		t.Fatalf("forced unregister: %v", err)
	}
}

// TestUpdateRaftVoter: KIP-853's UpdateRaftVoter as a Kafka client sends it, against a
// one-voter quorum: the voter's own address again is a success that changes nothing;
// an unknown voter, a request without listeners or with a kraft.version range without
// 1, and another cluster's id are refused with Kafka's errors.
func TestUpdateRaftVoter(t *testing.T) {
	tb := startBroker(t)
	cl := tb.client()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	q, err := describeQuorumRequest("__cluster_metadata", 0).RequestWith(ctx, cl)
	if err != nil || len(q.Nodes) != 1 || len(q.Nodes[0].Listeners) != 1 {
		t.Fatalf("%+v %v", q, err)
	}
	self := q.Nodes[0].Listeners[0]
	update := func(voter int32, edit func(*kmsg.UpdateRaftVoterRequest)) int16 {
		t.Helper()
		req := kmsg.NewPtrUpdateRaftVoterRequest()
		req.VoterID = voter
		l := kmsg.NewUpdateRaftVoterRequestListener()
		l.Name, l.Host, l.Port = "CONTROLLER", self.Host, self.Port
		req.Listeners = append(req.Listeners, l)
		req.KRaftVersionFeature.MinSupportedVersion, req.KRaftVersionFeature.MaxSupportedVersion = 0, 1
		if edit != nil {
			edit(req)
		}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.ErrorCode
	}
	other := "another-cluster"
	for _, tc := range []struct {
		what  string
		voter int32
		edit  func(*kmsg.UpdateRaftVoterRequest)
		want  int16
	}{
		{"the same address", 1, nil, 0},
		{"the same address, retried", 1, nil, 0},
		{"an unknown voter", 5, nil, kerr.VoterNotFound.Code},
		{"no listener", 1, func(r *kmsg.UpdateRaftVoterRequest) { r.Listeners = nil }, kerr.InvalidRequest.Code},
		{"kraft.version 0 only", 1, func(r *kmsg.UpdateRaftVoterRequest) { r.KRaftVersionFeature.MaxSupportedVersion = 0 }, kerr.InvalidRequest.Code},
		{"another cluster", 1, func(r *kmsg.UpdateRaftVoterRequest) { r.ClusterID = &other }, kerr.InconsistentClusterID.Code},
	} {
		if got := update(tc.voter, tc.edit); got != tc.want {
			t.Errorf("%s: error %d, want %d", tc.what, got, tc.want)
		}
	}
	after, err := describeQuorumRequest("__cluster_metadata", 0).RequestWith(ctx, cl)
	if err != nil || len(after.Nodes) != 1 || len(after.Nodes[0].Listeners) != 1 || after.Nodes[0].Listeners[0].Host != self.Host || after.Nodes[0].Listeners[0].Port != self.Port {
		t.Fatalf("the voter's listener changed: %+v %v", after, err)
	}
}
