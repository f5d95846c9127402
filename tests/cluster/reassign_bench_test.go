package cluster

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestBenchReassignment measures how fast a reassignment moves data onto a new broker
// while an acks=all producer keeps writing, and what that producer loses meanwhile: a
// 3-broker cluster holds SHALE_BENCH_REASSIGN_MB (default 200) MB in 8 RF=3 partitions;
// a fourth broker starts and every partition moves one replica (broker 4's) onto it.
// It reports MB moved per second and the producer's throughput during the move as a
// ratio of before: unthrottled with a closed-loop producer (as fast as it goes), and
// with follower.replication.throttled.rate at 10 MB/s and the producer paced at 4 MB/s
// (a throttle below the produce rate would never let the new replica catch up).
// It only reports; it runs with SHALE_BENCH_REASSIGN=1.
func TestBenchReassignment(t *testing.T) {
	if os.Getenv("SHALE_BENCH_REASSIGN") == "" {
		t.Skip("a benchmark: set SHALE_BENCH_REASSIGN=1")
	}
	mb := 200
	if s := os.Getenv("SHALE_BENCH_REASSIGN_MB"); s != "" {
		var err error
		if mb, err = strconv.Atoi(s); err != nil || mb < 1 {
			t.Fatalf("SHALE_BENCH_REASSIGN_MB=%q", s)
		}
	}
	for _, v := range []struct {
		name  string
		rate  int64 // produce bytes per second; 0: closed loop
		extra []string
	}{
		{"unthrottled-closed-loop", 0, nil},
		{"throttled-10MBps-produce-4MBps", 4e6, []string{"--follower.replication.throttled.rate=10000000"}},
	} {
		t.Run(v.name, func(t *testing.T) { benchReassign(t, mb, v.rate, v.extra) })
	}
}

// loadGen is a closed-loop acks=all producer of 1 KiB records to every partition.
type loadGen struct {
	acked  atomic.Int64 // bytes
	cancel context.CancelFunc
	done   chan struct{}
}

func (c *cluster) startLoad(topic string, acks kgo.Acks, rate int64) *loadGen {
	opts := []kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(acks), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordDeliveryTimeout(120 * time.Second), kgo.ProducerBatchMaxBytes(1 << 20)}
	if acks != kgo.AllISRAcks() {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	cl := c.kafkaClient(opts...)
	ctx, cancel := context.WithCancel(context.Background())
	lg := &loadGen{cancel: cancel, done: make(chan struct{})}
	value := bytes.Repeat([]byte("r"), 1024)
	go func() {
		defer close(lg.done)
		start := time.Now()
		for sent := int64(0); ctx.Err() == nil; sent += int64(len(value)) {
			if rate > 0 {
				// Open loop: record i is due at start + i*size/rate.
				if d := time.Until(start.Add(time.Duration(float64(sent) / float64(rate) * float64(time.Second)))); d > 0 {
					time.Sleep(d)
				}
			}
			cl.Produce(ctx, &kgo.Record{Value: value}, func(r *kgo.Record, err error) {
				if err == nil {
					lg.acked.Add(int64(len(r.Value)))
				}
			})
		}
		_ = cl.Flush(context.Background())
	}()
	return lg
}

func (lg *loadGen) stop() { lg.cancel(); <-lg.done }

func benchReassign(t *testing.T, mb int, rate int64, extra []string) {
	c := newCluster(t, extra...)
	const parts = 8
	createTopic(t, c.brokers[0].addr, withConfig(newTopic("bench", parts, 3), "min.insync.replicas", "2"))
	c.waitFullISR("bench", 30*time.Second)

	pre := c.startLoad("bench", kgo.LeaderAck(), 0)
	for pre.acked.Load() < int64(mb)<<20 {
		time.Sleep(50 * time.Millisecond)
	}
	pre.stop()
	c.waitFullISR("bench", 60*time.Second)

	load := c.startLoad("bench", kgo.AllISRAcks(), rate)
	time.Sleep(2 * time.Second) // warm-up
	base0, start := load.acked.Load(), time.Now()
	time.Sleep(5 * time.Second)
	baseRate := float64(load.acked.Load()-base0) / time.Since(start).Seconds()

	nb := c.addBroker()
	adm := kadm.NewClient(c.kafkaClient())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	md, err := adm.Metadata(ctx, "bench")
	if err != nil {
		t.Fatal(err)
	}
	var req kadm.AlterPartitionAssignmentsReq
	all := kadm.TopicsSet{}
	for _, p := range md.Topics["bench"].Partitions {
		target := make([]int32, 0, len(p.Replicas))
		for _, r := range p.Replicas {
			if r == 4 {
				r = nb.id
			}
			target = append(target, r)
		}
		req.Assign("bench", p.Partition, target)
		all.Add("bench", p.Partition)
	}
	during0, moveStart := load.acked.Load(), time.Now()
	resps, err := adm.AlterPartitionAssignments(ctx, req)
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	for {
		list, err := adm.ListPartitionReassignments(ctx, all)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	took := time.Since(moveStart)
	duringRate := float64(load.acked.Load()-during0) / took.Seconds()
	// Every partition gained a replica on the new broker, which so fetched every record
	// of the topic: the MB moved are the records' values (1 KiB each).
	ends, err := adm.ListEndOffsets(ctx, "bench")
	if err != nil {
		t.Fatal(err)
	}
	var records int64
	ends.Each(func(o kadm.ListedOffset) { records += o.Offset })
	load.stop()
	moved := float64(records*1024) / 1e6
	if rate > 0 {
		// A paced producer's "before" is what it offers: catching up after the warm-up
		// would inflate a measured one.
		baseRate = float64(rate)
	}
	t.Logf("moved %.0f MB (record values) onto broker %d in %v: %.1f MB/s; acks=all produce %.1f MB/s before, %.1f MB/s during (%.2f of before)",
		moved, nb.id, took.Round(time.Millisecond), moved/took.Seconds(), baseRate/1e6, duringRate/1e6, duringRate/baseRate)
}
