package replication_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shalelog/shale/controller"
	"github.com/shalelog/shale/controller/controllertest"
	"github.com/shalelog/shale/protocol"
	"github.com/shalelog/shale/replication"
	"github.com/shalelog/shale/server/broker"
	"github.com/shalelog/shale/server/broker/brokertest"
	"github.com/shalelog/shale/tiered/objstore"
)

// lateStore fails the third segment log write it is given, as a PUT that timed out on a
// stalled server does, and keeps it; applyLate writes it then, as the stalled server does
// when it resumes. It counts List calls, the uploader's orphan scans.
type lateStore struct {
	objstore.Store
	mu      sync.Mutex
	logPuts int
	lists   int
	lateKey string
	late    []byte
}

func (l *lateStore) Put(ctx context.Context, key string, body io.Reader, size int64) error {
	if strings.HasSuffix(key, ".log") {
		l.mu.Lock()
		l.logPuts++
		third := l.logPuts == 3
		l.mu.Unlock()
		if third {
			b, err := io.ReadAll(body)
			if err != nil {
				return err
			}
			l.mu.Lock()
			l.lateKey, l.late = key, b
			l.mu.Unlock()
			return errors.New("injected: the request timed out")
		}
	}
	return l.Store.Put(ctx, key, body, size)
}

func (l *lateStore) List(ctx context.Context, prefix string) ([]objstore.Object, error) {
	l.mu.Lock()
	l.lists++
	l.mu.Unlock()
	return l.Store.List(ctx, prefix)
}

func (l *lateStore) listCalls() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lists
}

func (l *lateStore) failed() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lateKey
}

func (l *lateStore) applyLate(ctx context.Context) error {
	l.mu.Lock()
	key, b := l.lateKey, l.late
	l.mu.Unlock()
	return l.Store.Put(ctx, key, bytes.NewReader(b), int64(len(b)))
}

// TestTieredStorageLateWriteOrphan: an upload's object that the store writes after the
// uploader gave up on it, and after the orphan scans that the failure started have
// ended, is still found and deleted by a later scan (the uploader scans every
// orphanScanEvery passes) rather than left in the bucket for good.
func TestTieredStorageLateWriteOrphan(t *testing.T) {
	mem := objstore.NewMemory()
	store := &lateStore{Store: mem}
	b := brokertest.Start(t, brokertest.WithOptions(func(o *broker.Options) {
		o.Replication = replication.Config{Logger: quiet(), RemoteStore: store, RemoteTaskInterval: 50 * time.Millisecond,
			RetentionCheckInterval: 50 * time.Millisecond}
		o.Protocol = protocol.Config{Logger: quiet()}
		o.ShutdownGrace = time.Second
	}), brokertest.WithController(controllertest.WithConfig(func(c *controller.Config) { c.RemoteLogStorageSystemEnable = true })))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := b.Client(kgo.ProducerLinger(0))
	defer cl.Close()
	const topic = "late"
	res, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, map[string]*string{
		"remote.storage.enable": kadm.StringPtr("true"), "segment.bytes": kadm.StringPtr("2048"),
		"local.retention.bytes": kadm.StringPtr("1"),
	}, topic)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	produce := func(from, n int) {
		t.Helper()
		for i := from; i < from+n; i++ {
			v := []byte(fmt.Sprintf("value-%d-%s", i, strings.Repeat("z", 100)))
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: v}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(0, 200)
	p := b.Replicas().Replica(topic, 0)
	waitFor(t, "the uploads caught up after the failed one", func() bool {
		segs := p.SealedSegments()
		rl := b.Replicas().Image().RemoteLog(topic, 0)
		// No closed segment left means all were uploaded (and deleted locally by
		// local.retention.bytes=1).
		return store.failed() != "" && rl != nil && (len(segs) == 0 || rl.CoveredEnd() >= segs[len(segs)-1].NextOffset)
	})
	// The scans the failure started go on while passes commit; wait until they have
	// stopped (no List for a while), so that the late write lands unseen.
	for last := store.listCalls(); ; {
		time.Sleep(300 * time.Millisecond)
		if n := store.listCalls(); n == last {
			break
		} else {
			last = n
		}
	}
	if err := store.applyLate(ctx); err != nil {
		t.Fatal(err)
	}
	late := store.failed()
	// More uploads as it waits (an orphan is deleted at the second scan that finds it
	// outside the remote log).
	next := 200
	waitFor(t, "the late-written object deleted", func() bool {
		produce(next, 5)
		next += 5
		objs, err := mem.List(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if o.Key == late {
				return false
			}
		}
		return true
	})
}
