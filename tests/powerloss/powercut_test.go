package powerloss

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shalelog/shale/internal/testutil"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/tests/powerloss/lazyfs"
	"github.com/shalelog/shale/tests/shaleproc"
)

const (
	partitions = 3
	// Small segments, so that a few seconds of writes roll some and a cut lands on
	// sealed segments in background sync as well as on the active one.
	segmentBytes = 256 << 10
	readyTimeout = 90 * time.Second
	maxRate      = 5000 // records a second per topic
	// shortCuts is the number of cuts without POWERCUT=1: the short run of `go test ./...`
	// and `make test`. Two, not one: recovery after a cut must also make sense of what
	// a recovery left.
	shortCuts = 2
	// The watchdog's limit (see watchdog): what the start and the topics may take, and
	// then each cut, with room for a loaded machine; a run that needs more is stuck.
	watchdogBase, watchdogPerCut = 150 * time.Second, 90 * time.Second
)

// node is one `shale serve` process (broker and controller) whose data directory is on
// a lazyfs mount.
type node struct {
	id         int
	addr, ctrl string
	proc       *shaleproc.Proc
	fs         *lazyfs.FS
}

// mode is one topic and what was acknowledged to it over the whole run.
type mode struct {
	name, topic string
	strict      bool // any acknowledged record lost fails the test
	configs     map[string]*string

	next  int
	acked map[string]bool // record id -> acknowledged
	lost  map[string]bool // acknowledged, then gone after a cut
}

func TestPowerCut(t *testing.T) {
	if unavailable != nil {
		t.Skipf("power-cut test skipped: %v", unavailable)
	}
	cuts := shortCuts
	if os.Getenv("POWERCUT") == "1" {
		cuts = 3
	}
	if s := os.Getenv("POWERCUT_CUTS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("POWERCUT_CUTS=%q: want a positive number", s)
		}
		cuts = n
	}
	pl := &plug{}
	watchdog(t, watchdogBase+time.Duration(cuts)*watchdogPerCut, pl)

	nodes := startNodes(t, pl)
	seeds := make([]string, len(nodes))
	for i, n := range nodes {
		seeds[i] = n.addr
	}
	str := func(s string) *string { return &s }
	// acks.all.fsync is what promises durable acknowledgements; flush.messages=1 (the
	// same group commit, on each replica alone) is there to compare with
	// POWERCUT_FLUSH_MESSAGES=1.
	modes := []*mode{
		{name: "acks.all.fsync=true", topic: "synced", strict: true,
			configs: map[string]*string{"acks.all.fsync": str("true"), "min.insync.replicas": str("2"), "segment.bytes": str(strconv.Itoa(segmentBytes))}},
		{name: "default", topic: "unsynced",
			configs: map[string]*string{"min.insync.replicas": str("2"), "segment.bytes": str(strconv.Itoa(segmentBytes))}},
	}
	if os.Getenv("POWERCUT_FLUSH_MESSAGES") == "1" {
		modes = append(modes, &mode{name: "flush.messages=1", topic: "flushed", strict: true,
			configs: map[string]*string{"flush.messages": str("1"), "min.insync.replicas": str("2"), "segment.bytes": str(strconv.Itoa(segmentBytes))}})
	}
	for _, m := range modes {
		m.acked, m.lost = map[string]bool{}, map[string]bool{}
		createTopic(t, seeds, m.topic, m.configs)
	}

	for cut := 1; cut <= cuts; cut++ {
		// Writes for a while, then the cut under load, at a point that differs per round.
		producers := make([]*producer, len(modes))
		for i, m := range modes {
			producers[i] = startProducer(t, seeds, m)
		}
		time.Sleep(2*time.Second + rand.N(2*time.Second))
		for _, n := range nodes {
			_ = n.proc.Signal(syscall.SIGKILL)
		}
		for _, n := range nodes {
			if err := n.proc.Kill9(); err != nil {
				t.Fatal(err)
			}
		}
		roundAcked := make([]int, len(modes))
		for i, p := range producers {
			roundAcked[i] = p.stop(t)
		}
		var rolled []string
		for _, n := range nodes {
			k, err := n.fs.Cut()
			if err != nil {
				t.Fatalf("cut node %d: %v", n.id, err)
			}
			rolled = append(rolled, strconv.Itoa(k))
		}
		t.Logf("cut %d: files rolled back per node: %s", cut, strings.Join(rolled, ", "))

		for _, n := range nodes {
			if err := n.proc.Start(); err != nil {
				t.Fatal(err)
			}
		}
		for _, n := range nodes {
			if err := waitReady(n, readyTimeout); err != nil {
				t.Fatalf("after cut %d: %v", cut, err)
			}
		}
		for i, m := range modes {
			if roundAcked[i] == 0 {
				t.Fatalf("cut %d: nothing acknowledged on %s in the round before it", cut, m.topic)
			}
			seen, records, err := readBack(t, seeds, m)
			if err != nil {
				t.Fatalf("after cut %d: %v", cut, err)
			}
			var newly []string
			for id := range m.acked {
				if !seen[id] && !m.lost[id] {
					m.lost[id] = true
					newly = append(newly, id)
				}
			}
			slices.Sort(newly)
			// Duplicates are not losses, but an idempotent producer should leave none.
			t.Logf("cut %d, %s: %d acknowledged this round, %d in all; %d acknowledged records lost by this cut, %d in all; read back %d records, %d duplicates",
				cut, m.name, roundAcked[i], len(m.acked), len(newly), len(m.lost), records, records-len(seen))
			if m.strict && len(newly) > 0 {
				t.Errorf("cut %d, %s: %d acknowledged records lost (first: %v)", cut, m.name, len(newly), newly[:min(10, len(newly))])
			}
		}
	}
	for _, m := range modes {
		t.Logf("SUMMARY %s: %d cuts, %d records acknowledged, %d lost", m.name, cuts, len(m.acked), len(m.lost))
	}
	pl.finish()
}

