package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The share-group run's names and settings. A short lock makes a killed worker's records
// come back within a fault's hold; a low delivery limit makes poison records reach the
// dead-letter topic quickly.
const (
	shareGroup      = "chaos-share"
	shareTopic      = "share-in"
	shareDLQ        = "share-dlq"
	shareWorkers    = 4
	shareLock       = 5 * time.Second
	shareDeliveries = 3
)

// What a worker does with a record, by its sequence number: most are accepted; a poison
// record fails every time and is released, so it is delivered shareDeliveries times and
// then dead-lettered; a malformed one is rejected at once, and dead-lettered.
func shareAction(seq int64) kgo.AckStatus {
	switch seq % 50 {
	case 7:
		return kgo.AckRelease
	case 13:
		return kgo.AckReject
	}
	return kgo.AckAccept
}

// TestChaosShareGroups drains a single-partition topic with a pool of franz-go share
// consumers, each a process of its own, acknowledging record by record, while a feeder
// writes the topic with acks=all. Faults: kill -9 of a worker holding records, of the
// share partition's leader, of the share group's coordinator, and of the active
// controller. At the end every input record must have been accepted once (an accept the
// broker confirmed), or be in the dead-letter topic; none may be accepted twice, nor both
// accepted and dead-lettered. It runs with SHALE_CHAOS=full or SHALE_CHAOS=share.
func TestChaosShareGroups(t *testing.T) {
	if !fullRun() && os.Getenv("SHALE_CHAOS") != "share" {
		t.Skip("the share-group run is part of SHALE_CHAOS=full or SHALE_CHAOS=share (make chaos)")
	}
	c := newClusterArgs(t, combined, []string{
		"--group.share.record.lock.duration.ms=" + strconv.FormatInt(shareLock.Milliseconds(), 10),
		"--group.share.delivery.count.limit=" + strconv.Itoa(shareDeliveries)})
	if err := createTopicWith(c, shareDLQ, 3, nil); err != nil {
		t.Fatal(err)
	}
	dlq := shareDLQ
	if err := createTopicWith(c, shareTopic, 1, map[string]*string{"share.dead.letter.topic": &dlq}); err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{shareTopic, shareDLQ} {
		if d, ok, why := c.waitHealed(topic, fullWaits.heal); !ok {
			t.Fatalf("topic %s never healed (%v): %s", topic, d, why)
		}
	}
	feeder, err := startFeeder(c, shareTopic, 60)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { feeder.stop() })

	dir := t.TempDir()
	seeds := strings.Join(c.seeds(), ",")
	workers := make([]*supervised, shareWorkers)
	for i := range workers {
		// Each worker writes "deliver <offset> <seq> <count>" per delivery, then "accept
		// <offset> <seq> <count>" once the broker confirmed the accept, "unconfirmed
		// <offset> <seq>" when its outcome is unknown, or the release or reject.
		workers[i] = &supervised{t: t, name: fmt.Sprintf("w%d", i), dir: dir, command: func(int) *exec.Cmd {
			cmd := exec.Command(os.Args[0], "-test.run=^TestShareWorker$", "-test.v")
			cmd.Env = append(os.Environ(), "SHALE_SHARE_WORKER=1", "SHALE_BIN="+shaleBin, "SHALE_SHARE_SEEDS="+seeds)
			return cmd
		}}
		if err := workers[i].start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { workers[i].stop(5 * time.Second) })
	}
	killRestart := func(n *node) error {
		if err := n.kill9(); err != nil {
			return err
		}
		time.Sleep(hold)
		if err := n.start(); err != nil {
			return err
		}
		return c.waitBrokerReady(n, 60*time.Second)
	}
	steps := []struct {
		name string
		run  func() (string, error)
	}{
		{"kill -9 a worker holding records", func() (string, error) {
			w := workers[0]
			w.kill9()
			time.Sleep(time.Second)
			return w.name, w.start()
		}},
		{"kill -9 share partition leader", func() (string, error) {
			n, err := c.leaderOf(shareTopic, 0, 30*time.Second)
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("%v (leads %s p0)", n, shareTopic), killRestart(n)
		}},
		{"kill -9 share group coordinator", func() (string, error) {
			n, err := shareCoordinator(c, shareGroup)
			if err != nil {
				return "", err
			}
			return n.String(), killRestart(n)
		}},
		{"kill -9 active controller", func() (string, error) {
			n, err := c.activeController(30 * time.Second)
			if err != nil {
				return "", err
			}
			return n.String(), killRestart(n)
		}},
	}
	time.Sleep(3 * time.Second)
	for _, s := range steps {
		target, err := s.run()
		t.Logf("%s: %s", s.name, target)
		if err != nil {
			t.Errorf("fault step %s failed: %v", s.name, err)
		}
		if _, ok, why := c.waitHealed(shareTopic, fullWaits.heal); !ok {
			t.Logf("after %s: not healed: %s", s.name, why)
		}
		time.Sleep(2 * time.Second)
	}
	for _, w := range workers {
		w.superviseOnce()
	}
	fed := feeder.stop()

	// Drained when every fed record is accounted for: accepted, or dead-lettered.
	input, err := readValues(c, shareTopic, false)
	if err != nil {
		t.Fatalf("read input: %v", err)
	}
	deadline := time.Now().Add(3 * time.Minute)
	var v shareVerdict
	for {
		for _, w := range workers {
			w.superviseOnce()
		}
		dead, err := readDeadLetters(c)
		if err != nil {
			t.Fatalf("read dead letters: %v", err)
		}
		v = checkShareOutcome(input, workers, dead)
		if v.missing == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(2 * time.Second)
	}
	for _, w := range workers {
		w.stop(15 * time.Second)
		for _, e := range w.exits {
			t.Logf("%s: %s", w.name, e)
		}
	}
	t.Logf("%d fed and acknowledged, %d in the log; accepted %d (confirmed), %d accepts unconfirmed, dead-lettered %d (%d written twice); missing %d, accepted twice %d, accepted and dead-lettered %d, dead letters with a wrong delivery count %d, deliveries seen by workers %d",
		fed, len(input), v.accepted, v.uncertain, v.dead, v.deadDup, v.missing, v.doubleAccepted, v.acceptedAndDead, v.badCount, v.deliveries)
	for _, e := range v.examples {
		t.Log(e)
	}
	if v.missing+v.doubleAccepted+v.acceptedAndDead+v.badCount > 0 {
		t.Errorf("share group outcome wrong: %d missing, %d accepted twice, %d accepted and dead-lettered, %d bad dead letters",
			v.missing, v.doubleAccepted, v.acceptedAndDead, v.badCount)
	}
	if len(input) < fed {
		t.Errorf("the input holds %d records but %d were acknowledged", len(input), fed)
	}
}

