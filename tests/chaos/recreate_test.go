package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestChaosTopicRecreate deletes a topic and creates it again under the same name while a
// broker is cut off from the controllers (issue 23, bug 1: replica state keyed by topic
// name, so a broker that sees "topic t, id A" and then "topic t, id B", without t's
// deletion in between (images are coalesced), goes on serving the old log as the new
// topic's). The dedicated layout (three controllers, brokers 4-6), one topic of three
// partitions, RF=3. Each round:
//   - the topic's current incarnation has records whose values name it ("i1-17");
//   - broker X, the leader of one partition, is cut off from the three controllers, and
//     from the test client too (so that no client can take the old topic's metadata from
//     X: everything a client of the new topic sees comes from the new topic's id). X still
//     reaches the other brokers;
//   - at once (within X's session timeout, so that the controller still counts X as live
//     and places the new topic's replicas on it), the topic is deleted and created again;
//     a producer writes the new incarnation's records (acks=all, idempotent) and a
//     consumer reads them from the start;
//   - the second round also restarts every controller (SIGTERM, which snapshots) while X
//     is cut off, so that X reconnects behind every controller's delta log and gets one
//     complete image: "t, id B" without the deletion;
//   - the cut lasts past the session timeout, then heals; once X's metadata names the new
//     topic id and the ISR is full, leadership of every partition moves to X (reassigned
//     with X first, then a preferred election), so that whatever log X kept is what
//     clients read, and the producer goes on for a few seconds.
//
// Checks, per round: no record of an older incarnation is ever seen by the live consumer,
// by a read of every partition from its log start (with X leading), or in the answer of
// any broker to a consumer Fetch from offset 0 that names the new topic id (sent to every
// broker after the heal and again at the end: a broker that is not the leader must
// refuse it, so this shows a replica that kept the old log even while the metadata names
// another leader); every acknowledged record of the new incarnation is in the read; and
// X's replicas are back in the ISR within a minute of the heal. It runs with
// SHALE_CHAOS=full, data or recreate.
func TestChaosTopicRecreate(t *testing.T) {
	dataFault(t, "recreate")
	started := time.Now()
	c := newCluster(t, dedicated)
	const topic = "recreate"
	const parts = int32(3)
	if err := createTopicWith(c, topic, parts, nil); err != nil {
		t.Fatal(err)
	}
	if d, ok, why := c.waitHealed(topic, fullWaits.heal); !ok {
		t.Fatalf("topic %s never healed (%v): %s", topic, d, why)
	}
	// The first incarnation's records, to be deleted.
	inc := 1
	if err := produceIncarnation(c.brokers, topic, parts, inc, 3*time.Second); err != nil {
		t.Fatal(err)
	}
	var rows []recreateRow
	for i, fullImage := range []bool{false, true} {
		rw := recreateRound(t, c, topic, parts, i, inc, fullImage)
		inc++
		rows = append(rows, rw)
		t.Logf("round %d: %s", rw.n, rw.summary())
	}
	t.Logf("topic deleted and recreated while a broker was cut off from the controllers, %d rounds, %v:\n%s",
		len(rows), time.Since(started).Round(time.Second), formatRecreateRows(rows))
	var old, lost, acked int
	for _, rw := range rows {
		old += rw.oldSeenLive + rw.oldInLog + rw.oldDirect
		lost += rw.lost
		acked += rw.acked
	}
	t.Logf("totals: %d acknowledged records of new incarnations, %d lost, %d records of an older incarnation seen", acked, lost, old)
	for _, rw := range rows {
		for _, e := range rw.examples {
			t.Logf("round %d: %s", rw.n, e)
		}
		if rw.stepErr != nil {
			t.Errorf("round %d: fault step failed: %v", rw.n, rw.stepErr)
		}
		if !rw.checked {
			continue
		}
		if rw.readErr != nil {
			t.Errorf("round %d: could not read the topic back: %v", rw.n, rw.readErr)
		}
		if rw.oldSeenLive+rw.oldInLog+rw.oldDirect > 0 {
			t.Errorf("round %d: the recreated topic served records of an older incarnation: %d to its consumer, %d in a read from the log start, %d in Fetches of its id sent to each broker",
				rw.n, rw.oldSeenLive, rw.oldInLog, rw.oldDirect)
		}
		if !rw.healed {
			t.Errorf("round %d: the ISR of the recreated topic was not full %v after the heal: %s's replicas never rejoined", rw.n, fullWaits.heal, rw.x)
		}
		if rw.lost > 0 || rw.dup > 0 {
			t.Errorf("round %d: %d acknowledged records of the new incarnation lost, %d duplicated", rw.n, rw.lost, rw.dup)
		}
		if rw.acked == 0 {
			t.Errorf("round %d: no record of the new incarnation was acknowledged", rw.n)
		}
	}
}

