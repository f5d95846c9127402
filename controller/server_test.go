package controller

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/shalelog/shale/internal/testutil"
	"github.com/shalelog/shale/metadata"

	pb "github.com/shalelog/shale/controller/proto"
)

func strp(s string) *string { return &s }

// TestSingleNodeCombined is `make run`: one controller and one broker client over
// loopback, every Store operation end to end.
func TestSingleNodeCombined(t *testing.T) {
	checkNoGoroutineLeak(t)
	q := newTestQuorum(t, 1, func(c *Config) { c.DefaultPartitions = 3 })
	q.leader()
	b := q.broker(1, "")
	ctx := ctxFor(t)

	if !b.LeaseValid() || b.BrokerEpoch() < 0 {
		t.Fatal("no lease after NewBrokerClient")
	}
	im := b.Current()
	if im.ClusterID == "" || im.ControllerID != 1 || im.Brokers[1].Fenced || im.Brokers[1].Port != 19001 {
		t.Fatalf("cache after start: %+v", im)
	}

	res := b.CreateTopics(ctx, []metadata.TopicSpec{
		{Name: "events", NumPartitions: -1, ReplicationFactor: -1, Configs: map[string]string{"retention.ms": "60000"}},
		{Name: "bad/name", NumPartitions: 1, ReplicationFactor: 1},
		{Name: "rf2", NumPartitions: 1, ReplicationFactor: 2},
		{Name: "badcfg", NumPartitions: 1, ReplicationFactor: 1, Configs: map[string]string{"retention.ms": "soon"}},
		{Name: "dup", NumPartitions: 1, ReplicationFactor: 1},
		{Name: "dup", NumPartitions: 1, ReplicationFactor: 1},
		{Name: "both", NumPartitions: 2, ReplicationFactor: -1, Assignments: [][]int32{{1}}},
	}, false)
	if res[0].Err != nil || len(res[0].Topic.Partitions) != 3 {
		t.Fatalf("events: %+v", res[0])
	}
	for i, want := range []*kerr.Error{nil, kerr.InvalidTopicException, kerr.InvalidReplicationFactor, kerr.InvalidConfig,
		kerr.InvalidRequest, kerr.InvalidRequest, kerr.InvalidRequest} {
		if want != nil && !errors.Is(res[i].Err, want) {
			t.Errorf("topic %d (%s): got %v, want %s", i, res[i].Name, res[i].Err, want.Message)
		}
	}
	if r := b.CreateTopics(ctx, []metadata.TopicSpec{{Name: "events", NumPartitions: 1, ReplicationFactor: 1}}, false); !errors.Is(r[0].Err, kerr.TopicAlreadyExists) {
		t.Fatalf("recreate: %v", r[0].Err)
	}
	// Validate-only answers like the real thing and changes nothing.
	if r := b.CreateTopics(ctx, []metadata.TopicSpec{{Name: "dry", NumPartitions: 2, ReplicationFactor: 1}}, true); r[0].Err != nil || len(r[0].Topic.Partitions) != 2 {
		t.Fatalf("validate only: %+v", r[0])
	}
	im = waitImage(t, b, "events in the cache", func(im *metadata.Image) bool { return im.Topic("events") != nil })
	if im.Topic("dry") != nil {
		t.Fatal("validate-only created a topic")
	}
	if p := im.Partition("events", 2); p == nil || p.Leader != 1 || !slices.Equal(p.ISR, []int32{1}) {
		t.Fatalf("events-2: %+v", p)
	}
	if im.Topic("events").Configs["retention.ms"] != "60000" {
		t.Fatal("configs not in the cache")
	}

	// Configs: incremental and whole-set.
	if err := b.AlterTopicConfigs(ctx, "events", []metadata.ConfigOp{{Name: "segment.bytes", Value: strp("1048576"), Op: metadata.ConfigSet},
		{Name: "retention.ms", Op: metadata.ConfigDelete}}, true, false); err != nil {
		t.Fatal(err)
	}
	if err := b.AlterTopicConfigs(ctx, "events", []metadata.ConfigOp{{Name: "segment.bytes", Value: strp("tiny")}}, true, false); !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("bad config value: %v", err)
	}
	if err := b.AlterTopicConfigs(ctx, "nope", nil, true, false); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("unknown topic: %v", err)
	}
	im = waitImage(t, b, "config change", func(im *metadata.Image) bool { return im.Topic("events").Configs["segment.bytes"] == "1048576" })
	if _, ok := im.Topic("events").Configs["retention.ms"]; ok {
		t.Fatal("deleted config still set")
	}
	if err := b.AlterTopicConfigs(ctx, "events", []metadata.ConfigOp{{Name: "cleanup.policy", Value: strp("delete")}}, false, false); err != nil {
		t.Fatal(err)
	}
	waitImage(t, b, "whole-set config", func(im *metadata.Image) bool {
		c := im.Topic("events").Configs
		return len(c) == 1 && c["cleanup.policy"] == "delete"
	})

	// Partitions.
	errs := b.CreatePartitions(ctx, []metadata.PartitionsSpec{{Topic: "events", Count: 5}, {Topic: "nope", Count: 2}, {Topic: "events", Count: 1}}, false)
	if !errors.Is(errs[0], kerr.InvalidRequest) || !errors.Is(errs[1], kerr.UnknownTopicOrPartition) {
		t.Fatalf("create partitions with a duplicate: %v", errs)
	}
	if errs := b.CreatePartitions(ctx, []metadata.PartitionsSpec{{Topic: "events", Count: 5}}, false); errs[0] != nil {
		t.Fatal(errs[0])
	}
	waitImage(t, b, "5 partitions", func(im *metadata.Image) bool { return len(im.Topic("events").Partitions) == 5 })

	// Producer ids are unique blocks.
	f1, n1, err := b.AllocateProducerIDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f2, _, err := b.AllocateProducerIDs(ctx)
	if err != nil || f2 < f1+int64(n1) {
		t.Fatalf("second block %d after %d+%d: %v", f2, f1, n1, err)
	}

	// Offsets.
	if err := b.CommitOffsets(ctx, "g", b.Current().GroupFence("g"), []metadata.CommittedOffset{{Topic: "events", Partition: 1, Offset: 17, LeaderEpoch: 0, Metadata: "meta"}}); err != nil {
		t.Fatal(err)
	}
	if err := b.CommitOffsets(ctx, "g", b.Current().GroupFence("g"), []metadata.CommittedOffset{{Topic: "missing", Partition: 0, Offset: 1}}); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("commit to a missing topic: %v", err)
	}
	if err := b.CommitOffsets(ctx, "", b.Current().GroupFence(""), []metadata.CommittedOffset{{Topic: "events", Partition: 0, Offset: 1}}); !errors.Is(err, kerr.InvalidGroupID) {
		t.Fatalf("empty group: %v", err)
	}
	big := string(make([]byte, metadata.MaxOffsetMetadataBytes+1))
	if err := b.CommitOffsets(ctx, "g", b.Current().GroupFence("g"), []metadata.CommittedOffset{{Topic: "events", Partition: 0, Offset: 1, Metadata: big}}); !errors.Is(err, kerr.OffsetMetadataTooLarge) {
		t.Fatalf("big metadata: %v", err)
	}
	got, err := b.FetchOffsets(ctx, "g", nil)
	if err != nil || len(got) != 1 || got[0].Offset != 17 || got[0].Metadata != "meta" || got[0].CommitTime.IsZero() {
		t.Fatalf("fetch: %+v %v", got, err)
	}
	if got, _ := b.FetchOffsets(ctx, "g", map[string][]int32{"events": {0}}); len(got) != 0 {
		t.Fatalf("filtered fetch: %+v", got)
	}
	if groups, err := b.ListOffsetGroups(ctx); err != nil || !slices.Equal(groups, []string{"g"}) {
		t.Fatalf("groups %v %v", groups, err)
	}
	if err := b.DeleteGroupOffsets(ctx, "g", b.Current().GroupFence("g"), nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := b.FetchOffsets(ctx, "g", nil); len(got) != 0 {
		t.Fatalf("after delete: %+v", got)
	}

	// AlterPartition through the service.
	p := *b.Current().Partition("events", 0)
	np, err := b.AlterPartition(ctx, metadata.AlterPartitionRequest{Topic: "events", Partition: 0, LeaderEpoch: p.LeaderEpoch,
		PartitionEpoch: p.PartitionEpoch + 1, NewISR: []int32{1}})
	if !errors.Is(err, kerr.InvalidUpdateVersion) {
		t.Fatalf("stale alter: %+v %v", np, err)
	}

	// Deletion.
	if errs := b.DeleteTopics(ctx, []string{"events", "nope"}); errs[0] != nil || !errors.Is(errs[1], kerr.UnknownTopicOrPartition) {
		t.Fatalf("delete: %v", errs)
	}
	waitImage(t, b, "deletion", func(im *metadata.Image) bool { return im.Topic("events") == nil })

	// Watch delivers the current image first, then changes.
	wctx, wcancel := context.WithCancel(ctx)
	ch := b.Watch(wctx)
	if first := <-ch; first.Offset != b.Current().Offset && first.Offset > b.Current().Offset {
		t.Fatal("watch did not start at the current image")
	}
	mustCreateTopic(t, b, "later", 1, 1)
	for im := range ch {
		if im.Topic("later") != nil {
			break
		}
	}
	wcancel()
	for range ch {
	}

	// Closing the broker fences it at once (controlled shutdown).
	b.Close()
	if b.LeaseValid() {
		t.Fatal("lease valid after Close")
	}
	testutil.Eventually(t, 30*time.Second, "the closed broker fenced", func() bool {
		return q.servers[0].Image().Brokers[1].Fenced
	})
}

