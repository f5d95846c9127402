package chaos

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestChaosDeleteRecordsLeaderKill is DeleteRecords followed at once by kill -9 of the
// partition's leader (issue 23, bug 4: a purge answered before the followers applied it
// comes back when a follower that never heard of it is elected). Each round writes
// records to one partition with acks=all, sends DeleteRecords for the middle of them
// straight to the leader, and kills that leader with SIGKILL the moment the answer is
// in: half the rounds with the partition idle (the followers are parked in a long-poll
// fetch, so the next one that would carry the new log start is up to
// replica.fetch.wait.max.ms away), half with a producer still writing to it. Once a new
// leader is elected, and again once the old one is back and the ISR is full, the
// leader must not serve any offset below the acknowledged low watermark: ListOffsets
// earliest must be at or above it, and a Fetch at offset 0 and at the low watermark - 1
// must answer OFFSET_OUT_OF_RANGE (or records at or above it). A DeleteRecords that
// failed or timed out is indeterminate and not checked. At the end a read of every
// partition from its log start must hold every acknowledged record at or above the low
// watermarks and none below them. It runs with SHALE_CHAOS=full, data or purge.
func TestChaosDeleteRecordsLeaderKill(t *testing.T) {
	dataFault(t, "purge")
	started := time.Now()
	c := newCluster(t, combined)
	const topic = "purge"
	const parts = int32(3)
	if err := createTopicWith(c, topic, parts, nil); err != nil {
		t.Fatal(err)
	}
	if d, ok, why := c.waitHealed(topic, fullWaits.heal); !ok {
		t.Fatalf("topic %s never healed (%v): %s", topic, d, why)
	}
	cl, err := clientOn(c.brokers,
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(2*time.Millisecond),
		kgo.ProduceRequestTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	vp := newValueProducer(cl, topic, "p")

	purged := map[int32]int64{} // the highest acknowledged low watermark of each partition
	var rows []purgeRow
	for i := range 6 {
		p := int32(i % int(parts))
		busy := i%2 == 1
		rw := purgeRound(t, c, vp, topic, p, busy, purged)
		rw.n = i + 1
		rows = append(rows, rw)
		t.Logf("round %d: %s", rw.n, rw.summary())
	}
	vp.stop(10 * time.Second)

	// The final read starts at each partition's log start as ListOffsets gives it, so a
	// purge that came back shows as records below the low watermark.
	log, starts, _, readErr := readRange(c.brokers, topic, parts, 60*time.Second)
	acks, failedN, lastErr := vp.snapshot()
	inLog := map[string]bool{}
	below := 0
	for _, r := range log {
		inLog[r.value] = true
		if r.offset < purged[r.part] {
			below++
		}
	}
	lost, kept := 0, 0
	var lostEx []string
	for _, a := range acks {
		if a.offset < purged[a.part] {
			continue
		}
		kept++
		if !inLog[a.value] {
			lost++
			if len(lostEx) < 5 {
				lostEx = append(lostEx, fmt.Sprintf("%s at p%d offset %d", a.value, a.part, a.offset))
			}
		}
	}
	var ackedN, indet, resurrected int
	for _, rw := range rows {
		if rw.deleteErr != nil {
			indet++
			continue
		}
		ackedN++
		if rw.resurrected() {
			resurrected++
		}
	}
	t.Logf("DeleteRecords then kill -9 of the leader, %d rounds in %v:\n%s", len(rows), time.Since(started).Round(time.Second), formatPurgeRows(rows))
	t.Logf("final read from the log starts %v (low watermarks acknowledged %v): %d records below an acknowledged low watermark served; %d of %d acknowledged records at or above the low watermarks lost %v; %d records failed to produce (last error %v)",
		starts, purged, below, lost, kept, lostEx, failedN, lastErr)
	t.Logf("totals: %d DeleteRecords acknowledged, %d indeterminate, %d purges came back (offsets below an acknowledged low watermark served again), %d lost",
		ackedN, indet, resurrected, lost)

	if readErr != nil {
		t.Errorf("final read: %v", readErr)
	}
	for _, rw := range rows {
		if rw.stepErr != nil {
			t.Errorf("round %d: fault step failed: %v", rw.n, rw.stepErr)
		}
		if rw.deleteErr == nil && rw.resurrected() {
			t.Errorf("round %d: a purge came back: %s", rw.n, rw.summary())
		}
	}
	if below > 0 {
		t.Errorf("the final read got %d records below an acknowledged low watermark", below)
	}
	if lost > 0 {
		t.Errorf("%d acknowledged records at or above the low watermarks lost, e.g. %v", lost, lostEx)
	}
	if ackedN == 0 {
		t.Errorf("no DeleteRecords was acknowledged: nothing was checked")
	}
}

// purgeRow is one round of the DeleteRecords fault.
type purgeRow struct {
	n                int
	part             int32
	busy             bool
	killed           string
	requested, low   int64
	deleteErr        error
	afterElection    purgeCheck
	afterRestart     purgeCheck
	stepErr          error
	killAfterAnswer  time.Duration
	electionDuration time.Duration
}

func (rw purgeRow) resurrected() bool { return rw.afterElection.bad() || rw.afterRestart.bad() }

func (rw purgeRow) summary() string {
	mode := "idle"
	if rw.busy {
		mode = "busy"
	}
	if rw.deleteErr != nil {
		return fmt.Sprintf("p%d (%s): DeleteRecords before %d indeterminate (%v); killed %s", rw.part, mode, rw.requested, rw.deleteErr, rw.killed)
	}
	return fmt.Sprintf("p%d (%s): DeleteRecords before %d acknowledged, low watermark %d; killed %s %v after the answer; new leader in %v: %s; after restart: %s",
		rw.part, mode, rw.requested, rw.low, rw.killed, rw.killAfterAnswer.Round(time.Microsecond), rw.electionDuration.Round(time.Millisecond),
		rw.afterElection, rw.afterRestart)
}

// purgeCheck is what the leader served below an acknowledged low watermark at one moment.
type purgeCheck struct {
	leader       string
	earliest, hw int64
	fetch0       string // what a Fetch at offset 0 got
	fetchBelow   string // what a Fetch at the low watermark - 1 got
	servedBelow  bool   // a fetch below the low watermark returned records below it
	earliestLow  bool   // ListOffsets earliest below the low watermark
	err          error  // the check could not be made
	lowWatermark int64
}

func (pc purgeCheck) bad() bool { return pc.servedBelow || pc.earliestLow }

func (pc purgeCheck) String() string {
	if pc.leader == "" && pc.err == nil {
		return "-"
	}
	if pc.err != nil {
		return "not checked: " + pc.err.Error()
	}
	verdict := "ok"
	if pc.bad() {
		verdict = "PURGE CAME BACK"
	}
	return fmt.Sprintf("%s leads, earliest %d, hw %d, fetch@0 %s, fetch@%d %s: %s", pc.leader, pc.earliest, pc.hw, pc.fetch0, pc.lowWatermark-1, pc.fetchBelow, verdict)
}

// purgeRound runs one round on partition p and returns its row; purged holds each
// partition's highest acknowledged low watermark, raised by this round.
func purgeRound(t *testing.T, c *cluster, vp *valueProducer, topic string, p int32, busy bool, purged map[int32]int64) purgeRow {
	rw := purgeRow{part: p, busy: busy}
	before, _, _ := vp.snapshot()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	for range 300 {
		vp.send(ctx, p, 0)
	}
	err := vp.cl.Flush(ctx)
	cancel()
	if err != nil {
		rw.stepErr = fmt.Errorf("produce 300 records to p%d: %w", p, err)
		return rw
	}
	after, _, _ := vp.snapshot()
	var offs []int64
	for _, a := range after[len(before):] {
		if a.part == p {
			offs = append(offs, a.offset)
		}
	}
	if len(offs) == 0 {
		rw.stepErr = fmt.Errorf("no record of p%d acknowledged", p)
		return rw
	}
	rw.requested = offs[len(offs)/2]
	if busy {
		vp.run([]int32{p}, 200, 0)
		defer vp.stop(10 * time.Second)
		time.Sleep(500 * time.Millisecond)
	} else {
		// The followers have fetched everything and are parked in a long poll.
		time.Sleep(200 * time.Millisecond)
	}
	leader, err := c.leaderOf(topic, p, 30*time.Second)
	if err != nil {
		rw.stepErr = err
		return rw
	}
	rw.killed = leader.String()

	req := kmsg.NewPtrDeleteRecordsRequest()
	req.TimeoutMillis = 5000
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Partition, rp.Offset = p, rw.requested
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	// A client of its own, connected before the request: franz-go sends requests that
	// carry a timeout on a connection of their own, which a probe that outlived a restart
	// of this broker would find dead (EOF), and a fresh connection here would delay the
	// request rather than the kill.
	dcl, err := kgo.NewClient(kgo.SeedBrokers(leader.brokerAddr()), kgo.RequestRetries(0), kgo.DialTimeout(3*time.Second))
	if err != nil {
		rw.stepErr = err
		return rw
	}
	defer dcl.Close()
	warm := kmsg.NewPtrCreateTopicsRequest() // validate-only and empty: opens the connection
	warm.ValidateOnly, warm.TimeoutMillis = true, 1000
	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	_, _ = dcl.SeedBrokers()[0].Request(wctx, warm)
	wcancel()
	dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
	kresp, derr := dcl.SeedBrokers()[0].Request(dctx, req)
	dcancel()
	answered := time.Now()
	killErr := leader.kill9()
	rw.killAfterAnswer = time.Since(answered)
	if killErr != nil {
		rw.stepErr = killErr
	}
	if derr == nil {
		derr = errors.New("no answer for the partition")
		for _, t := range kresp.(*kmsg.DeleteRecordsResponse).Topics {
			for _, rp := range t.Partitions {
				if t.Topic == topic && rp.Partition == p {
					derr = kerr.ErrorForCode(rp.ErrorCode)
					rw.low = rp.LowWatermark
				}
			}
		}
	}
	rw.deleteErr = derr
	if derr == nil {
		purged[p] = max(purged[p], rw.low)
	}

	electStart := time.Now()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if l, err := c.leaderOf(topic, p, time.Second); err == nil && l != leader {
			break
		}
		if time.Now().After(deadline) {
			rw.stepErr = errors.Join(rw.stepErr, fmt.Errorf("no new leader for p%d 30s after killing %v", p, leader))
			break
		}
	}
	rw.electionDuration = time.Since(electStart)
	if derr == nil {
		rw.afterElection = checkPurged(c, topic, p, purged[p])
	}
	if err := leader.start(); err != nil {
		rw.stepErr = errors.Join(rw.stepErr, err)
		return rw
	}
	if err := c.waitBrokerReady(leader, 60*time.Second); err != nil {
		rw.stepErr = errors.Join(rw.stepErr, err)
	}
	if d, ok, why := c.waitHealed(topic, fullWaits.heal); !ok {
		t.Logf("p%d: not healed %v after restarting %v: %s", p, d.Round(time.Second), leader, why)
	}
	if derr == nil {
		rw.afterRestart = checkPurged(c, topic, p, purged[p])
	}
	return rw
}

