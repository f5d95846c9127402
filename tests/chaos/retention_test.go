package chaos

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Retention by bytes with a lagging follower: small segments and retention.bytes, a
// retention pass every 200 ms, and a filler writing ~1.2 MB/s so that a follower stopped
// for 2 s leaves the leader's log far beyond retention.bytes above the high watermark.
const (
	retentionSegmentBytes = 128 << 10
	retentionBytes        = 1 << 20
	retentionCheckMs      = 200
	retentionStop         = 2 * time.Second // below the 3 s session timeout and the 5 s replica lag
)

// TestChaosRetentionLaggingFollower is retention by bytes while an in-sync follower lags
// (issue 23, bug 3: retention deletes segments above the high watermark; the lagging
// follower then gets OFFSET_OUT_OF_RANGE, restarts at the new log start, the HW jumps
// over the deleted offsets, and the acks=all produces waiting there are answered as
// written for records that no consumer or replica ever saw). One partition, RF=3,
// min.insync.replicas=2, segment.bytes 128 KiB, retention.bytes 1 MiB; three acks=all
// idempotent producers write small numbered records (the ones checked) and an acks=1
// filler writes 4 KiB records at ~1.2 MB/s (so that the log grows while the acks=all
// requests wait; its records are not checked). A follower is SIGSTOPped for 2 s (less
// than the session timeout and replica.lag.time.max.ms, so it stays in the ISR and keeps
// the HW where it stopped) and resumed, three times.
//
// The check must tell retention from loss, since retention legitimately removes
// acknowledged records that the consumer has not read yet once they are below the HW.
// It rests on what Kafka guarantees: retention never removes a record at or above the
// HW, so the leader's log start never passes its HW. A monitor asks the leader, in one
// leader epoch (CurrentLeaderEpoch fences the requests), for its log start (ListOffsets
// earliest) and then its HW (ListOffsets latest) every ~20 ms. Within one epoch both
// only grow, so a sample whose log start S (read first) exceeds the HW H read after it
// proves that at the second read offsets [H, S) were gone while not yet below the HW,
// which had never been higher in that epoch. The monitor's first epoch begins before any
// record is written (and the fault kills no leader), so offsets in such a range of the
// first epoch were never readable by any consumer. A consumer reads the partition from
// the start as it
// grows (it resets to the log start on OFFSET_OUT_OF_RANGE). Every acknowledged acks=all
// record is then either
//   - consumed, or in the final read of the log: fine;
//   - below the final log start and inside a proven [H, S) range: deleted above the HW,
//     acknowledged without ever being readable: a violation;
//   - below the final log start otherwise: removed by retention below the HW before the
//     consumer got to it: allowed, and counted (the consumer is fast enough that there
//     should be few);
//   - neither consumed nor in the log nor below its start: lost, a violation.
//
// Samples with S > H are reported (and fail the test) on their own too: they are
// retention above the HW even when no acknowledged record fell in the range. It runs
// with SHALE_CHAOS=full, data or retention.
func TestChaosRetentionLaggingFollower(t *testing.T) {
	dataFault(t, "retention")
	started := time.Now()
	c := newClusterArgs(t, combined, []string{"--log.retention.check.interval.ms=" + strconv.Itoa(retentionCheckMs)})
	const topic = "retention"
	seg, ret := strconv.Itoa(retentionSegmentBytes), strconv.Itoa(retentionBytes)
	if err := createTopicWith(c, topic, 1, map[string]*string{"segment.bytes": &seg, "retention.bytes": &ret}); err != nil {
		t.Fatal(err)
	}
	if d, ok, why := c.waitHealed(topic, fullWaits.heal); !ok {
		t.Fatalf("topic %s never healed (%v): %s", topic, d, why)
	}
	mon := startHWMonitor(c, topic, 0)
	defer mon.close()
	lc, err := startLiveConsumer(c.brokers, topic, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer lc.close()

	fillerCl, err := clientOn(c.brokers,
		kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(),
		kgo.ProducerBatchCompression(kgo.NoCompression()), // its padding must take room in the log
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProduceRequestTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer fillerCl.Close()
	filler := newValueProducer(fillerCl, topic, "f")
	filler.run([]int32{0}, 300, 4096)
	var checked []*valueProducer
	for i := range 3 {
		cl, err := clientOn(c.brokers,
			kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond),
			kgo.ProduceRequestTimeout(15*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		vp := newValueProducer(cl, topic, fmt.Sprintf("a%d", i))
		vp.run([]int32{0}, 100, 100)
		checked = append(checked, vp)
	}

	time.Sleep(3 * time.Second) // a baseline: retention at work with every replica in step
	var rounds []retentionRound
	var stepErrs []error
	for i := range 3 {
		if d, ok, why := c.waitHealed(topic, 30*time.Second); !ok {
			t.Logf("round %d: ISR not full after %v: %s", i+1, d.Round(time.Second), why)
		}
		rd, err := stopFollower(c, topic)
		rd.n = i + 1
		if err != nil {
			stepErrs = append(stepErrs, fmt.Errorf("round %d: %w", rd.n, err))
		}
		rounds = append(rounds, rd)
		time.Sleep(6 * time.Second)
	}

	for _, vp := range checked {
		vp.stop(20 * time.Second)
	}
	filler.stop(10 * time.Second)
	// Let the consumer reach the HW, so that what it has not read by now it never will.
	caughtUp := false
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		s, ok := mon.last()
		_, next := lc.snapshot()
		if ok && next[0] >= s.hw {
			caughtUp = true
			break
		}
	}
	time.Sleep(500 * time.Millisecond)
	mon.close()
	log, starts, ends, readErr := readRange(c.brokers, topic, 1, 60*time.Second)
	seen, _ := lc.snapshot()
	samples := mon.snapshot()

	// Ranges [H, S) proven gone while at or above the HW.
	type span struct{ from, to int64 }
	var above []span
	maxAbove := int64(0)
	aboveN := 0
	for _, s := range samples {
		if s.start > s.hw {
			aboveN++
			maxAbove = max(maxAbove, s.start-s.hw)
			if s.term == 1 {
				above = append(above, span{s.hw, s.start})
			}
		}
	}
	provenAbove := func(o int64) bool {
		for _, a := range above {
			if o >= a.from && o < a.to {
				return true
			}
		}
		return false
	}
	consumed, inLog := map[string]bool{}, map[string]bool{}
	for _, r := range seen {
		consumed[r.value] = true
	}
	for _, r := range log {
		inLog[r.value] = true
	}
	var v retentionVerdict
	example := func(s *[]string, format string, args ...any) {
		if len(*s) < 5 {
			*s = append(*s, fmt.Sprintf(format, args...))
		}
	}
	var failedN int
	for _, vp := range checked {
		acks, failed, lastErr := vp.snapshot()
		failedN += failed
		if lastErr != nil {
			t.Logf("producer %s: %d records failed, e.g. %v", vp.prefix, failed, lastErr)
		}
		for _, a := range acks {
			v.acked++
			switch {
			case consumed[a.value]:
				v.consumed++
			case inLog[a.value]:
				v.inLogOnly++
			case a.offset < starts[0] && provenAbove(a.offset):
				v.deletedAboveHW++
				example(&v.aboveEx, "%s acknowledged at offset %d, deleted while at or above the HW", a.value, a.offset)
			case a.offset < starts[0]:
				v.retained++
			default:
				v.lost++
				example(&v.lostEx, "%s acknowledged at offset %d: not consumed, not in the log [%d, %d)", a.value, a.offset, starts[0], ends[0])
			}
		}
	}
	for i := range rounds {
		rd := &rounds[i]
		for _, s := range samples {
			if s.at.Before(rd.stoppedAt) || s.at.After(rd.stoppedAt.Add(8*time.Second)) {
				continue
			}
			if s.start > s.hw {
				rd.aboveSamples++
				rd.maxAbove = max(rd.maxAbove, s.start-s.hw)
			}
		}
	}
	t.Logf("retention by bytes with a follower stopped %v, %d rounds, %v:\n%s", retentionStop, len(rounds), time.Since(started).Round(time.Second), formatRetentionRounds(rounds))
	t.Logf("monitor: %d samples of the leader's log start and HW in %d leader epochs; %d with the log start above the HW (at most %d offsets above it)",
		len(samples), mon.terms(), aboveN, maxAbove)
	t.Logf("acks=all records: %d acknowledged (%d failed), %d consumed, %d only in the final log [%d, %d), %d removed by retention below the HW before the consumer read them (allowed), %d deleted above the HW, %d lost; consumer caught up at the end: %v",
		v.acked, failedN, v.consumed, v.inLogOnly, starts[0], ends[0], v.retained, v.deletedAboveHW, v.lost, caughtUp)
	for _, e := range append(v.aboveEx, v.lostEx...) {
		t.Log(e)
	}

	if readErr != nil {
		t.Errorf("final read: %v", readErr)
	}
	for _, err := range stepErrs {
		t.Errorf("fault step failed: %v", err)
	}
	if aboveN > 0 {
		t.Errorf("the leader's log start passed its HW in %d samples (by up to %d offsets): retention deleted records above the HW", aboveN, maxAbove)
	}
	if v.deletedAboveHW > 0 || v.lost > 0 {
		t.Errorf("%d acknowledged acks=all records deleted above the HW before any consumer could read them, %d lost", v.deletedAboveHW, v.lost)
	}
	if v.acked == 0 {
		t.Errorf("no acks=all record was acknowledged")
	}
}

type retentionVerdict struct {
	acked, consumed, inLogOnly, retained, deletedAboveHW, lost int
	aboveEx, lostEx                                            []string
}

// retentionRound is one SIGSTOP of a follower.
type retentionRound struct {
	n            int
	follower     string
	leader       string
	stoppedAt    time.Time
	hwAtStop     int64
	startAtCont  int64
	hwAtCont     int64
	aboveSamples int
	maxAbove     int64
}

// stopFollower SIGSTOPs a follower of partition 0 that is not the active controller (so
// that the quorum's leader does not change) for retentionStop, and resumes it.
func stopFollower(c *cluster, topic string) (retentionRound, error) {
	var rd retentionRound
	ps, err := c.topicNow(topic)
	if err != nil || len(ps) == 0 {
		return rd, fmt.Errorf("describe %s: %w", topic, err)
	}
	active, _ := c.activeController(10 * time.Second)
	var f *node
	for _, id := range ps[0].replicas {
		n := c.byID(id)
		if id != ps[0].leader && n != nil && n.running() && n != active {
			f = n
			break
		}
	}
	if f == nil {
		return rd, fmt.Errorf("no follower of p0 outside the active controller (replicas %v, leader %d, active %v)", ps[0].replicas, ps[0].leader, active)
	}
	leader := c.byID(ps[0].leader)
	rd.follower, rd.leader = f.String(), fmt.Sprint(leader)
	ctx := context.Background()
	if leader != nil {
		rd.hwAtStop, _, _ = leader.listOffset(ctx, topic, 0, -1, -1)
	}
	rd.stoppedAt = time.Now()
	if err := f.signal(syscall.SIGSTOP); err != nil {
		return rd, err
	}
	time.Sleep(retentionStop)
	if leader != nil {
		rd.startAtCont, _, _ = leader.listOffset(ctx, topic, 0, -1, -2)
		rd.hwAtCont, _, _ = leader.listOffset(ctx, topic, 0, -1, -1)
	}
	return rd, f.signal(syscall.SIGCONT)
}

func formatRetentionRounds(rounds []retentionRound) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tleader\tstopped\tHW at stop\tlog start / HW at resume\tsamples log start > HW\tmax offsets above HW\t")
	for _, r := range rounds {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d / %d\t%d\t%d\t\n", r.n, r.leader, r.follower, r.hwAtStop, r.startAtCont, r.hwAtCont, r.aboveSamples, r.maxAbove)
	}
	tw.Flush()
	return b.String()
}

// hwSample is one reading of the leader's log start, then its HW, in one leader epoch.
type hwSample struct {
	at        time.Time
	term      int // which (leader, epoch) pair answered
	start, hw int64
}

// hwMonitor samples the partition's leader, pinned to one leader epoch at a time.
type hwMonitor struct {
	mu      sync.Mutex
	samples []hwSample
	nTerms  int
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
}

func startHWMonitor(c *cluster, topic string, p int32) *hwMonitor {
	m := &hwMonitor{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(m.done)
		ctx := context.Background()
		var leader *node
		epoch := int32(-1)
		term := 0
		for {
			select {
			case <-m.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if leader == nil {
				l, err := c.leaderOf(topic, p, 5*time.Second)
				if err != nil {
					continue
				}
				_, e, err := l.listOffset(ctx, topic, p, -1, -1)
				if err != nil {
					continue
				}
				leader, epoch = l, e
				term++
				m.mu.Lock()
				m.nTerms = term
				m.mu.Unlock()
			}
			start, _, err := leader.listOffset(ctx, topic, p, epoch, -2)
			if err != nil {
				leader = nil
				continue
			}
			hw, e, err := leader.listOffset(ctx, topic, p, epoch, -1)
			if err != nil || e != epoch {
				leader = nil
				continue
			}
			m.mu.Lock()
			m.samples = append(m.samples, hwSample{at: time.Now(), term: term, start: start, hw: hw})
			m.mu.Unlock()
		}
	}()
	return m
}

func (m *hwMonitor) close() {
	m.once.Do(func() { close(m.stop) })
	<-m.done
}

func (m *hwMonitor) snapshot() []hwSample {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.samples)
}

func (m *hwMonitor) last() (hwSample, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.samples) == 0 {
		return hwSample{}, false
	}
	return m.samples[len(m.samples)-1], true
}

func (m *hwMonitor) terms() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.nTerms
}