// produceIncarnation writes incarnation inc's records to every partition for d.
func produceIncarnation(nodes []*node, topic string, parts int32, inc int, d time.Duration) error {
	cl, err := clientOn(nodes, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5*time.Millisecond), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		return err
	}
	defer cl.Close()
	vp := newValueProducer(cl, topic, fmt.Sprintf("i%d", inc))
	vp.run(partitionList(parts), 300, 0)
	time.Sleep(d)
	vp.stop(10 * time.Second)
	acks, failed, lastErr := vp.snapshot()
	if len(acks) == 0 {
		return fmt.Errorf("incarnation %d: nothing acknowledged (%d failed, %v)", inc, failed, lastErr)
	}
	return nil
}

func partitionList(parts int32) []int32 {
	var out []int32
	for p := range parts {
		out = append(out, p)
	}
	return out
}

// recreateRow is one round.
type recreateRow struct {
	n                 int
	fullImage         bool
	x                 string
	recreatedAfter    time.Duration // from the cut to the new topic's creation
	xReplicas         int           // partitions of the new topic that name X as a replica
	xConverged        time.Duration // from the heal until X's metadata named the new id
	xConvergedOK      bool
	xLeads            bool
	healed            bool
	acked, failed     int
	lost, dup         int
	oldSeenLive       int
	oldInLog          int
	oldDirect         int // in Fetches of the new id sent straight to each broker
	consumed, logRecs int
	examples          []string
	stepErr, readErr  error
	checked           bool // the round got as far as its checks
}

func (rw recreateRow) summary() string {
	mode := "deltas"
	if rw.fullImage {
		mode = "controllers restarted: full image"
	}
	return fmt.Sprintf("%s cut off (%s); recreated %v after the cut with X in %d partitions' replicas; X named the new id %s after the heal; ISR healed %v; X leads every partition %v; new incarnation: %d acknowledged (%d failed), %d lost, %d duplicated; older incarnation's records seen: %d by the live consumer (of %d), %d in the read from the log start (of %d), %d in Fetches of the new id sent to each broker",
		rw.x, mode, rw.recreatedAfter.Round(time.Millisecond), rw.xReplicas, durOrNever(rw.xConverged, rw.xConvergedOK), rw.healed, rw.xLeads,
		rw.acked, rw.failed, rw.lost, rw.dup, rw.oldSeenLive, rw.consumed, rw.oldInLog, rw.logRecs, rw.oldDirect)
}

func durOrNever(d time.Duration, ok bool) string {
	if !ok {
		return fmt.Sprintf("never (waited %v)", d.Round(time.Second))
	}
	return d.Round(time.Millisecond).String()
}

