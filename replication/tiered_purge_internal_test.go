package replication

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/tiered/objstore"
	"github.com/shalelog/shale/tiered/remotelog"
)

// purgeLogs records the purges reported done.
type purgeLogs struct {
	metadata.RemoteLogStore
	mu     sync.Mutex
	purged []metadata.RemotePurgeKey
}

func (p *purgeLogs) RemotePurged(_ context.Context, topicID [16]byte, partition int32) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.purged = append(p.purged, metadata.RemotePurgeKey{TopicID: topicID, Partition: partition})
	return nil
}

func (p *purgeLogs) reported() []metadata.RemotePurgeKey {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]metadata.RemotePurgeKey(nil), p.purged...)
}

// listFails fails every List while fail is set.
type listFails struct {
	objstore.Store
	mu   sync.Mutex
	fail bool
}

func (l *listFails) List(ctx context.Context, prefix string) ([]objstore.Object, error) {
	l.mu.Lock()
	fail := l.fail
	l.mu.Unlock()
	if fail {
		return nil, errors.New("injected: store unavailable")
	}
	return l.Store.List(ctx, prefix)
}

// TestPurgeDeletedFromImage: the uploader purges the deleted topics' partitions the
// image names it to purge (and no other: one broker per purge), deletes every object
// under the partition's prefix, committed or orphan, leaves other partitions' objects
// alone, and reports each purge done only once its objects are gone; a store failure
// counts as a delete error and is retried at the next pass; once the other purge's
// broker is fenced, this one takes it over.
func TestPurgeDeletedFromImage(t *testing.T) {
	ctx := context.Background()
	gone, other, live := [16]byte{1}, [16]byte{2}, [16]byte{3}
	mem := objstore.NewMemory()
	put := func(topicID [16]byte, partition int32, base int64, suffixes ...string) {
		seg := remotelog.Segment{TopicID: topicID, Partition: partition, BaseOffset: base, UploadID: remotelog.NewUploadID()}
		for _, s := range suffixes {
			if err := mem.Put(ctx, seg.Key(s), strings.NewReader("x"), 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	put(gone, 0, 0, ".manifest", ".log", ".index")
	put(gone, 0, 100, ".log") // an upload that failed halfway
	put(other, 0, 0, ".manifest", ".log")
	put(live, 0, 0, ".manifest", ".log")
	count := func(topicID [16]byte) int {
		objs, err := mem.List(ctx, remotelog.PartitionPrefix(topicID, 0))
		if err != nil {
			t.Fatal(err)
		}
		return len(objs)
	}

	image := func(offset uint64, fenced2 bool) *metadata.Image {
		return &metadata.Image{Offset: offset, ControllerID: 1, Topics: map[string]*metadata.Topic{},
			Brokers: map[int32]metadata.Broker{1: {ID: 1, Epoch: 3}, 2: {ID: 2, Epoch: 3, Fenced: fenced2}},
			RemotePurges: metadata.RemotePurges{
				{TopicID: gone, Partition: 0}:  {Topic: "gone", TopicID: gone, Partition: 0, Leader: 1},
				{TopicID: other, Partition: 0}: {Topic: "other", TopicID: other, Partition: 0, Leader: 2},
			}}
	}
	store := &listFails{Store: mem, fail: true}
	logs := &purgeLogs{}
	reg := prometheus.NewRegistry()
	m, err := NewManager(Config{NodeID: 1, LogDir: t.TempDir(), Driven: true, Registry: reg,
		RemoteStore: store, RemoteLogs: logs, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
		&handStore{im: image(5, false), lease: true, epoch: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Error(err)
		}
	})
	deleteErrs := func() float64 { return testutil.ToFloat64(m.tier.errs.WithLabelValues("delete")) }

	// The store fails: nothing is deleted or reported, and the failure is counted.
	m.tierPass(ctx)
	if n := count(gone); n != 4 || len(logs.reported()) != 0 || deleteErrs() != 1 {
		t.Fatalf("store failing: %d objects left, reported %v, %v delete errors; want 4, none, 1", n, logs.reported(), deleteErrs())
	}

	store.mu.Lock()
	store.fail = false
	store.mu.Unlock()
	m.tierPass(ctx)
	if got := logs.reported(); count(gone) != 0 || len(got) != 1 || got[0] != (metadata.RemotePurgeKey{TopicID: gone, Partition: 0}) {
		t.Fatalf("purging: %d objects left, reported %v", count(gone), got)
	}
	if count(other) != 2 || count(live) != 2 {
		t.Fatalf("objects of another broker's purge (%d) or of a live topic (%d) deleted", count(other), count(live))
	}

	// Broker 2, which was to purge the other topic, is fenced: this broker, the lowest
	// live one, takes it over.
	m.ApplyImage(image(6, true))
	m.tierPass(ctx)
	if count(other) != 0 || len(logs.reported()) < 2 || count(live) != 2 {
		t.Fatalf("after broker 2 is fenced: %d objects of the other topic left, reported %v, live topic %d objects",
			count(other), logs.reported(), count(live))
	}
}
