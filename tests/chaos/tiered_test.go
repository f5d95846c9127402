package chaos

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shalelog/shale/tests/netns"
	"github.com/shalelog/shale/tests/s3server"
	"github.com/shalelog/shale/tiered/objstore"
	"github.com/shalelog/shale/tiered/remotelog"
)

// TestChaosTiered is tiered storage (KIP-405) under faults: a versitygw process on the
// bridge is the object store of a combined cluster whose topic (2 partitions, RF=3,
// 16 KiB segments, 32 KiB local retention) uploads a segment every second or so while
// two acks=all idempotent producers write numbered records. Faults, one after the other:
// kill -9 of partition 0's leader (mid-upload, likely: uploads run every 200 ms), the
// object store stopped (SIGSTOP) for storeStall under load and resumed, and kill -9 of the
// active controller (which commits the uploads). Afterwards:
//   - no acknowledged record is lost: each is read back, from offset 0, at the offset it
//     was acknowledged at, with every offset read once (most of them from the remote log);
//   - no segment counts twice and none is left behind: once the uploaders' orphan scans
//     have run, each partition's uploads in the bucket are complete, and their offsets
//     chain without gap or overlap from 0 to the remote log's highest offset (ListOffsets
//     -5), as the image holds them; an orphan would overlap or be incomplete.
//
// It runs with SHALE_CHAOS=full (make chaos) or SHALE_CHAOS=tiered.
func TestChaosTiered(t *testing.T) {
	if m := os.Getenv("SHALE_CHAOS"); m != "full" && m != "tiered" {
		t.Skip("the tiered fault runs with SHALE_CHAOS=full (make chaos) or SHALE_CHAOS=tiered")
	}
	started := time.Now()
	var s3 *s3server.Server
	c := newClusterNet(t, combined, func(nw *netns.Network) []string {
		// On the bridge, so that the namespaces reach it; plain http beyond loopback
		// needs allow.http.
		s3 = s3server.StartOn(t, nw.BridgeIP)
		return []string{
			"--remote.log.storage.system.enable=true",
			"--remote.log.manager.task.interval.ms=200",
			"--log.retention.check.interval.ms=200",
			"--remote.storage.s3.endpoint=" + s3.Endpoint,
			"--remote.storage.s3.bucket=" + s3.Bucket,
			"--remote.storage.s3.path.style=true",
			"--remote.storage.s3.allow.http=true",
			"--remote.storage.s3.request.timeout.ms=3000",
			"--remote.storage.s3.credentials.file=" + s3.CredentialsFile(t),
		}
	})
	const topic = "tiered"
	const parts = 2
	on, seg, local := "true", "16384", "32768"
	if err := createTopicWith(c, topic, parts, map[string]*string{
		"remote.storage.enable": &on, "segment.bytes": &seg, "local.retention.bytes": &local,
	}); err != nil {
		t.Fatal(err)
	}
	if d, ok, why := c.waitHealed(topic, fullWaits.heal); !ok {
		t.Fatalf("topic %s never healed (%v): %s", topic, d, why)
	}
	var producers []*valueProducer
	for i := range 2 {
		cl, err := clientOn(c.brokers, kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond),
			kgo.ProduceRequestTimeout(15*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		vp := newValueProducer(cl, topic, fmt.Sprintf("t%d", i))
		vp.run([]int32{0, 1}, 100, 120)
		producers = append(producers, vp)
	}
	ackCount := func() int {
		n := 0
		for _, vp := range producers {
			acks, _, _ := vp.snapshot()
			n += len(acks)
		}
		return n
	}
	highestRemote := func(p int32) int64 {
		leader, err := c.leaderOf(topic, p, 30*time.Second)
		if err != nil {
			return -1
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		o, _, err := leader.listOffset(ctx, topic, p, -1, -5)
		if err != nil {
			return -1
		}
		return o
	}
	waitUploads := func(what string) {
		t.Helper()
		base := highestRemote(0)
		deadline := time.Now().Add(60 * time.Second)
		for highestRemote(0) <= base {
			if time.Now().After(deadline) {
				t.Fatalf("%s: no segment of partition 0 uploaded in 60 s (highest remote offset %d)", what, base)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	heal := func(what string) {
		t.Helper()
		if d, ok, why := c.waitHealed(topic, fullWaits.heal); !ok {
			t.Fatalf("after %s the topic did not heal in %v: %s", what, d, why)
		}
	}

	// 1. kill -9 the leader of partition 0 while it uploads.
	waitUploads("before the leader kill")
	leader, err := c.leaderOf(topic, 0, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := leader.kill9(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(hold)
	if err := leader.start(); err != nil {
		t.Fatal(err)
	}
	heal("kill -9 of leader " + leader.String())
	waitUploads("after the leader kill")

	// 2. The store stalls under load: produce goes on, uploads wait.
	before := ackCount()
	if err := s3.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(storeStall)
	during := ackCount() - before
	if err := s3.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if during == 0 {
		t.Errorf("no record was acknowledged while the object store was stopped for %v: produce must not wait for it", storeStall)
	}
	heal("the object store's stall")
	waitUploads("after the object store's stall")

	// 3. kill -9 the active controller, which commits the uploads.
	ctrl, err := c.activeController(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := ctrl.kill9(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(hold)
	if err := ctrl.start(); err != nil {
		t.Fatal(err)
	}
	heal("kill -9 of the active controller " + ctrl.String())
	waitUploads("after the controller kill")

	// The producers keep writing while the bucket is checked: orphans are deleted by
	// scans that need the image to move on, as commits make it.
	store := s3.NewStore(t, "")
	resp, err := c.brokers[0].metadata(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	id, ok := topicID(resp, topic)
	if !ok {
		t.Fatalf("no topic id for %s", topic)
	}
	var why string
	var chains [parts]int
	clean := false
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline) && !clean; time.Sleep(500 * time.Millisecond) {
		clean, why = true, ""
		for p := range int32(parts) {
			hr := highestRemote(p)
			n, err := checkRemoteChain(store, id, p, hr)
			if err != nil {
				clean, why = false, fmt.Sprintf("partition %d: %v", p, err)
				break
			}
			chains[p] = n
		}
	}
	if !clean {
		t.Errorf("the bucket never matched the remote log in 90 s: %s", why)
	}
	for _, vp := range producers {
		vp.stop(30 * time.Second)
	}

	log, starts, ends, err := readRange(c.brokers, topic, parts, 120*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	at := map[[2]int64]string{}
	for _, r := range log {
		k := [2]int64{int64(r.part), r.offset}
		if _, dup := at[k]; dup {
			t.Errorf("partition %d offset %d read twice", r.part, r.offset)
		}
		at[k] = r.value
	}
	var acked, lost, failed int
	for _, vp := range producers {
		acks, f, lastErr := vp.snapshot()
		failed += f
		if f > 0 {
			t.Logf("producer %s: %d records not acknowledged (last error %v)", vp.prefix, f, lastErr)
		}
		for _, a := range acks {
			acked++
			if got, ok := at[[2]int64{int64(a.part), a.offset}]; !ok || got != a.value {
				lost++
				if lost <= 10 {
					t.Errorf("acknowledged %s at partition %d offset %d; read %q (present %v)", a.value, a.part, a.offset, got, ok)
				}
			}
		}
	}
	for p := range int32(parts) {
		if starts[p] != 0 {
			t.Errorf("partition %d starts at %d, want 0 (nothing deletes the remote log)", p, starts[p])
		}
		if n := ends[p] - starts[p]; int64(countPart(log, p)) != n {
			t.Errorf("partition %d: read %d records of offsets [%d, %d)", p, countPart(log, p), starts[p], ends[p])
		}
	}
	t.Logf("tiered chaos: %d acknowledged, %d not acknowledged, %d lost; remote segments per partition %v; log ends %v; %v",
		acked, failed, lost, chains, ends, time.Since(started).Round(time.Second))
}

func countPart(rs []seenRecord, p int32) int {
	n := 0
	for _, r := range rs {
		if r.part == p {
			n++
		}
	}
	return n
}

// checkRemoteChain checks a partition's uploads in the bucket against its remote log:
// all complete, and their offsets, from the manifests, chaining from 0 to highest (the
// remote log's highest offset) without gap or overlap. It returns how many there are.
func checkRemoteChain(store objstore.Store, topicID [16]byte, p int32, highest int64) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ups, err := remotelog.ListUploads(ctx, store, topicID, p)
	if err != nil {
		return 0, err
	}
	var segs []remotelog.Segment
	for _, u := range ups {
		if !u.Complete {
			return 0, fmt.Errorf("upload %x at base offset %d (%d objects, %d bytes) is incomplete", u.Segment.UploadID, u.Segment.BaseOffset, u.Objects, u.Bytes)
		}
		s, err := remotelog.ReadManifest(ctx, store, u.Segment)
		if err != nil {
			return 0, err
		}
		segs = append(segs, s)
	}
	slices.SortFunc(segs, func(a, b remotelog.Segment) int { return int(a.BaseOffset - b.BaseOffset) })
	next := int64(0)
	var spans []string
	for _, s := range segs {
		spans = append(spans, fmt.Sprintf("%d-%d", s.BaseOffset, s.EndOffset))
		if s.BaseOffset != next {
			return 0, fmt.Errorf("uploads %s: %d follows offset %d", strings.Join(spans, ","), s.BaseOffset, next-1)
		}
		next = s.EndOffset + 1
	}
	if next-1 != highest {
		return 0, fmt.Errorf("uploads end at %d, the remote log at %d", next-1, highest)
	}
	return len(segs), nil
}

// storeStall is how long the object store is stopped: a minute, as issue 26 asks, longer
// than the S3 client's request timeout, so that uploads in flight time out and are retried
// (or leave orphans to clean) rather than merely wait.
const storeStall = time.Minute
