package cluster

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shalelog/shale/internal/testutil"
)

// shaleCLI runs a shale command line and returns its stdout, failing the test on a
// non-zero exit.
func shaleCLI(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(shaleBin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("shale %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestMirrorAcrossClustersAndFailover: two clusters of three controller and three broker
// processes each, RF=3 on both. A mirror topic on the destination copies a topic that an
// acks=all producer writes to while a leader broker is killed on each side; every
// acknowledged record reaches the destination at its source offset; a consumer group's
// offsets are synced; the whole source cluster is then killed, the mirror is failed over,
// and the group resumes on the destination from its synced offsets.
func TestMirrorAcrossClustersAndFailover(t *testing.T) {
	src := newCluster(t)
	restPort := testutil.FreePort(t)
	dst := newClusterWith(t, func(id int32) []string {
		if id == 4 {
			return []string{fmt.Sprintf("--rest.proxy.listener=127.0.0.1:%d", restPort)}
		}
		return nil
	})
	rest := fmt.Sprintf("--rest-url=http://127.0.0.1:%d", restPort)
	createTopic(t, src.brokers[0].addr, newTopic("orders", 2, 3))
	var srcAddrs []string
	for _, b := range src.brokers {
		srcAddrs = append(srcAddrs, b.addr)
	}
	shaleCLI(t, "link", "create", rest, "--link", "src", "--config", "bootstrap.servers="+strings.Join(srcAddrs, ","),
		"--config", "consumer.offset.sync.enable=true", "--config", "consumer.offset.sync.ms=500",
		"--config", "consumer.offset.group.filters=cg")
	shaleCLI(t, "link", "mirror", rest, "--link", "src", "--source-topic", "orders")

	prod := startAckedProducer(src, "orders", 50)
	ackedAtLeast := func(n int) {
		t.Helper()
		testutil.Eventually(t, 60*time.Second, fmt.Sprintf("%d records acknowledged", n), func() bool {
			prod.mu.Lock()
			defer prod.mu.Unlock()
			return len(prod.acked) >= n
		})
	}
	ackedAtLeast(50)
	src.broker(4).kill9()
	time.Sleep(2 * sessionTimeout)
	src.broker(4).start()
	src.waitBrokerReady(src.broker(4))
	dst.broker(5).kill9()
	time.Sleep(2 * sessionTimeout)
	dst.broker(5).start()
	dst.waitBrokerReady(dst.broker(5))
	prod.mu.Lock()
	n := len(prod.acked)
	prod.mu.Unlock()
	ackedAtLeast(n + 50)
	prod.stop()
	prod.wg.Wait()
	if len(prod.acked) == 0 {
		t.Fatal("nothing was acknowledged")
	}

	// A group consumes part of the topic on the source and commits.
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	srcAdm := kadm.NewClient(src.kafkaClient())
	ends, err := srcAdm.ListEndOffsets(ctx, "orders")
	if err != nil || ends.Error() != nil {
		t.Fatalf("source end offsets: %v %v", err, ends.Error())
	}
	commit := kadm.Offsets{}
	ends.Each(func(o kadm.ListedOffset) {
		commit.Add(kadm.Offset{Topic: o.Topic, Partition: o.Partition, At: o.Offset / 2, LeaderEpoch: -1})
	})
	if res, err := srcAdm.CommitOffsets(ctx, "cg", commit); err != nil || res.Error() != nil {
		t.Fatalf("commit on the source: %v %v", err, res.Error())
	}

	// Every acknowledged record, at the offset it has on the source.
	srcRecords := readAll(t, ctx, src, "orders", ends)
	dstAdm := kadm.NewClient(dst.kafkaClient())
	testutil.Eventually(t, 90*time.Second, "the mirror caught up with the source", func() bool {
		de, err := dstAdm.ListEndOffsets(ctx, "orders")
		if err != nil || de.Error() != nil {
			return false
		}
		same := true
		ends.Each(func(o kadm.ListedOffset) {
			d, ok := de.Lookup(o.Topic, o.Partition)
			same = same && ok && d.Offset == o.Offset
		})
		return same
	})
	dstRecords := readAll(t, ctx, dst, "orders", ends)
	for k, v := range srcRecords {
		if dstRecords[k] != v {
			t.Fatalf("record %s: source %q, destination %q", k, v, dstRecords[k])
		}
	}
	seen := map[string]bool{}
	for _, v := range dstRecords {
		seen[v] = true
	}
	for v := range prod.acked {
		if !seen[v] {
			t.Fatalf("acknowledged record %s is not on the destination", v)
		}
	}
	testutil.Eventually(t, 60*time.Second, "the group's offsets synced", func() bool {
		got, err := dstAdm.FetchOffsets(ctx, "cg")
		if err != nil {
			return false
		}
		same := true
		commit.Each(func(o kadm.Offset) {
			g, ok := got.Lookup(o.Topic, o.Partition)
			same = same && ok && g.At == o.At
		})
		return same
	})

	// The source is lost: fail over.
	for _, p := range append(src.brokers, src.controllers...) {
		p.kill9()
	}
	out := shaleCLI(t, "link", "failover", rest, "--link", "src")
	if !strings.Contains(out, "orders") {
		t.Fatalf("failover printed %q", out)
	}
	pcl := dst.kafkaClient(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(50))
	if err := pcl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("after failover")}).FirstErr(); err != nil {
		t.Fatalf("produce after failover: %v", err)
	}
	// The group resumes where it committed on the source.
	cons := dst.kafkaClient(kgo.ConsumerGroup("cg"), kgo.ConsumeTopics("orders"), kgo.DisableAutoCommit())
	first := map[int32]int64{}
	for len(first) < 2 && ctx.Err() == nil {
		cons.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			if _, ok := first[r.Partition]; !ok {
				first[r.Partition] = r.Offset
			}
		})
	}
	commit.Each(func(o kadm.Offset) {
		if first[o.Partition] != o.At {
			t.Errorf("group resumed partition %d at %d, want its synced offset %d", o.Partition, first[o.Partition], o.At)
		}
	})
}

// readAll reads a topic from the start to ends, keyed partition/offset.
func readAll(t *testing.T, ctx context.Context, c *cluster, topic string, ends kadm.ListedOffsets) map[string]string {
	t.Helper()
	cl := c.kafkaClient(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	out := map[string]string{}
	want := int64(0)
	ends.Each(func(o kadm.ListedOffset) { want += o.Offset })
	for int64(len(out)) < want && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			if e, ok := ends.Lookup(topic, r.Partition); ok && r.Offset < e.Offset {
				out[strconv.Itoa(int(r.Partition))+"/"+strconv.FormatInt(r.Offset, 10)] = string(r.Value)
			}
		})
	}
	if int64(len(out)) != want {
		t.Fatalf("read %d of %d records of %s", len(out), want, topic)
	}
	return out
}
