package protocol_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shalelog/shale/coordinator/group"
	sharegroup "github.com/shalelog/shale/coordinator/share"
	"github.com/shalelog/shale/replication/share"
)

// A pool of franz-go share consumers drains one partition: every record is accepted
// exactly once, released records come back (to any member), and no record is held by
// two members at once.
func TestShareConsumersDrainOnePartition(t *testing.T) {
	gcfg := group.Config{NodeID: 1, MinSessionTimeout: 100 * time.Millisecond, Logger: quietLogger()}
	sgcfg := &sharegroup.Config{NodeID: 1, Logger: quietLogger(), SessionTimeout: 10 * time.Second, HeartbeatInterval: time.Second}
	scfg := &share.Config{Limits: share.Limits{LockDuration: time.Minute, DeliveryLimit: 5}, AutoOffsetReset: "earliest", Logger: quietLogger()}
	tb := launchShareGroups(t, t.TempDir(), nil, brokerConfig(), &gcfg, sgcfg, scfg)
	tb.createTopic("queue", 1, nil)
	const n = 300
	prod := tb.client()
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: "queue", Value: []byte(strconv.Itoa(i))})
	}
	if err := prod.ProduceSync(ctxTimeout(t, 10*time.Second), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	var (
		mu       sync.Mutex
		holding  = map[int64]int{} // offset -> member processing it
		accepted = map[int64]int{}
		released = 0
		overlaps []string
	)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// run ends once every record is accepted.
	run, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	for w := range 4 {
		cl := tb.client(kgo.ShareGroup("pool"), kgo.ConsumeTopics("queue"), kgo.ShareMaxRecords(20))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				fs := cl.PollFetches(run)
				if run.Err() != nil {
					return
				}
				for _, r := range fs.Records() {
					mu.Lock()
					if h, ok := holding[r.Offset]; ok {
						overlaps = append(overlaps, strconv.FormatInt(r.Offset, 10)+" held by "+strconv.Itoa(h)+" and "+strconv.Itoa(w))
					}
					holding[r.Offset] = w
					// Every seventh record is released on its first delivery.
					status := kgo.AckAccept
					if r.Offset%7 == 0 && r.DeliveryCount() == 1 {
						status = kgo.AckRelease
						released++
					} else {
						accepted[r.Offset]++
					}
					delete(holding, r.Offset)
					mu.Unlock()
					r.Ack(status)
				}
				cl.FlushAcks(ctx)
				mu.Lock()
				all := len(accepted) == n
				mu.Unlock()
				if all {
					stop()
				}
			}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		t.Log("the pool did not finish in time")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(overlaps) > 0 {
		t.Fatalf("records held by two members at once: %v", overlaps)
	}
	if len(accepted) != n {
		t.Fatalf("accepted %d of %d records (%d released)", len(accepted), n, released)
	}
	for off, c := range accepted {
		if c != 1 {
			t.Errorf("offset %d accepted %d times", off, c)
		}
	}
	writes, _ := tb.shares.Writes()
	t.Logf("%d records (%d released once) acknowledged by 4 members in %d share-state writes", n, released, writes)
	if released != (n+6)/7 {
		t.Errorf("released %d records, want %d", released, (n+6)/7)
	}
	// Everything is complete in the committed state too.
	ctx2 := ctxTimeout(t, 10*time.Second)
	for {
		sts, err := tb.node.Broker.ReadShareState(ctx2, "pool", nil, false)
		if err == nil && len(sts) == 1 && sts[0].StartOffset == n {
			break
		}
		if ctx2.Err() != nil {
			t.Fatalf("committed state %v %v, want the SPSO at %d", sts, err, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