// recreateRound runs one round: the topic's incarnation inc is deleted and inc+1
// created while a broker is cut off; it returns inc+1's verdict.
func recreateRound(t *testing.T, c *cluster, topic string, parts int32, round, inc int, fullImage bool) recreateRow {
	rw := recreateRow{n: round + 1, fullImage: fullImage}
	x, err := c.leaderOf(topic, int32(round)%parts, 30*time.Second)
	if err != nil {
		rw.stepErr = err
		return rw
	}
	rw.x = x.String()
	others := slices.DeleteFunc(slices.Clone(c.brokers), func(n *node) bool { return n == x })

	var oldID [16]byte
	if md, err := x.metadata(context.Background()); err == nil {
		oldID, _ = topicID(md, topic)
	}

	cutAt := time.Now()
	var cutErr error
	for _, ctl := range c.controllers {
		cutErr = errors.Join(cutErr, c.net.Cut(x.net, ctl.net))
	}
	cutErr = errors.Join(cutErr, c.net.Cut(x.net, nil))
	defer func() { _ = c.net.Heal() }()
	if cutErr != nil {
		rw.stepErr = cutErr
		return rw
	}

	adminCl, err := clientOn(others)
	if err != nil {
		rw.stepErr = err
		return rw
	}
	defer adminCl.Close()
	adm := kadm.NewClient(adminCl)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	dresp, err := adm.DeleteTopics(ctx, topic)
	cancel()
	if err == nil {
		err = dresp.Error()
	}
	if err != nil {
		rw.stepErr = fmt.Errorf("delete %s: %w", topic, err)
		return rw
	}
	two := "2"
	var newID [16]byte
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := adm.CreateTopic(ctx, parts, 3, map[string]*string{"min.insync.replicas": &two}, topic)
		cancel()
		if err == nil {
			err = resp.Err
		}
		if err == nil {
			newID = resp.ID // zero below CreateTopics v7: then taken from the metadata below
			break
		}
		if time.Since(cutAt) > 15*time.Second {
			rw.stepErr = fmt.Errorf("recreate %s: %w", topic, err)
			return rw
		}
		// TOPIC_ALREADY_EXISTS: the deletion is not visible on this broker yet.
		if !errors.Is(err, kerr.TopicAlreadyExists) {
			t.Logf("round %d: recreate %s: %v", rw.n, topic, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	rw.recreatedAfter = time.Since(cutAt)
	newInc := inc + 1
	if newID == oldID {
		rw.stepErr = fmt.Errorf("recreate %s: CreateTopics answered the old topic id %x", topic, oldID)
		return rw
	}
	// Every broker still connected shows the new topic before its clients start.
	for _, o := range others {
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			md, err := o.metadata(context.Background())
			if err == nil {
				if id, ok := topicID(md, topic); ok && id != oldID && id != ([16]byte{}) && (newID == [16]byte{} || id == newID) {
					newID = id
					if o == others[0] {
						for _, ps := range topicState(md, topic) {
							if slices.Contains(ps.replicas, x.id) {
								rw.xReplicas++
							}
						}
					}
					break
				}
			}
			if time.Now().After(deadline) {
				rw.stepErr = fmt.Errorf("%v does not show %s's new id %x 10s after its creation", o, topic, newID)
				return rw
			}
		}
	}

	// Uncompressed, so that the direct fetches below can read the values.
	pcl, err := clientOn(others, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5*time.Millisecond), kgo.ProduceRequestTimeout(10*time.Second),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		rw.stepErr = err
		return rw
	}
	defer pcl.Close()
	vp := newValueProducer(pcl, topic, fmt.Sprintf("i%d", newInc))
	vp.run(partitionList(parts), 300, 0)
	lc, err := startLiveConsumer(others, topic, parts)
	if err != nil {
		vp.stop(time.Second)
		rw.stepErr = err
		return rw
	}

	var stepErrs []error
	if fullImage {
		// Each controller in turn: SIGTERM (a snapshot of everything applied), restart,
		// and a quorum again before the next. X is no controller, so two of three stay.
		for _, ctl := range c.controllers {
			if err := ctl.terminate(); err != nil {
				stepErrs = append(stepErrs, err)
			}
			if err := ctl.start(); err != nil {
				stepErrs = append(stepErrs, err)
				continue
			}
			if _, err := c.activeController(30 * time.Second); err != nil {
				stepErrs = append(stepErrs, err)
			}
		}
	}
	if d := time.Until(cutAt.Add(hold)); d > 0 {
		time.Sleep(d)
	}
	healAt := time.Now()
	if err := c.net.Heal(); err != nil {
		stepErrs = append(stepErrs, err)
	}
	// X's own metadata must come to name the new topic id.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if md, err := x.metadata(context.Background()); err == nil {
			if id, ok := topicID(md, topic); ok && id == newID {
				rw.xConverged, rw.xConvergedOK = time.Since(healAt), true
				break
			}
		}
		if time.Now().After(deadline) {
			rw.xConverged = time.Since(healAt)
			break
		}
	}
	var why string
	_, rw.healed, why = c.waitHealed(topic, fullWaits.heal)
	if !rw.healed {
		t.Logf("round %d: ISR not full %v after the heal: %s; %v's log on %s:\n%s", rw.n, fullWaits.heal, why, x, topic, grepLog(x, topic, 30))
	}
	want := fmt.Sprintf("i%d", newInc)
	rw.oldDirect += directFetchOld(c, topic, newID, parts, want, &rw.examples)
	// Leadership can move to X only once X is back in every ISR.
	if !rw.healed {
		t.Logf("round %d: leadership not moved to %v: its replicas are not all in the ISR", rw.n, x)
	} else if err := leadEverything(c, adm, topic, parts, x); err != nil {
		stepErrs = append(stepErrs, fmt.Errorf("moving leadership to %v: %w", x, err))
	} else {
		rw.xLeads = true
	}
	time.Sleep(3 * time.Second) // the new incarnation's records go on, to X's logs now
	rw.oldDirect += directFetchOld(c, topic, newID, parts, want, &rw.examples)

	vp.stop(15 * time.Second)
	acks, failed, lastErr := vp.snapshot()
	rw.acked, rw.failed = len(acks), failed
	if lastErr != nil {
		t.Logf("round %d: %d records failed, e.g. %v", rw.n, failed, lastErr)
	}
	time.Sleep(time.Second) // the consumer's last fetches
	lc.close()
	seen, _ := lc.snapshot()
	log, starts, ends, readErr := readRange(running(c.brokers), topic, parts, 60*time.Second)
	rw.readErr = readErr
	rw.consumed, rw.logRecs = len(seen), len(log)
	example := func(format string, args ...any) {
		if len(rw.examples) < 8 {
			rw.examples = append(rw.examples, fmt.Sprintf(format, args...))
		}
	}
	for _, r := range seen {
		if incarnationOf(r.value) != want {
			rw.oldSeenLive++
			example("the live consumer of incarnation %d got %q at p%d offset %d", newInc, r.value, r.part, r.offset)
		}
	}
	count := map[string]int{}
	for _, r := range log {
		count[r.value]++
		if incarnationOf(r.value) != want {
			rw.oldInLog++
			example("the read of incarnation %d from the log start got %q at p%d offset %d", newInc, r.value, r.part, r.offset)
		}
	}
	for v, n := range count {
		if n > 1 {
			rw.dup += n - 1
			example("%q appears %d times", v, n)
		}
	}
	if readErr == nil {
		for _, a := range acks {
			if count[a.value] == 0 {
				rw.lost++
				example("lost: %q acknowledged at p%d offset %d, not in the log [%d, %d)", a.value, a.part, a.offset, starts[a.part], ends[a.part])
			}
		}
	}
	rw.stepErr = errors.Join(stepErrs...)
	rw.checked = true
	return rw
}