// startNodes mounts a lazyfs per node and starts the three nodes on it, each process and
// mount registered in pl. At cleanup, after a clean run, the processes are killed and the
// mounts unmounted; after a failure (the watchdog's included) or a panic, the plug is
// pulled, since a mount may be wedged.
func startNodes(t *testing.T, pl *plug) []*node {
	t.Helper()
	base := t.TempDir()
	nodes := make([]*node, 3)
	ports := freePorts(t, 2*len(nodes))
	var voters []string
	for i := range nodes {
		n := &node{id: i + 1,
			addr: fmt.Sprintf("127.0.0.1:%d", ports[2*i]),
			ctrl: fmt.Sprintf("127.0.0.1:%d", ports[2*i+1])}
		nodes[i] = n
		voters = append(voters, fmt.Sprintf("%d@%s", n.id, n.ctrl))
	}
	t.Cleanup(func() {
		// After a panic of the test, t.Failed() is still false while cleanups run (so
		// with Go 1.26): a test that did not reach its end counts as failed here.
		if !t.Failed() && pl.finished() {
			if err := pl.release(); err != nil {
				t.Error(err)
			}
			return
		}
		err := pl.pull()
		for _, n := range nodes {
			if n.proc != nil {
				t.Logf("---- node %d log (%s), last lines:\n%s", n.id, n.proc.LogPath(), n.proc.LogTail(40))
			}
		}
		if err != nil {
			t.Error(err)
		}
	})
	for _, n := range nodes {
		dir := filepath.Join(base, fmt.Sprintf("node-%d", n.id))
		backing, mnt := filepath.Join(dir, "disk"), filepath.Join(dir, "mnt")
		for _, d := range []string{backing, mnt} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		fs, err := lazyfs.Mount(backing, mnt)
		if err != nil {
			t.Skipf("cannot mount FUSE here (unprivileged?): %v", err)
		}
		pl.addMount(fs)
		n.fs = fs
		n.proc = &shaleproc.Proc{Name: fmt.Sprintf("node-%d", n.id), Bin: shaleBin, LogDir: dir, Args: []string{"serve",
			"--node.id=" + strconv.Itoa(n.id),
			"--process.roles=broker,controller",
			"--listeners=PLAINTEXT://" + n.addr + ",CONTROLLER://" + n.ctrl,
			"--controller.quorum.voters=" + strings.Join(voters, ","),
			"--log.dirs=" + filepath.Join(mnt, "data"),
			"--schema.registry.listener=", "--rest.proxy.listener=", "--http.listener=",
			"--broker.session.timeout.ms=3000",
			"--broker.heartbeat.interval.ms=500",
			"--replica.lag.time.max.ms=5000",
			"--default.replication.factor=3",
			"--min.insync.replicas=2",
			"--auto.create.topics.enable=false",
			"--unclean.leader.election.enable=false",
		}}
		pl.addProc(n.proc)
	}
	for _, n := range nodes {
		if err := n.proc.Start(); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range nodes {
		if err := waitReady(n, readyTimeout); err != nil {
			t.Fatal(err)
		}
	}
	return nodes
}

// freePorts is n distinct loopback ports (testutil.FreePort).
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	for range n {
		ports = append(ports, testutil.FreePort(t))
	}
	return ports
}

