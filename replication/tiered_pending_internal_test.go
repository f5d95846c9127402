package replication

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/tiered/objstore"
	"github.com/shalelog/shale/tiered/remotelog"
)

// lostAnswerLogs is a controller that applies commits, refusing overlaps as the FSM
// does. The first commit is applied but its answer is lost (a timeout), and the image
// does not show it until the commit is sent again: what a cut connection to the
// controller and a lagging metadata cache do together.
type lostAnswerLogs struct {
	metadata.RemoteLogStore
	store *handStore
	mu    sync.Mutex
	segs  []metadata.RemoteSegment
	shown int // how many of segs the image shows
	lost  bool
}

func (l *lostAnswerLogs) CommitRemoteSegment(_ context.Context, topic string, _ int32, seg metadata.RemoteSegment) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.segs {
		switch {
		case s.UploadID == seg.UploadID:
			l.show(len(l.segs))
			return nil // a resend of a committed upload
		case s.EndOffset >= seg.BaseOffset && seg.EndOffset >= s.BaseOffset:
			return kerr.InvalidRequest
		}
	}
	seg.State = metadata.RemoteSegmentCommitted
	l.segs = append(l.segs, seg)
	if !l.lost {
		l.lost = true
		l.show(len(l.segs) - 1) // the image moves on, without this commit
		return context.DeadlineExceeded
	}
	l.show(len(l.segs))
	return nil
}

// show publishes an image holding the first n commits. Callers hold l.mu.
func (l *lostAnswerLogs) show(n int) {
	l.shown = n
	l.store.mu.Lock()
	defer l.store.mu.Unlock()
	im := *l.store.im
	im.Offset++
	rl := metadata.NewRemoteLog("t", oldTopicID, 0, 0, append([]metadata.RemoteSegment(nil), l.segs[:n]...))
	im.RemoteLogs = metadata.RemoteLogs{{Topic: "t", Partition: 0}: rl}
	l.store.im = &im
}

// An upload whose commit got no answer may have been committed: its commit is sent
// again until answered, and its objects are never taken for an orphan's, even while
// the image does not show it. Deleting them would leave the remote log pointing at
// objects that are gone.
func TestTieredUnansweredCommitIsSentAgainNotOrphaned(t *testing.T) {
	im := topicImage(10, oldTopicID, metadata.Partition{Replicas: []int32{1}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 4, PartitionEpoch: 4})
	im.Topics["t"].Configs = map[string]string{"remote.storage.enable": "true", "segment.bytes": "1024", "local.retention.bytes": "-2"}
	st := &handStore{im: im, lease: true, epoch: 7}
	logs := &lostAnswerLogs{store: st}
	mem := objstore.NewMemory()
	m, err := NewManager(Config{NodeID: 1, LogDir: t.TempDir(), Driven: true, Registry: prometheus.NewRegistry(),
		RemoteStore: mem, RemoteLogs: logs, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, st)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	ctx := context.Background()
	for range 30 {
		parts := []*ProducePartition{{Topic: "t", Index: 0, Records: recordBatch(t, 0, 10, 4)}}
		m.Append(ctx, 1, parts)
		if parts[0].Err != nil {
			t.Fatal(parts[0].Err)
		}
	}
	uploads := func() map[string]bool {
		refs, err := remotelog.ListUploads(ctx, mem, oldTopicID, 0)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, r := range refs {
			out[uploadIDString(r.Segment.UploadID)] = true
		}
		return out
	}
	for pass := 0; pass < 2*orphanScanEvery; pass++ {
		m.tierPass(ctx)
		logs.mu.Lock()
		segs := append([]metadata.RemoteSegment(nil), logs.segs...)
		logs.mu.Unlock()
		have := uploads()
		for _, s := range segs {
			if !have[s.UploadID] {
				t.Fatalf("pass %d: the objects of committed upload %s (%d-%d) were deleted", pass, s.UploadID, s.BaseOffset, s.EndOffset)
			}
		}
	}
	logs.mu.Lock()
	defer logs.mu.Unlock()
	if logs.shown != len(logs.segs) || len(logs.segs) < 2 {
		t.Fatalf("the image shows %d of %d commits, want all of several", logs.shown, len(logs.segs))
	}
	if have := uploads(); len(have) != len(logs.segs) {
		t.Fatalf("%d uploads in the store for %d commits: %v", len(have), len(logs.segs), strings.Join(mapsKeys(have), ","))
	}
}

func mapsKeys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