// directFetchOld sends a consumer Fetch for every partition of the topic (named by its
// new id) from offset 0 to every running broker, and counts the records of an incarnation
// other than want in the answers. A broker that is not the leader must refuse
// (NOT_LEADER_OR_FOLLOWER); one that answers must answer with the new topic's records.
// It is how a replica that kept the old topic's log as the new one's shows, even while
// the metadata names another leader.
func directFetchOld(c *cluster, topic string, id [16]byte, parts int32, want string, examples *[]string) int {
	old := 0
	for _, b := range running(c.brokers) {
		for p := range parts {
			fr, err := b.fetchAt(context.Background(), topic, id, p, 0)
			if err != nil || fr.err != nil {
				continue
			}
			for _, r := range fr.records {
				if incarnationOf(r.value) != want {
					old++
					if len(*examples) < 8 {
						*examples = append(*examples, fmt.Sprintf("a Fetch of the new topic id from %v answered %q at p%d offset %d (log start %d, hw %d)",
							b, r.value, p, r.offset, fr.logStart, fr.hw))
					}
				}
			}
		}
	}
	return old
}

// grepLog is the last lines of n's current log that mention s.
func grepLog(n *node, s string, lines int) string {
	b, _ := os.ReadFile(n.logPath)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	if len(out) > lines {
		out = out[len(out)-lines:]
	}
	return strings.Join(out, "\n")
}