// waitReady waits until the node runs and its own metadata lists it as a live broker.
func waitReady(n *node, timeout time.Duration) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr), kgo.RequestRetries(0), kgo.DialTimeout(time.Second))
	if err != nil {
		return err
	}
	defer cl.Close()
	deadline := time.Now().Add(timeout)
	for {
		if !n.proc.Running() {
			return fmt.Errorf("node %d exited; log:\n%s", n.id, n.proc.LogTail(40))
		}
		req := kmsg.NewPtrMetadataRequest()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		resp, err := req.RequestWith(ctx, cl)
		cancel()
		if err == nil {
			for _, b := range resp.Brokers {
				if int(b.NodeID) == n.id {
					return nil
				}
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %d not ready after %v; log:\n%s", n.id, timeout, n.proc.LogTail(40))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func createTopic(t *testing.T, seeds []string, topic string, configs map[string]*string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		resp, err := adm.CreateTopic(ctx, partitions, 3, configs, topic)
		cancel()
		if err == nil {
			err = resp.Err
		}
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("create topic %s: %v", topic, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// producer writes numbered records to one mode's topic, idempotent with acks=all, as
// fast as the cluster takes them, until stopped.
type producer struct {
	m        *mode
	cl       *kgo.Client
	cancel   context.CancelFunc
	loop     sync.WaitGroup // the produce loop
	inFlight sync.WaitGroup // records not yet answered
	mu       sync.Mutex
	acked    int
}

func startProducer(t *testing.T, seeds []string, m *mode) *producer {
	t.Helper()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(seeds...),
		kgo.DefaultProduceTopic(m.topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), // idempotent: kgo's default
		kgo.ProducerLinger(2*time.Millisecond),
		kgo.MaxBufferedRecords(1000),
		kgo.DialTimeout(2*time.Second),
		kgo.ProduceRequestTimeout(10*time.Second),
		kgo.RecordDeliveryTimeout(30*time.Second),
	)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &producer{m: m, cl: cl, cancel: cancel}
	pad := []byte(strings.Repeat("x", 64))
	p.loop.Add(1)
	go func() {
		defer p.loop.Done()
		// At most ~maxRate records a second: enough for a cut to land among writes in
		// flight on every partition, without filling the temporary directory (often a
		// tmpfs) over ten cuts.
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ctx.Err() == nil; i++ {
			if i%(maxRate/100) == 0 {
				select {
				case <-tick.C:
				case <-ctx.Done():
					return
				}
			}
			id := fmt.Sprintf("%s-%d", m.topic, m.next)
			m.next++
			p.inFlight.Add(1)
			cl.Produce(ctx, &kgo.Record{Key: []byte(id), Value: pad}, func(_ *kgo.Record, err error) {
				defer p.inFlight.Done()
				if err != nil {
					return
				}
				p.mu.Lock()
				p.acked++
				m.acked[id] = true
				p.mu.Unlock()
			})
		}
	}()
	return p
}

// stop ends the producer (after the nodes are dead: nothing more can be acknowledged)
// and returns how many of its records were acknowledged.
func (p *producer) stop(t *testing.T) int {
	t.Helper()
	p.cancel()
	p.loop.Wait()
	p.cl.Close() // fails what is still buffered
	done := make(chan struct{})
	go func() {
		p.inFlight.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("producer of %s: records still unanswered 60s after close", p.m.topic)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.acked
}

// readBack reads every partition of the mode's topic from its start to its high
// watermark and returns the record ids found. A restarted leader's high watermark can
// trail its log for a moment, so it reads until every acknowledged record is there or
// the high watermarks stay put across a pause and a read.
func readBack(t *testing.T, seeds []string, m *mode) (seen map[string]bool, records int, err error) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DialTimeout(2*time.Second))
	if err != nil {
		return nil, 0, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(readyTimeout)
	var prev map[int32]int64
	for {
		ends, err := endOffsets(adm, m.topic, deadline)
		if err != nil {
			return nil, 0, err
		}
		seen, records, err = readTo(seeds, m.topic, ends, deadline)
		if err != nil {
			return nil, 0, err
		}
		missing := 0
		for id := range m.acked {
			if !seen[id] && !m.lost[id] {
				missing++
			}
		}
		if missing == 0 || (prev != nil && mapsEqual(prev, ends)) || time.Now().After(deadline) {
			return seen, records, nil
		}
		prev = ends
		time.Sleep(3 * time.Second)
	}
}

func mapsEqual(a, b map[int32]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// endOffsets waits (bounded) until every partition of topic answers ListOffsets.
func endOffsets(adm *kadm.Client, topic string, deadline time.Time) (map[int32]int64, error) {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		res, err := adm.ListEndOffsets(ctx, topic)
		cancel()
		if err == nil {
			err = res.Error()
		}
		if err == nil {
			ends := map[int32]int64{}
			res.Each(func(o kadm.ListedOffset) { ends[o.Partition] = o.Offset })
			if len(ends) == partitions {
				return ends, nil
			}
			err = fmt.Errorf("%d partitions listed, want %d", len(ends), partitions)
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("end offsets of %s: %w", topic, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// readTo reads each partition of topic from its start up to ends: the ids found, and how
// many records held them.
func readTo(seeds []string, topic string, ends map[int32]int64, deadline time.Time) (map[string]bool, int, error) {
	start := map[int32]kgo.Offset{}
	left := map[int32]int64{} // partition -> the last offset still to read
	for p, end := range ends {
		start[p] = kgo.NewOffset().AtStart()
		if end > 0 {
			left[p] = end - 1
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DialTimeout(2*time.Second),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: start}))
	if err != nil {
		return nil, 0, err
	}
	defer cl.Close()
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	seen := map[string]bool{}
	records := 0
	var errs []error
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil, 0, fmt.Errorf("read back %s: %d partitions not read to their end (%v); fetch errors: %w", topic, len(left), left, errors.Join(errs...))
		}
		fs.EachError(func(_ string, _ int32, err error) {
			if len(errs) < 5 {
				errs = append(errs, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			seen[string(r.Key)] = true
			records++
			if last, ok := left[r.Partition]; ok && r.Offset >= last {
				delete(left, r.Partition)
			}
		})
	}
	return seen, records, nil
}