// feeder writes numbered records (value = sequence number) to a topic with acks=all at a
// steady rate until stopped.
type feeder struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
	mu     sync.Mutex
	acked  int
}

func startFeeder(c *cluster, topic string, rate int) (*feeder, error) {
	// Round robin: the default sticky partitioner would keep these small records on one
	// partition for the whole run.
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DialTimeout(3*time.Second), kgo.MetadataMinAge(500*time.Millisecond))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &feeder{cl: cl, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(f.done)
		tick := time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
		for seq := int64(0); ; seq++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			cl.Produce(ctx, &kgo.Record{Value: []byte(strconv.FormatInt(seq, 10))}, func(_ *kgo.Record, err error) {
				if err == nil {
					f.mu.Lock()
					f.acked++
					f.mu.Unlock()
				}
			})
		}
	}()
	return f, nil
}

// stop ends the feed, waits for what is in flight, and returns how many records were
// acknowledged.
func (f *feeder) stop() int {
	f.once.Do(func() {
		f.cancel()
		<-f.done
		ctx, cancel := context.WithTimeout(context.Background(), fullWaits.drain)
		_ = f.cl.Flush(ctx)
		cancel()
		closeBounded(f.cl, 10*time.Second)
	})
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.acked
}

// shareCoordinator is the broker that FindCoordinator (key type GROUP, as for any group)
// names for a share group.
func shareCoordinator(c *cluster, group string) (*node, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.DialTimeout(3*time.Second))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resps := adm.FindGroupCoordinators(ctx, group)
		cancel()
		for _, r := range resps {
			if r.Err == nil {
				if n := c.byID(r.NodeID); n != nil && n.running() {
					return n, nil
				}
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no coordinator for share group %q after 30s", group)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// deadLetter is one record of the dead-letter topic.
type deadLetter struct {
	seq, offset, deliveries int64
	topic                   string
}

func readDeadLetters(c *cluster) ([]deadLetter, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.ConsumeTopics(shareDLQ),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(300*time.Millisecond), kgo.DialTimeout(3*time.Second))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var out []deadLetter
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	quiet := time.Now()
	for time.Since(quiet) < 3*time.Second {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollFetches(pctx)
		pcancel()
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		fs.EachRecord(func(r *kgo.Record) {
			quiet = time.Now()
			d := deadLetter{offset: -1, deliveries: -1}
			d.seq, _ = strconv.ParseInt(string(r.Value), 10, 64)
			for _, h := range r.Headers {
				switch h.Key {
				case "__dlq.errors.topic":
					d.topic = string(h.Value)
				case "__dlq.errors.offset":
					d.offset, _ = strconv.ParseInt(string(h.Value), 10, 64)
				case "__dlq.errors.delivery.count":
					d.deliveries, _ = strconv.ParseInt(string(h.Value), 10, 64)
				}
			}
			out = append(out, d)
		})
	}
	return out, nil
}

type shareVerdict struct {
	accepted, uncertain, dead, deadDup, deliveries     int
	missing, doubleAccepted, acceptedAndDead, badCount int
	examples                                           []string
}

// checkShareOutcome accounts for every input record: accepted once (confirmed or not),
// or dead-lettered (at least once) with the delivery count its action implies.
func checkShareOutcome(input []txnRecord, workers []*supervised, dead []deadLetter) shareVerdict {
	var v shareVerdict
	example := func(format string, args ...any) {
		if len(v.examples) < 10 {
			v.examples = append(v.examples, fmt.Sprintf(format, args...))
		}
	}
	accepted := map[string]int{}
	uncertain := map[string]bool{}
	for _, w := range workers {
		for _, f := range w.lines() {
			if len(f) < 3 {
				continue
			}
			switch f[0] {
			case "accept":
				accepted[f[2]]++
			case "unconfirmed":
				uncertain[f[2]] = true
			case "deliver":
				v.deliveries++
			}
		}
	}
	deadSeen := map[string]int{}
	for _, d := range dead {
		s := strconv.FormatInt(d.seq, 10)
		deadSeen[s]++
		if d.topic != shareTopic {
			v.badCount++
			example("dead letter %s names source topic %q", s, d.topic)
		}
		if shareAction(d.seq) == kgo.AckRelease && d.deliveries != shareDeliveries {
			v.badCount++
			example("poison record %s dead-lettered after %d deliveries, want %d", s, d.deliveries, shareDeliveries)
		}
	}
	for _, r := range input {
		s := r.value
		seq, _ := strconv.ParseInt(s, 10, 64)
		a, d := accepted[s], deadSeen[s]
		switch {
		case a > 1:
			v.doubleAccepted++
			example("record %s accepted %d times", s, a)
		case a > 0 && d > 0:
			v.acceptedAndDead++
			example("record %s accepted and dead-lettered", s)
		case a == 1:
			v.accepted++
		case d > 0:
			v.dead++
			if d > 1 {
				v.deadDup++
			}
			if shareAction(seq) == kgo.AckAccept && !uncertain[s] {
				// A record meant to be accepted reaches the dead-letter topic only when its
				// deliveries ran out (workers killed while holding it, repeatedly).
				example("record %s (to be accepted) was dead-lettered", s)
			}
		case uncertain[s]:
			v.uncertain++
		default:
			v.missing++
			example("record %s neither accepted nor dead-lettered", s)
		}
	}
	return v
}

// TestShareWorker is one share-group worker process of TestChaosShareGroups; it does
// nothing in a normal test run. It fetches one record at a time, so that each confirmed
// acknowledgement is known to be that record's.
func TestShareWorker(t *testing.T) {
	if os.Getenv("SHALE_SHARE_WORKER") == "" {
		t.Skip("a subprocess of TestChaosShareGroups")
	}
	var mu sync.Mutex
	var results []error
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(strings.Split(os.Getenv("SHALE_SHARE_SEEDS"), ",")...),
		kgo.ShareGroup(shareGroup),
		kgo.ConsumeTopics(shareTopic),
		kgo.ShareMaxRecords(1),
		kgo.ShareMaxRecordsStrict(),
		kgo.DialTimeout(3*time.Second),
		kgo.MetadataMinAge(500*time.Millisecond),
		kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
			mu.Lock()
			results = append(results, rs.Error())
			mu.Unlock()
		}),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	for ctx.Err() == nil {
		fs := cl.PollRecords(ctx, 1)
		if fs.IsClientClosed() || ctx.Err() != nil {
			break
		}
		fs.EachError(func(topic string, p int32, err error) { fmt.Printf("fetch-error %s p%d: %v\n", topic, p, err) })
		for _, r := range fs.Records() {
			seq, _ := strconv.ParseInt(string(r.Value), 10, 64)
			fmt.Printf("deliver %d %d %d\n", r.Offset, seq, r.DeliveryCount())
			time.Sleep(20 * time.Millisecond) // the work
			status := shareAction(seq)
			mu.Lock()
			results = results[:0]
			mu.Unlock()
			r.Ack(status)
			fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			ferr := cl.FlushAcks(fctx)
			cancel()
			mu.Lock()
			var aerr error
			if len(results) == 0 {
				aerr = fmt.Errorf("no acknowledgement result (flush: %v)", ferr)
			} else {
				for _, e := range results {
					if e != nil {
						aerr = e
					}
				}
			}
			mu.Unlock()
			if status != kgo.AckAccept {
				fmt.Printf("%s %d %d (%v)\n", status, r.Offset, seq, aerr)
				continue
			}
			if aerr == nil {
				fmt.Printf("accept %d %d %d\n", r.Offset, seq, r.DeliveryCount())
			} else {
				fmt.Printf("unconfirmed %d %d %v\n", r.Offset, seq, aerr)
			}
		}
	}
}