// incarnationOf is the "i<n>" a value starts with.
func incarnationOf(v string) string {
	prefix, _, _ := strings.Cut(v, "-")
	return prefix
}

// leadEverything makes x the leader of every partition of topic: each is reassigned to
// the same replicas with x first, then a preferred election; it waits until every
// broker's metadata shows x leading.
func leadEverything(c *cluster, adm *kadm.Client, topic string, parts int32, x *node) error {
	ps, err := c.topicNow(topic)
	if err != nil {
		return err
	}
	var req kadm.AlterPartitionAssignmentsReq
	for p, st := range ps {
		if !slices.Contains(st.replicas, x.id) {
			return fmt.Errorf("p%d's replicas %v do not include %v", p, st.replicas, x)
		}
		if st.replicas[0] != x.id {
			req.Assign(topic, int32(p), append([]int32{x.id}, slices.DeleteFunc(slices.Clone(st.replicas), func(id int32) bool { return id == x.id })...))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	if len(req) > 0 {
		resps, err := adm.AlterPartitionAssignments(ctx, req)
		if err == nil {
			err = resps.Error()
		}
		if err != nil {
			return fmt.Errorf("reassign with %v first: %w", x, err)
		}
	}
	set := kadm.TopicsSet{}
	for p := range parts {
		set.Add(topic, p)
	}
	var lastErr error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		res, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, set)
		if err != nil {
			lastErr = err
			continue
		}
		lastErr = nil
		for _, ps := range res {
			for _, r := range ps {
				if r.Err != nil && !errors.Is(r.Err, kerr.ElectionNotNeeded) {
					lastErr = fmt.Errorf("p%d: %w", r.Partition, r.Err)
				}
			}
		}
		if lastErr != nil {
			continue
		}
		all := true
		for _, b := range running(c.brokers) {
			md, err := b.metadata(context.Background())
			if err != nil {
				all = false
				break
			}
			for _, st := range topicState(md, topic) {
				if st.leader != x.id {
					all = false
				}
			}
		}
		if all {
			return nil
		}
	}
	if lastErr == nil {
		lastErr = errors.New("the brokers' metadata never showed it leading every partition")
	}
	return fmt.Errorf("%v does not lead every partition after 30s: %w", x, lastErr)
}

func formatRecreateRows(rows []recreateRow) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tcut off\tX gets\trecreated after cut\tX replicas\tX has new id after heal\tISR healed\tX leads all\tacked\tfailed\tlost\tdup\told seen (consumer)\told in read\told in direct fetch\t")
	for _, rw := range rows {
		mode := "deltas"
		if rw.fullImage {
			mode = "full image"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%v\t%d\t%s\t%v\t%v\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", rw.n, rw.x, mode, rw.recreatedAfter.Round(time.Millisecond),
			rw.xReplicas, durOrNever(rw.xConverged, rw.xConvergedOK), rw.healed, rw.xLeads, rw.acked, rw.failed, rw.lost, rw.dup, rw.oldSeenLive, rw.oldInLog, rw.oldDirect)
	}
	tw.Flush()
	return b.String()
}
