package protocol_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/metadata"
)

// offsetsRecord is one decoded record of __consumer_offsets.
type offsetsRecord struct {
	offset int64
	key    kmsg.OffsetCommitKey
	value  *kmsg.OffsetCommitValue // nil: tombstone
}

// nextOffsetsRecord polls cl until a record of group arrives, decoding it as Burrow
// does: the key's version says it is an offset commit, the value's its schema.
func nextOffsetsRecord(t *testing.T, ctx context.Context, cl *kgo.Client, group string) offsetsRecord {
	t.Helper()
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("no record of group %s in %s: %v", group, metadata.OffsetsTopic, ctx.Err())
		}
		for _, e := range fs.Errors() {
			t.Fatalf("fetch %s: %v", metadata.OffsetsTopic, e.Err)
		}
		var out *offsetsRecord
		fs.EachRecord(func(r *kgo.Record) {
			var k kmsg.OffsetCommitKey
			if out != nil || k.ReadFrom(r.Key) != nil || (k.Version != 0 && k.Version != 1) || k.Group != group {
				return
			}
			rec := offsetsRecord{offset: r.Offset, key: k}
			if r.Value != nil {
				rec.value = new(kmsg.OffsetCommitValue)
				if err := rec.value.ReadFrom(r.Value); err != nil {
					t.Fatalf("value at offset %d: %v", r.Offset, err)
				}
			}
			out = &rec
		})
		if out != nil {
			return *out
		}
	}
}

func TestConsumerOffsetsTopic(t *testing.T) {
	gb := startGroupBroker(t)
	gb.createTopic("events", 2, nil)
	ctx := ctxTimeout(t, 30*time.Second)
	adm := gb.admin()

	// Metadata lists it as internal, with offsets.topic.num.partitions partitions led by
	// their coordinators.
	td, err := adm.ListTopicsWithInternal(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d, ok := td[metadata.OffsetsTopic]
	if !ok || !d.IsInternal || len(d.Partitions) != metadata.DefaultOffsetsTopicPartitions || d.Err != nil {
		t.Fatalf("%s in metadata: %+v", metadata.OffsetsTopic, d)
	}
	for _, p := range d.Partitions {
		if p.Leader != 1 || p.Err != nil {
			t.Fatalf("partition %d: leader %d, %v", p.Partition, p.Leader, p.Err)
		}
	}
	if td, err := adm.ListTopics(ctx); err != nil || td.Has(metadata.OffsetsTopic) {
		t.Fatalf("ListTopics without internal topics lists %s (%v)", metadata.OffsetsTopic, err)
	}

	commit := func(group string, offset int64) {
		t.Helper()
		os := kadm.Offsets{}
		os.Add(kadm.Offset{Topic: "events", Partition: 1, At: offset, LeaderEpoch: 0, Metadata: "m"})
		resp, err := adm.CommitOffsets(ctx, group, os)
		if err != nil || resp.Error() != nil {
			t.Fatalf("commit: %v %v", err, resp.Error())
		}
	}
	commit("burrow-g", 42)

	// A reader from the start sees the commit, in Kafka's schemas.
	cl := gb.client(kgo.ConsumeTopics(metadata.OffsetsTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(time.Second))
	r := nextOffsetsRecord(t, ctx, cl, "burrow-g")
	if r.key.Version != 1 || r.key.Topic != "events" || r.key.Partition != 1 || r.value == nil ||
		r.value.Version != 3 || r.value.Offset != 42 || r.value.Metadata != "m" || r.value.CommitTimestamp <= 0 {
		t.Fatalf("record: key %+v value %+v", r.key, r.value)
	}

	// A reader that follows the end sees the next commit, then the deletion's tombstone.
	commit("burrow-g", 43)
	if next := nextOffsetsRecord(t, ctx, cl, "burrow-g"); next.value == nil || next.value.Offset != 43 || next.offset <= r.offset {
		t.Fatalf("next record at %d: %+v (first at %d)", next.offset, next.value, r.offset)
	}
	if res, err := adm.DeleteGroup(ctx, "burrow-g"); err != nil || res.Err != nil {
		t.Fatalf("delete group: %v %v", err, res.Err)
	}
	if tomb := nextOffsetsRecord(t, ctx, cl, "burrow-g"); tomb.value != nil || tomb.key.Topic != "events" || tomb.key.Partition != 1 {
		t.Fatalf("after the deletion: key %+v value %+v, want a tombstone", tomb.key, tomb.value)
	}

	// ListOffsets: the partition's end is past what was read.
	p := metadata.OffsetsPartition("burrow-g", metadata.DefaultOffsetsTopicPartitions)
	ends, err := adm.ListEndOffsets(ctx, metadata.OffsetsTopic)
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := ends.Lookup(metadata.OffsetsTopic, p); !ok || o.Err != nil || o.Offset <= r.offset {
		t.Fatalf("end offset of partition %d: %+v", p, o)
	}

	// Writes are refused, as Kafka refuses a client's append to an internal topic.
	pr := gb.client(kgo.DefaultProduceTopic(metadata.OffsetsTopic), kgo.RecordRetries(1))
	err = pr.ProduceSync(ctx, &kgo.Record{Key: []byte("k"), Value: []byte("v")}).FirstErr()
	if !errors.Is(err, kerr.InvalidTopicException) {
		t.Fatalf("produce to %s: %v, want INVALID_TOPIC_EXCEPTION", metadata.OffsetsTopic, err)
	}
	// And it cannot be created as a real topic.
	if res, err := adm.CreateTopic(ctx, 1, 1, nil, metadata.OffsetsTopic); err == nil && !errors.Is(res.Err, kerr.TopicAlreadyExists) {
		t.Fatalf("create %s: %v", metadata.OffsetsTopic, res.Err)
	}
}

// franz-go's regex consumer never consumes internal topics, and so must not consume
// __consumer_offsets, which a consumer that names it does.
func TestRegexConsumerSkipsConsumerOffsets(t *testing.T) {
	gb := startGroupBroker(t)
	gb.createTopic("events", 1, nil)
	ctx := ctxTimeout(t, 30*time.Second)
	pr := gb.client()
	if err := pr.ProduceSync(ctx, &kgo.Record{Topic: "events", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	adm := gb.admin()
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: "events", Partition: 0, At: 1, LeaderEpoch: -1})
	if resp, err := adm.CommitOffsets(ctx, "other", os); err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}

	cl := gb.client(kgo.ConsumeRegex(), kgo.ConsumeTopics(".*"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := 0
	for got == 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("no record from events")
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Topic != "events" {
				t.Fatalf("regex consumer read %s", r.Topic)
			}
			got++
		})
	}
	if topics := cl.GetConsumeTopics(); slices.Contains(topics, metadata.OffsetsTopic) || !slices.Contains(topics, "events") {
		t.Fatalf("regex consumer consumes %v", topics)
	}
}
