package replication_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shalelog/shale/controller"
	"github.com/shalelog/shale/controller/controllertest"
	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/server/broker/brokertest"
	"github.com/shalelog/shale/tiered/objstore"
)

// budgetStore completes only as many uploads as its budget allows (a negative budget:
// all): the manifest of every other one is refused, so that the test decides where the
// remote log ends.
type budgetStore struct {
	objstore.Store
	mu     sync.Mutex
	budget int
}

func (b *budgetStore) setBudget(n int) {
	b.mu.Lock()
	b.budget = n
	b.mu.Unlock()
}

func (b *budgetStore) Put(ctx context.Context, key string, body io.Reader, size int64) error {
	if strings.HasSuffix(key, ".manifest") {
		b.mu.Lock()
		ok := b.budget != 0
		if b.budget > 0 {
			b.budget--
		}
		b.mu.Unlock()
		if !ok {
			return errors.New("injected: no upload budget left")
		}
	}
	return b.Store.Put(ctx, key, body, size)
}

// TestTieredStorageLeaderWithOtherSegmentBoundaries: the replicas roll their segments at
// different offsets (segment.ms rolls an idle-enough segment on each broker's own clock),
// the old leader's uploads end inside one of the new leader's segments, and the new
// leader uploads the part of that segment above the remote log's end: the remote log
// stays one run without overlap or gap, the new leader's local log shrinks, and the whole
// log reads from 0 byte for byte.
func TestTieredStorageLeaderWithOtherSegmentBoundaries(t *testing.T) {
	store := &budgetStore{Store: objstore.NewMemory()}
	first := brokertest.Start(t, tieredOptions(store),
		brokertest.WithController(controllertest.WithConfig(func(c *controller.Config) { c.RemoteLogStorageSystemEnable = true })))
	second := first.AddBroker(2, tieredOptions(store))
	brokers := map[int32]*brokertest.Broker{1: first, 2: second}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := first.Client(kgo.ProducerLinger(0))
	defer cl.Close()
	const topic = "boundaries"
	res, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 2, map[string]*string{
		"remote.storage.enable": kadm.StringPtr("true"), "segment.bytes": kadm.StringPtr("1048576"),
		"segment.ms": kadm.StringPtr("200"), "local.retention.bytes": kadm.StringPtr("1"),
	}, topic)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	first.WaitApplied("topic", func(im *metadata.Image) bool {
		p := im.Partition(topic, 0)
		return p != nil && len(p.ISR) == 2
	})
	old := first.Store.Current().Partition(topic, 0)
	next := old.Replicas[0] + old.Replicas[1] - old.Leader
	// A topic is created with every replica in its ISR: wait for both to exist.
	waitFor(t, "both replicas", func() bool {
		return brokers[old.Leader].Replicas().Replica(topic, 0) != nil && brokers[next].Replicas().Replica(topic, 0) != nil
	})
	leaderP := brokers[old.Leader].Replicas().Replica(topic, 0)
	followerP := brokers[next].Replicas().Replica(topic, 0)
	bases := func(segs []shalelog.SealedSegment) []int64 {
		var out []int64
		for _, s := range segs {
			out = append(out, s.BaseOffset)
		}
		return out
	}

	// One old timestamp for every record: segment.ms then rolls by each broker's wall
	// clock only (an idle segment), never by the records' timestamps, which both
	// replicas would agree on.
	ts := time.Now().Add(-time.Hour)
	var produced [][]byte
	produce := func(count int) {
		for range count {
			v := []byte(fmt.Sprintf("value-%d-%s", len(produced), strings.Repeat("z", 50)))
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: v, Timestamp: ts}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			produced = append(produced, v)
		}
	}
	// Produce until the leader has closed a segment whose end is inside one of the
	// follower's closed segments; no upload completes meanwhile.
	var cut int64 = -1
	var uploads int
	for cut < 0 {
		produce(20)
		lb, fb := bases(leaderP.SealedSegments()), bases(followerP.SealedSegments())
		fsegs := followerP.SealedSegments()
		for i, b := range lb {
			if i == 0 || slices.Contains(fb, b) {
				continue
			}
			for _, s := range fsegs {
				if s.BaseOffset < b && b < s.NextOffset {
					cut, uploads = b, i
				}
			}
			if cut >= 0 {
				break
			}
		}
		if len(produced) > 20000 {
			t.Fatalf("no leader segment boundary inside a follower segment: leader %v, follower %v", lb, fb)
		}
	}
	// The old leader uploads its segments below cut, and no more.
	store.setBudget(uploads)
	remote := func() *metadata.RemoteLog { return first.Replicas().Image().RemoteLog(topic, 0) }
	waitFor(t, "the old leader's uploads up to the cut", func() bool { return remote().CoveredEnd() == cut })

	errs, err := first.Store.AlterPartitionReassignments(ctx, []metadata.Reassignment{{Topic: topic, Partition: 0, Replicas: []int32{next, old.Leader}}})
	if err == nil {
		err = errs[0]
	}
	if err != nil {
		t.Fatal(err)
	}
	first.WaitApplied("reassigned", func(im *metadata.Image) bool {
		p := im.Partition(topic, 0)
		return p.Replicas[0] == next && !p.Reassigning() && len(p.ISR) == 2
	})
	if _, err := first.Store.ElectLeaders(ctx, true, map[string][]int32{topic: {0}}); err != nil {
		t.Fatal(err)
	}
	for _, b := range brokers {
		b.WaitApplied("new leader", func(im *metadata.Image) bool { return im.Partition(topic, 0).Leader == next })
	}
	store.setBudget(-1)
	produce(50)
	end := int64(len(produced))
	waitFor(t, "the new leader's uploads past the cut and its local log shrunk", func() bool {
		rl := remote()
		return rl.CoveredEnd() > cut && brokers[next].Replicas().Replica(topic, 0).LocalLogStartOffset() > cut
	})

	rl := remote()
	part := false
	for i, s := range rl.Segments {
		if i > 0 && s.BaseOffset != rl.Segments[i-1].EndOffset+1 {
			t.Fatalf("remote segments %d-%d and %d-%d overlap or leave a gap", rl.Segments[i-1].BaseOffset, rl.Segments[i-1].EndOffset, s.BaseOffset, s.EndOffset)
		}
		part = part || (s.BaseOffset == cut && s.Broker == next)
	}
	if rl.Segments[0].BaseOffset != 0 || !part {
		t.Fatalf("remote log %+v: want it from 0 and a segment from %d uploaded by broker %d", rl.Segments, cut, next)
	}
	cons := first.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(0)}}))
	defer cons.Close()
	var got []*kgo.Record
	for int64(len(got)) < end {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		got = append(got, fs.Records()...)
	}
	for i, r := range got[:end] {
		if r.Offset != int64(i) || !bytes.Equal(r.Value, produced[i]) {
			t.Fatalf("record %d: offset %d value %q", i, r.Offset, r.Value)
		}
	}
}
