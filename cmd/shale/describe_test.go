package main

import (
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDescribeFilters runs describe against a kfake broker whose Metadata answers are
// replaced: kfake itself never has under-replicated or unavailable partitions.
func TestDescribeFilters(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, "t"), kfake.SeedTopics(1, "ok"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	host, portStr, _ := net.SplitHostPort(c.ListenAddrs()[0])
	port, _ := strconv.Atoi(portStr)
	part := func(idx, leader int32, replicas, isr []int32) kmsg.MetadataResponseTopicPartition {
		p := kmsg.NewMetadataResponseTopicPartition()
		p.Partition, p.Leader, p.Replicas, p.ISR = idx, leader, replicas, isr
		if leader < 0 {
			p.ErrorCode = kerr.LeaderNotAvailable.Code
		}
		return p
	}
	c.ControlKey(int16(kmsg.Metadata), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kreq.(*kmsg.MetadataRequest)
		resp := req.ResponseKind().(*kmsg.MetadataResponse)
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = 0, host, int32(port)
		resp.Brokers = append(resp.Brokers, b)
		resp.ControllerID = 0
		topics := map[string][]kmsg.MetadataResponseTopicPartition{
			"t": {
				part(0, 0, []int32{0}, []int32{0}),       // healthy
				part(1, 0, []int32{0, 5}, []int32{0}),    // under-replicated
				part(2, -1, []int32{0}, []int32{0}),      // no leader
				part(3, 7, []int32{7, 0}, []int32{7, 0}), // leader not a live broker
			},
			"ok": {part(0, 0, []int32{0}, []int32{0})},
		}
		names := []string{"ok", "t"}
		if req.Topics != nil {
			names = nil
			for _, rt := range req.Topics {
				names = append(names, *rt.Topic)
			}
		}
		for _, name := range names {
			rt := kmsg.NewMetadataResponseTopic()
			rt.Topic = kmsg.StringPtr(name)
			rt.Partitions = topics[name]
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil, true
	})
	b := "--bootstrap-server=" + c.ListenAddrs()[0]

	under := "\tTopic: t\tPartition: 1\tLeader: 0\tReplicas: 0,5\tIsr: 0\n"
	noLeader := "\tTopic: t\tPartition: 2\tLeader: none\tReplicas: 0\tIsr: 0\tError: " + kerr.LeaderNotAvailable.Error() + "\n"
	deadLeader := "\tTopic: t\tPartition: 3\tLeader: 7\tReplicas: 7,0\tIsr: 7,0\n"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--under-replicated-partitions"}, under},
		{[]string{"--unavailable-partitions"}, noLeader + deadLeader},
		{[]string{"--under-replicated-partitions", "--unavailable-partitions"}, under + noLeader + deadLeader},
		{[]string{"--topic", "ok", "--under-replicated-partitions", "--unavailable-partitions"}, ""},
		{[]string{"--topic", "t", "--unavailable-partitions"}, noLeader + deadLeader},
	} {
		got := must(t, "", append([]string{"topic", "describe", b}, tc.args...)...)
		if got != tc.want {
			t.Errorf("%v:\n got %q\nwant %q", tc.args, got, tc.want)
		}
	}
	// Without a filter every partition and the topic's header are printed.
	if got := lines(must(t, "", "topic", "describe", b, "--topic", "t")); len(got) != 5 || !strings.HasPrefix(got[0], "Topic: t\t") {
		t.Errorf("unfiltered: %q", got)
	}
}
