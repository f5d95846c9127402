package controller

import (
	"bytes"
	"io"
	"log/slog"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/metadata"

	pb "github.com/shalelog/shale/controller/proto"
)

func linksRecord(r *pb.ClusterLinksRecord) *pb.Record {
	return &pb.Record{Record: &pb.Record_ClusterLinks{ClusterLinks: r}}
}

func TestClusterLinksMirrorsEpochsAndPromotion(t *testing.T) {
	h := buildBusyFSM(t)
	// A mirror needs its link.
	res := h.apply(linksRecord(&pb.ClusterLinksRecord{MirrorTopics: []*pb.NewTopic{{Name: "m", Id: topicID(90), NumPartitions: 2, ReplicationFactor: 3}},
		Mirrors: []*pb.MirrorTopicState{{Topic: "m", Link: "east", SourceTopic: "src"}}}))
	wantKafkaErr(t, res.err, kerr.InvalidRequest)
	if h.f.img.Topic("m") != nil {
		t.Fatal("a refused mirror record created its topic")
	}
	link := &pb.ClusterLinkState{Name: "east", Id: topicID(80), Configs: map[string]string{"bootstrap.servers": "a:9092"}, CreatedMs: 1}
	if res := h.apply(linksRecord(&pb.ClusterLinksRecord{Links: []*pb.ClusterLinkState{link}})); res.err != nil {
		t.Fatal(res.err)
	}
	// The same name under another id is another link.
	other := &pb.ClusterLinkState{Name: "east", Id: topicID(81), Configs: map[string]string{"bootstrap.servers": "b:9092"}}
	wantKafkaErr(t, h.apply(linksRecord(&pb.ClusterLinksRecord{Links: []*pb.ClusterLinkState{other}})).err, kerr.InvalidRequest)

	if res := h.apply(linksRecord(&pb.ClusterLinksRecord{MirrorTopics: []*pb.NewTopic{{Name: "m", Id: topicID(90), NumPartitions: 2, ReplicationFactor: 3}},
		Mirrors: []*pb.MirrorTopicState{{Topic: "m", Link: "east", SourceTopic: "src"}}})); res.err != nil {
		t.Fatal(res.err)
	}
	if m := h.f.img.Mirror("m"); !m.Active() || m.Link != "east" || m.SourceTopic != "src" || len(h.f.img.Topic("m").Partitions) != 2 {
		t.Fatalf("mirror %+v, topic %+v", m, h.f.img.Topic("m"))
	}
	// The source epoch floor only rises.
	for _, e := range []int32{7, 3} {
		if res := h.apply(linksRecord(&pb.ClusterLinksRecord{Epochs: []*pb.MirrorEpoch{{Topic: "m", Partition: 1, Epoch: e}}})); res.err != nil {
			t.Fatal(res.err)
		}
	}
	if got := h.f.img.Mirror("m").SourceEpochs; !reflect.DeepEqual(got, []int32{-1, 7}) {
		t.Fatalf("source epochs %v, want [-1 7]", got)
	}
	wantKafkaErr(t, h.apply(linksRecord(&pb.ClusterLinksRecord{Epochs: []*pb.MirrorEpoch{{Topic: "m", Partition: 2, Epoch: 1}}})).err,
		kerr.UnknownTopicOrPartition)

	before := []metadata.Partition{h.part("m", 0), h.part("m", 1)}
	st := mirrorToPB(h.f.img.Mirror("m"))
	st.State = int32(metadata.MirrorStopped)
	if res := h.apply(linksRecord(&pb.ClusterLinksRecord{TimeMs: 99, Mirrors: []*pb.MirrorTopicState{st}})); res.err != nil {
		t.Fatal(res.err)
	}
	if m := h.f.img.Mirror("m"); m.Active() || m.StateChangedMs != 99 {
		t.Fatalf("promoted mirror %+v", m)
	}
	// Promotion starts the destination's epochs above every source epoch its logs hold.
	if p := h.part("m", 0); p.LeaderEpoch != before[0].LeaderEpoch+1 || p.PartitionEpoch != before[0].PartitionEpoch+1 {
		t.Fatalf("partition 0 after promotion %+v, before %+v", p, before[0])
	}
	if p := h.part("m", 1); p.LeaderEpoch != 8 {
		t.Fatalf("partition 1 leader epoch %d after promotion, want 8 (source floor 7 + 1)", p.LeaderEpoch)
	}

	wantLinks, wantMirrors := h.f.img.Links, h.f.img.Mirrors
	g := newFSM(slog.New(slog.DiscardHandler))
	if err := g.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, h.f)))); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g.img.Links, wantLinks) || !reflect.DeepEqual(g.img.Mirrors, wantMirrors) {
		t.Fatalf("restored links %v mirrors %v, want %v %v", g.img.Links, g.img.Mirrors, wantLinks, wantMirrors)
	}
	var a imageAssembler
	var im *metadata.Image
	for _, c := range imageChunks(h.f.img, nil, 2) {
		var err error
		if im, err = a.add(c); err != nil {
			t.Fatal(err)
		}
	}
	if im == nil || !reflect.DeepEqual(im.Links, wantLinks) || !reflect.DeepEqual(im.Mirrors, wantMirrors) {
		t.Fatalf("assembled image %+v", im)
	}

	// Deleting the topic deletes its mirror; deleting the link leaves no link.
	h.apply(&pb.Record{Record: &pb.Record_DeleteTopics{DeleteTopics: &pb.DeleteTopicsRecord{Topics: []*pb.TopicRef{{Name: "m", Id: topicID(90)}}}}})
	if h.f.img.Mirror("m") != nil {
		t.Fatal("mirror state outlived its topic")
	}
	if res := h.apply(linksRecord(&pb.ClusterLinksRecord{DeletedLinks: []string{"east"}})); res.err != nil {
		t.Fatal(res.err)
	}
	if len(h.f.img.Links) != 0 {
		t.Fatalf("links %v after delete", h.f.img.Links)
	}
}