// checkPurged asks p's current leader, and only it, what it serves below low: its
// earliest offset, and a Fetch at 0 and at low - 1. Retriable errors (a leader still
// being elected) are retried for up to 20 s.
func checkPurged(c *cluster, topic string, p int32, low int64) purgeCheck {
	pc := purgeCheck{lowWatermark: low}
	deadline := time.Now().Add(20 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		l, err := c.leaderOf(topic, p, 5*time.Second)
		if err != nil {
			last = err
			continue
		}
		md, err := l.metadata(context.Background())
		if err != nil {
			last = err
			time.Sleep(200 * time.Millisecond)
			continue
		}
		id, _ := topicID(md, topic)
		ctx := context.Background()
		earliest, _, err := l.listOffset(ctx, topic, p, -1, -2)
		if err != nil {
			last = err
			time.Sleep(200 * time.Millisecond)
			continue
		}
		describe := func(off int64) (string, bool, error) {
			fr, err := l.fetchAt(ctx, topic, id, p, off)
			if err != nil {
				return "", false, err
			}
			if fr.err != nil {
				if errors.Is(fr.err, kerr.OffsetOutOfRange) {
					return "OFFSET_OUT_OF_RANGE", false, nil
				}
				return "", false, fr.err
			}
			if len(fr.batches) == 0 {
				return fmt.Sprintf("no error, no records (log start %d, hw %d)", fr.logStart, fr.hw), false, nil
			}
			b := fr.batches[0]
			// Fetches answer whole batches, so the first may begin before the offset asked
			// for; only offsets in [off, low) count as served below the low watermark.
			return fmt.Sprintf("records from offset %d (batch %d-%d; log start %d)", max(b.base, off), b.base, b.last, fr.logStart),
				off < low && b.base < low && b.last >= off, nil
		}
		hw, _, err := l.listOffset(ctx, topic, p, -1, -1)
		if err != nil {
			last = err
			time.Sleep(200 * time.Millisecond)
			continue
		}
		pc.hw = hw
		f0, bad0, err := describe(0)
		if err != nil {
			last = err
			time.Sleep(200 * time.Millisecond)
			continue
		}
		fb, badB, err := describe(max(0, low-1))
		if err != nil {
			last = err
			time.Sleep(200 * time.Millisecond)
			continue
		}
		pc.leader, pc.earliest, pc.fetch0, pc.fetchBelow = l.String(), earliest, f0, fb
		pc.servedBelow = bad0 || badB
		pc.earliestLow = earliest < low
		return pc
	}
	pc.err = fmt.Errorf("no answer from p%d's leader within 20s: %w", p, last)
	return pc
}

func formatPurgeRows(rows []purgeRow) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tpartition\tproduce\tkilled\tDeleteRecords before\tlow watermark\tkill after answer\tafter election\tafter restart\t")
	for _, rw := range rows {
		mode := "idle"
		if rw.busy {
			mode = "busy"
		}
		low := fmt.Sprint(rw.low)
		if rw.deleteErr != nil {
			low = "indeterminate: " + rw.deleteErr.Error()
		}
		fmt.Fprintf(tw, "%d\tp%d\t%s\t%s\t%d\t%s\t%v\t%s\t%s\t\n", rw.n, rw.part, mode, rw.killed, rw.requested, low,
			rw.killAfterAnswer.Round(time.Microsecond), rw.afterElection, rw.afterRestart)
	}
	tw.Flush()
	return b.String()
}