// TestFollowerRedirects checks that a follower answers with the leader's address and that
// raft and gRPC share the port.
func TestFollowerRedirects(t *testing.T) {
	checkNoGoroutineLeak(t)
	q := newTestQuorum(t, 3, nil)
	lead := q.leader()
	follower := (lead + 1) % 3
	// A follower learns the leader's address from its first AppendEntries; until then it
	// rightly answers without a hint, so wait for that before asking.
	testutil.Eventually(t, 10*time.Second, "the follower knows the leader", func() bool {
		_, addr := q.servers[follower].Leader()
		return addr != ""
	})
	cc, err := grpc.NewClient(q.voters[follower].Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	_, err = pb.NewControllerClient(cc).ListOffsetGroups(ctxFor(t), &pb.ListOffsetGroupsRequest{})
	hint, ok := notLeaderHint(err)
	if !ok || hint != q.voters[lead].Addr {
		t.Fatalf("follower answered %v (hint %q, leader %s)", err, hint, q.voters[lead].Addr)
	}
}

// TestConcurrentCommitsAreBatched commits from many goroutines and checks that they
// shared Raft records.
func TestConcurrentCommitsAreBatched(t *testing.T) {
	checkNoGoroutineLeak(t)
	q := newTestQuorum(t, 1, nil)
	s := q.servers[q.leader()]
	b := q.broker(1, "")
	mustCreateTopic(t, b, "t", 8, 1)
	ctx := ctxFor(t)
	before := s.AppliedIndex()
	const workers, each = 32, 20
	var wg sync.WaitGroup
	errc := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if err := b.CommitOffsets(ctx, "g", b.Current().GroupFence("g"), []metadata.CommittedOffset{{Topic: "t", Partition: int32(w % 8), Offset: int64(i)}}); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	records := s.AppliedIndex() - before
	if records >= workers*each {
		t.Fatalf("%d commits took %d raft records: not batched", workers*each, records)
	}
	t.Logf("%d commits in %d raft records", workers*each, records)
	got, err := b.FetchOffsets(ctx, "g", nil)
	if err != nil || len(got) != 8 {
		t.Fatalf("%+v %v", got, err)
	}
	for _, o := range got {
		if o.Offset != each-1 {
			t.Fatalf("partition %d at %d, want %d", o.Partition, o.Offset, each-1)
		}
	}
}

// TestCreateTopicsResentIsIdempotent: a CreateTopics attempt resent after one whose answer
// was lost carries the same caller-chosen topic id, and is answered with the topic the
// first created, not TOPIC_ALREADY_EXISTS; another call (another id) still gets that.
func TestCreateTopicsResentIsIdempotent(t *testing.T) {
	checkNoGoroutineLeak(t)
	q := newTestQuorum(t, 1, nil)
	q.broker(1, "")
	lead := q.leader()
	cc, err := grpc.NewClient(q.voters[lead].Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	cl := pb.NewControllerClient(cc)
	id := newTopicID()
	req := &pb.CreateTopicsRequest{Topics: []*pb.CreatableTopic{{Name: "resent", NumPartitions: 2, ReplicationFactor: 1, Id: id}}}
	first, err := cl.CreateTopics(ctxFor(t), req)
	if err != nil || first.Results[0].Error != nil {
		t.Fatalf("first attempt: %v %v", err, first.GetResults())
	}
	again, err := cl.CreateTopics(ctxFor(t), req)
	if err != nil || again.Results[0].Error != nil {
		t.Fatalf("resent attempt: %v %v", err, again.GetResults())
	}
	if !bytes.Equal(again.Results[0].Topic.Id, id) || len(again.Results[0].Topic.Partitions) != 2 {
		t.Fatalf("resent attempt answered %v, want the topic the first created", again.Results[0].Topic)
	}
	other := &pb.CreateTopicsRequest{Topics: []*pb.CreatableTopic{{Name: "resent", NumPartitions: 2, ReplicationFactor: 1, Id: newTopicID()}}}
	resp, err := cl.CreateTopics(ctxFor(t), other)
	if err != nil {
		t.Fatal(err)
	}
	if e := fromPBError(resp.Results[0].Error); !errors.Is(e, kerr.TopicAlreadyExists) {
		t.Fatalf("another call for the same name: %v, want TOPIC_ALREADY_EXISTS", e)
	}
}