func TestDeleteLinkStopsItsMirrors(t *testing.T) {
	h := buildBusyFSM(t)
	h.apply(linksRecord(&pb.ClusterLinksRecord{Links: []*pb.ClusterLinkState{{Name: "l", Id: topicID(80)}}}))
	h.apply(linksRecord(&pb.ClusterLinksRecord{MirrorTopics: []*pb.NewTopic{{Name: "m", Id: topicID(90), NumPartitions: 1, ReplicationFactor: 1}},
		Mirrors: []*pb.MirrorTopicState{{Topic: "m", Link: "l", SourceTopic: "m"}}}))
	if res := h.apply(linksRecord(&pb.ClusterLinksRecord{TimeMs: 5, DeletedLinks: []string{"l"}})); res.err != nil {
		t.Fatal(res.err)
	}
	if m := h.f.img.Mirror("m"); m == nil || m.Active() {
		t.Fatalf("mirror of a deleted link %+v, want stopped", m)
	}
}

// TestExistingTopicBecomesAMirror: failback makes an existing topic a mirror; its epoch
// floor starts at each partition's leader epoch and every replica gets the new state.
func TestExistingTopicBecomesAMirror(t *testing.T) {
	h := buildBusyFSM(t)
	h.apply(linksRecord(&pb.ClusterLinksRecord{Links: []*pb.ClusterLinkState{{Name: "back", Id: topicID(80)}}}))
	before := []metadata.Partition{h.part("topic-1", 0), h.part("topic-1", 1)}
	if res := h.apply(linksRecord(&pb.ClusterLinksRecord{Mirrors: []*pb.MirrorTopicState{{Topic: "topic-1", Link: "back", SourceTopic: "topic-1"}}})); res.err != nil {
		t.Fatal(res.err)
	}
	m := h.f.img.Mirror("topic-1")
	if !m.Active() || !reflect.DeepEqual(m.SourceEpochs, []int32{before[0].LeaderEpoch, before[1].LeaderEpoch}) {
		t.Fatalf("mirror %+v, leader epochs %d %d", m, before[0].LeaderEpoch, before[1].LeaderEpoch)
	}
	for i := range before {
		if p := h.part("topic-1", int32(i)); p.PartitionEpoch != before[i].PartitionEpoch+1 || p.LeaderEpoch != before[i].LeaderEpoch {
			t.Fatalf("partition %d %+v, before %+v", i, p, before[i])
		}
	}
}
