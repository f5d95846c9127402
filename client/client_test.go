package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// cluster starts an in-process kfake cluster on loopback and returns its options.
func cluster(t *testing.T, opts ...kfake.Opt) Options {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(3)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return Options{Brokers: c.ListenAddrs(), ClientID: "client-test", RequestTimeout: 5 * time.Second}
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func startClient(t *testing.T, o Options) *Client {
	t.Helper()
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func configValue(t Topic, name string) (Config, bool) {
	i := slices.IndexFunc(t.Configs, func(c Config) bool { return c.Name == name })
	if i < 0 {
		return Config{}, false
	}
	return t.Configs[i], true
}

func TestTopicAdmin(t *testing.T) {
	ctx := testContext(t)
	c := startClient(t, cluster(t))

	p, rf, err := c.CreateTopic(ctx, TopicSpec{Name: "orders", Partitions: 3, ReplicationFactor: 2,
		Configs: map[string]string{"retention.ms": "60000"}})
	if err != nil {
		t.Fatal(err)
	}
	if p != 3 || rf != 2 {
		t.Errorf("created with %d partitions, RF %d", p, rf)
	}
	if _, _, err := c.CreateTopic(ctx, TopicSpec{Name: "orders", Partitions: 1}); !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Errorf("second create: %v, want TOPIC_ALREADY_EXISTS", err)
	}
	if _, _, err := c.CreateTopic(ctx, TopicSpec{Name: "defaults"}); err != nil {
		t.Fatalf("create with broker defaults: %v", err)
	}
	if _, _, err := c.CreateTopic(ctx, TopicSpec{}); err == nil {
		t.Error("created a topic without a name")
	}

	names, err := c.ListTopics(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(names, []string{"defaults", "orders"}) {
		t.Errorf("ListTopics = %v", names)
	}

	topics, err := c.DescribeTopics(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if len(topics) != 1 {
		t.Fatalf("described %d topics", len(topics))
	}
	o := topics[0]
	if len(o.Partitions) != 3 || o.ReplicationFactor() != 2 {
		t.Errorf("orders: %d partitions, RF %d", len(o.Partitions), o.ReplicationFactor())
	}
	for i, part := range o.Partitions {
		if part.Partition != int32(i) || part.Leader < 0 || len(part.ISR) == 0 || !slices.Contains(part.Replicas, part.Leader) {
			t.Errorf("partition %+v", part)
		}
	}
	cfg, ok := configValue(o, "retention.ms")
	if !ok || cfg.Value != "60000" || cfg.Source != kmsg.ConfigSourceDynamicTopicConfig || cfg.IsDefault() {
		t.Errorf("retention.ms = %+v", cfg)
	}

	if _, err := c.DescribeTopics(ctx, "missing"); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Errorf("describe missing: %v", err)
	}
	all, err := c.DescribeTopics(ctx)
	if err != nil || len(all) != 2 || all[0].Name != "defaults" {
		t.Errorf("describe all: %v %+v", err, all)
	}

	if err := c.AlterTopicConfigs(ctx, "orders", map[string]string{"segment.bytes": "1048576"}, []string{"retention.ms"}); err != nil {
		t.Fatal(err)
	}
	topics, err = c.DescribeTopics(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if cfg, _ := configValue(topics[0], "segment.bytes"); cfg.Value != "1048576" {
		t.Errorf("segment.bytes after alter = %+v", cfg)
	}
	if cfg, _ := configValue(topics[0], "retention.ms"); cfg.Source == kmsg.ConfigSourceDynamicTopicConfig {
		t.Errorf("retention.ms still set after delete: %+v", cfg)
	}
	if err := c.AlterTopicConfigs(ctx, "orders", nil, nil); err == nil {
		t.Error("empty alter accepted")
	}
	if err := c.AlterTopicConfigs(ctx, "orders", map[string]string{"a": "1"}, []string{"a"}); err == nil {
		t.Error("set and delete of one key accepted")
	}

	if err := c.SetPartitions(ctx, "orders", 5); err != nil {
		t.Fatal(err)
	}
	if topics, _ = c.DescribeTopics(ctx, "orders"); len(topics[0].Partitions) != 5 {
		t.Errorf("%d partitions after SetPartitions(5)", len(topics[0].Partitions))
	}

	if err := c.DeleteTopics(ctx, "orders", "missing"); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Errorf("delete with a missing topic: %v", err)
	}
	if names, _ = c.ListTopics(ctx, false); !slices.Equal(names, []string{"defaults"}) {
		t.Errorf("after delete: %v", names)
	}
}

func TestParseOptions(t *testing.T) {
	for _, s := range []string{"", "all", "-1", "1", "0", "ALL"} {
		if _, err := ParseAcks(s); err != nil {
			t.Errorf("ParseAcks(%q): %v", s, err)
		}
	}
	if _, err := ParseAcks("2"); err == nil {
		t.Error("acks=2 accepted")
	}
	for _, s := range []string{"none", "uncompressed", "gzip", "snappy", "lz4", "zstd"} {
		if _, err := ParseCompression(s); err != nil {
			t.Errorf("ParseCompression(%q): %v", s, err)
		}
	}
	if _, err := New(Options{Compression: "brotli"}); err == nil {
		t.Error("brotli accepted")
	}
	if _, err := New(Options{Acks: "many"}); err == nil {
		t.Error("acks=many accepted")
	}
}

func values(recs []*kgo.Record) []string {
	var vs []string
	for _, r := range recs {
		vs = append(vs, string(r.Value))
	}
	return vs
}

func collect(t *testing.T, ctx context.Context, o Options, co ConsumeOptions, eo EachOptions) []*kgo.Record {
	t.Helper()
	cons, err := NewConsumer(o, co)
	if err != nil {
		t.Fatal(err)
	}
	var got []*kgo.Record
	if _, err := cons.Each(ctx, eo, func(r *kgo.Record) error { got = append(got, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := cons.Close(ctx); err != nil {
		t.Fatal(err)
	}
	return got
}

func TestProduceAndConsume(t *testing.T) {
	ctx := testContext(t)
	for _, tc := range []struct{ acks, compression string }{
		{"all", "none"}, {"1", "gzip"}, {"0", "snappy"}, {"all", "lz4"}, {"-1", "zstd"},
	} {
		t.Run(tc.acks+"/"+tc.compression, func(t *testing.T) {
			o := cluster(t, kfake.SeedTopics(2, "t"))
			o.Acks, o.Compression, o.ManualPartitions = tc.acks, tc.compression, true
			c := startClient(t, o)
			var recs []*kgo.Record
			for i := range 10 {
				recs = append(recs, &kgo.Record{Topic: "t", Partition: int32(i % 2), Value: fmt.Appendf(nil, "v%d", i)})
			}
			if err := c.Produce(ctx, recs...); err != nil {
				t.Fatal(err)
			}
			async := c.Async()
			for i := 10; i < 20; i++ {
				async.Produce(ctx, &kgo.Record{Topic: "t", Partition: 1, Value: fmt.Appendf(nil, "v%d", i)})
			}
			if n, err := async.Wait(ctx); err != nil || n != 10 {
				t.Fatalf("async: %d acked, %v", n, err)
			}

			got := collect(t, ctx, o, ConsumeOptions{Topics: []string{"t"}, Partitions: []int32{0}, From: FromBeginning}, EachOptions{Max: 5})
			if want := []string{"v0", "v2", "v4", "v6", "v8"}; !slices.Equal(values(got), want) {
				t.Errorf("partition 0: %v, want %v", values(got), want)
			}
			got = collect(t, ctx, o, ConsumeOptions{Topics: []string{"t"}, Partitions: []int32{1}, From: FromOffset, Offset: 12}, EachOptions{Max: 3})
			if want := []string{"v17", "v18", "v19"}; !slices.Equal(values(got), want) {
				t.Errorf("partition 1 from offset 12: %v, want %v", values(got), want)
			}
			got = collect(t, ctx, o, ConsumeOptions{Topics: []string{"t"}, From: FromBeginning}, EachOptions{Max: 20})
			if len(got) != 20 {
				t.Errorf("all partitions: %d records, want 20", len(got))
			}
		})
	}
}

func TestConsumeFromEndAndIdle(t *testing.T) {
	ctx := testContext(t)
	o := cluster(t, kfake.SeedTopics(1, "t"))
	c := startClient(t, o)
	if err := c.Produce(ctx, &kgo.Record{Topic: "t", Value: []byte("old")}); err != nil {
		t.Fatal(err)
	}
	cons, err := NewConsumer(o, ConsumeOptions{Topics: []string{"t"}, From: FromEnd})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close(ctx)
	// Nothing new yet: Each stops on the idle timeout without an error.
	n, err := cons.Each(ctx, EachOptions{Idle: 300 * time.Millisecond}, func(*kgo.Record) error { return nil })
	if err != nil || n != 0 {
		t.Fatalf("idle: %d records, %v", n, err)
	}
	if err := c.Produce(ctx, &kgo.Record{Topic: "t", Value: []byte("new")}); err != nil {
		t.Fatal(err)
	}
	var got []string
	if _, err := cons.Each(ctx, EachOptions{Max: 1}, func(r *kgo.Record) error { got = append(got, string(r.Value)); return nil }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"new"}) {
		t.Errorf("from end: %v", got)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := cons.Each(cancelled, EachOptions{}, func(*kgo.Record) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	stop := errors.New("stop")
	if err := c.Produce(ctx, &kgo.Record{Topic: "t", Value: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if _, err := cons.Each(ctx, EachOptions{}, func(*kgo.Record) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("fn error: %v", err)
	}
}

func TestConsumeOffsetOutOfRange(t *testing.T) {
	ctx := testContext(t)
	o := cluster(t, kfake.SeedTopics(1, "t"))
	cons, err := NewConsumer(o, ConsumeOptions{Topics: []string{"t"}, Partitions: []int32{0}, From: FromOffset, Offset: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close(ctx)
	if _, err := cons.Each(ctx, EachOptions{Max: 1}, func(*kgo.Record) error { return nil }); !errors.Is(err, kerr.OffsetOutOfRange) {
		t.Errorf("offset past the end: %v, want OFFSET_OUT_OF_RANGE", err)
	}
}

func TestConsumeOptionErrors(t *testing.T) {
	for _, co := range []ConsumeOptions{
		{},
		{Topics: []string{"t"}, From: FromOffset, Offset: 3},
		{Topics: []string{"t"}, From: FromOffset, Offset: -1, Partitions: []int32{0}},
		{Topics: []string{"t"}, Group: "g", Partitions: []int32{0}},
		{Topics: []string{"t"}, Group: "g", From: FromOffset, Partitions: []int32{0}},
		{Topics: []string{"t"}, Partitions: []int32{-2}},
	} {
		if _, err := NewConsumer(Options{}, co); err == nil {
			t.Errorf("accepted %+v", co)
		}
	}
}

// A group member commits only the records it handed out, so a second member resumes
// right after them.
func TestGroupResumes(t *testing.T) {
	ctx := testContext(t)
	o := cluster(t, kfake.SeedTopics(1, "t"))
	c := startClient(t, o)
	for i := range 6 {
		if err := c.Produce(ctx, &kgo.Record{Topic: "t", Value: fmt.Appendf(nil, "v%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	co := ConsumeOptions{Topics: []string{"t"}, Group: "g", From: FromBeginning}
	if got := values(collect(t, ctx, o, co, EachOptions{Max: 4})); !slices.Equal(got, []string{"v0", "v1", "v2", "v3"}) {
		t.Errorf("first member: %v", got)
	}
	if got := values(collect(t, ctx, o, co, EachOptions{Max: 2})); !slices.Equal(got, []string{"v4", "v5"}) {
		t.Errorf("second member: %v", got)
	}
}

func TestWithMessage(t *testing.T) {
	ke := kerr.InvalidPartitions
	for _, tc := range []struct {
		msg, want string
	}{
		{"", ke.Error()},
		{`topic "t1" has 5 partitions`, ke.Error() + `: topic "t1" has 5 partitions`},
		{ke.Error() + `: topic "t1" has 5 partitions`, ke.Error() + `: topic "t1" has 5 partitions`},
		{ke.Error(), ke.Error()},
	} {
		err := withMessage(ke, tc.msg)
		if err.Error() != tc.want || !errors.Is(err, ke) {
			t.Errorf("withMessage(%q) = %v, want %s", tc.msg, err, tc.want)
		}
	}
	if withMessage(nil, "x") != nil {
		t.Error("withMessage(nil) is not nil")
	}
}
