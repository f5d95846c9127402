package controllertest_test

import (
	"context"
	"testing"
	"time"

	"github.com/shalelog/shale/controller/controllertest"
	"github.com/shalelog/shale/metadata"
)

func TestStartRestartAndBrokers(t *testing.T) {
	n := controllertest.Start(t, controllertest.WithAdvertised("127.0.0.1", 19092), controllertest.WithDefaultPartitions(2))
	im := n.Store().Current()
	if b := im.Brokers[1]; b.Fenced || b.Port != 19092 || im.ClusterID == "" {
		t.Fatalf("after Start: %+v", im)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res := n.Store().CreateTopics(ctx, []metadata.TopicSpec{{Name: "t", NumPartitions: -1, ReplicationFactor: -1}}, false)
	if res[0].Err != nil || len(res[0].Topic.Partitions) != 2 {
		t.Fatalf("create: %+v", res[0])
	}
	if err := n.Store().CommitOffsets(ctx, "g", n.Store().Current().GroupFence("g"), []metadata.CommittedOffset{{Topic: "t", Partition: 1, Offset: 7, LeaderEpoch: -1}}); err != nil {
		t.Fatal(err)
	}
	controllertest.WaitFor(t, n.Store(), "topic t", func(im *metadata.Image) bool { return im.Topic("t") != nil })

	b2 := n.AddBroker(2, "127.0.0.1", 19093)
	controllertest.WaitFor(t, n.Store(), "broker 2", func(im *metadata.Image) bool { b, ok := im.Brokers[2]; return ok && !b.Fenced })
	b2.Close()
	controllertest.WaitFor(t, n.Store(), "broker 2 fenced", func(im *metadata.Image) bool { return im.Brokers[2].Fenced })

	cluster, addr := n.Store().Current().ClusterID, n.ControllerAddr()
	epoch := n.Store().Current().Partition("t", 0).LeaderEpoch
	n2 := n.Restart(controllertest.WithAdvertised("127.0.0.1", 19094))
	if n2.Dir != n.Dir || n2.ControllerAddr() != addr {
		t.Fatalf("restart moved: %s %s, was %s %s", n2.Dir, n2.ControllerAddr(), n.Dir, addr)
	}
	im = n2.Store().Current()
	if im.ClusterID != cluster || im.Brokers[1].Port != 19094 || im.Topic("t") == nil {
		t.Fatalf("after restart: %+v", im)
	}
	// Broker 1 went away and came back: its partitions were leaderless in between, and
	// the re-election bumped the leader epoch.
	if p := im.Partition("t", 0); p.Leader != 1 || p.LeaderEpoch <= epoch {
		t.Fatalf("partition after restart: %+v (epoch before %d)", p, epoch)
	}
	got, err := n2.Store().FetchOffsets(ctx, "g", nil)
	if err != nil || len(got) != 1 || got[0].Offset != 7 {
		t.Fatalf("offsets after restart: %+v %v", got, err)
	}
}
