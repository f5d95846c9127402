package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The transactional pipeline's names. One transactional id for the whole run: each
// restarted pipeline process takes it over and so fences the one before it.
const (
	txnPipelineID    = "chaos-pipeline"
	txnPipelineGroup = "chaos-pipeline-group"
	// txnPause is how long a pipeline waits between producing a transaction's records and
	// committing it, so that a kill -9 of the pipeline lands between the two.
	txnPause = 100 * time.Millisecond
)

// TestChaosTransactions runs a consume-transform-produce pipeline that copies numbered
// records from an input topic to an output topic in transactions (the records and the
// group's offsets in one transaction), while a feeder writes the input with acks=all. The
// pipeline is a process of its own (franz-go's GroupTransactSession, and librdkafka through
// confluent-kafka-python), so that it can be killed between produce and commit. Faults:
// kill -9 of the transaction coordinator, of an output partition's leader, of the pipeline
// itself, and of the active controller. At the end, a read_committed read of the output
// must hold every input record exactly once, no record of a transaction the pipeline saw
// abort, and every committed transaction whole. It runs with SHALE_CHAOS=full or
// SHALE_CHAOS=txn (the pipeline needs python3 with confluent_kafka for the librdkafka half).
func TestChaosTransactions(t *testing.T) {
	if !fullRun() && os.Getenv("SHALE_CHAOS") != "txn" {
		t.Skip("the transactional pipeline runs with SHALE_CHAOS=full or SHALE_CHAOS=txn (make chaos)")
	}
	t.Run("franz-go", func(t *testing.T) { runTxnPipeline(t, franzPipeline) })
	t.Run("librdkafka", func(t *testing.T) {
		if err := exec.Command(pythonBin(), "-c", "import confluent_kafka").Run(); err != nil {
			t.Skipf("%s has no confluent_kafka: %v", pythonBin(), err)
		}
		runTxnPipeline(t, librdkafkaPipeline)
	})
}

// pipelineKind says how to start one pipeline process.
type pipelineKind func(t *testing.T, seeds []string, in, out, instance string) *exec.Cmd

func franzPipeline(t *testing.T, seeds []string, in, out, instance string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^TestTxnPipelineWorker$", "-test.v")
	cmd.Env = append(os.Environ(),
		"SHALE_TXN_WORKER=1",
		"SHALE_BIN="+shaleBin, // so that the worker's TestMain builds nothing
		"SHALE_TXN_SEEDS="+strings.Join(seeds, ","),
		"SHALE_TXN_IN="+in,
		"SHALE_TXN_OUT="+out,
		"SHALE_TXN_INSTANCE="+instance,
	)
	return cmd
}

func librdkafkaPipeline(t *testing.T, seeds []string, in, out, instance string) *exec.Cmd {
	script, err := filepath.Abs(filepath.Join("testdata", "txn_pipeline.py"))
	if err != nil {
		t.Fatal(err)
	}
	return exec.Command(pythonBin(), script, strings.Join(seeds, ","), in, out, txnPipelineGroup, txnPipelineID,
		instance, strconv.FormatFloat(txnPause.Seconds(), 'f', 3, 64))
}

// pythonBin is Debian's python3, which has the Kafka client modules; a pyenv python3 may
// come first on PATH without them.
func pythonBin() string {
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		return "/usr/bin/python3"
	}
	return "python3"
}

// pipelineOutcomes reads what every pipeline process wrote: the transactions it
// committed and aborted.
func pipelineOutcomes(p *supervised) (committed, aborted map[string]bool) {
	committed, aborted = map[string]bool{}, map[string]bool{}
	for _, f := range p.lines() {
		if len(f) != 2 {
			continue
		}
		switch f[0] {
		case "commit":
			committed[f[1]] = true
		case "abort":
			aborted[f[1]] = true
		}
	}
	return committed, aborted
}

func runTxnPipeline(t *testing.T, kind pipelineKind) {
	c := newCluster(t, combined)
	in, out := "txn-in", "txn-out"
	for _, topic := range []string{in, out} {
		if err := createTopic(c, topic); err != nil {
			t.Fatal(err)
		}
		if d, ok, why := c.waitHealed(topic, fullWaits.heal); !ok {
			t.Fatalf("topic %s never healed (%v): %s", topic, d, why)
		}
	}
	feeder, err := startFeeder(c, in, 100)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { feeder.stop() })
	seeds := c.seeds()
	p := &supervised{t: t, name: "pipeline", dir: t.TempDir(), command: func(n int) *exec.Cmd {
		return kind(t, seeds, in, out, fmt.Sprintf("i%d", n))
	}}
	if err := p.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.stop(5 * time.Second) })
	stopSupervisor := make(chan struct{})
	supervised := make(chan struct{})
	go func() {
		defer close(supervised)
		for {
			select {
			case <-stopSupervisor:
				return
			case <-time.After(200 * time.Millisecond):
				p.superviseOnce()
			}
		}
	}()

	type step struct {
		name string
		run  func() (string, error)
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
	steps := []step{
		{"kill -9 transaction coordinator", func() (string, error) {
			n, err := txnCoordinator(c, txnPipelineID)
			if err != nil {
				return "", err
			}
			return n.String(), killRestart(n)
		}},
		{"kill -9 output partition leader", func() (string, error) {
			n, err := c.leaderOf(out, 0, 30*time.Second)
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("%v (leads %s p0)", n, out), killRestart(n)
		}},
		{"kill -9 pipeline between produce and commit", func() (string, error) {
			p.kill9()
			time.Sleep(time.Second)
			return "pipeline", p.start()
		}},
		{"kill -9 active controller", func() (string, error) {
			n, err := c.activeController(30 * time.Second)
			if err != nil {
				return "", err
			}
			return n.String(), killRestart(n)
		}},
	}
	time.Sleep(3 * time.Second) // a baseline of committed transactions
	var stepErrs []error
	for _, s := range steps {
		target, err := s.run()
		t.Logf("%s: %s", s.name, target)
		if err != nil {
			stepErrs = append(stepErrs, fmt.Errorf("%s: %w", s.name, err))
		}
		if _, ok, why := c.waitHealed(out, fullWaits.heal); !ok {
			t.Logf("after %s: not healed: %s", s.name, why)
		}
		time.Sleep(2 * time.Second)
	}
	feeder.stop()

	caughtUp, why := waitPipelineCaughtUp(c, in, 2*time.Minute)
	close(stopSupervisor)
	<-supervised
	p.stop(15 * time.Second)
	if !caughtUp {
		t.Errorf("the pipeline did not catch up with the input: %s", why)
	}
	for _, err := range stepErrs {
		t.Errorf("fault step failed: %v", err)
	}
	for _, e := range p.exits {
		t.Logf("pipeline: %s", e)
	}

	input, err := readValues(c, in, false)
	if err != nil {
		t.Fatalf("read input: %v", err)
	}
	output, err := readValues(c, out, true)
	if err != nil {
		t.Fatalf("read output (read_committed): %v", err)
	}
	everything, err := readValues(c, out, false)
	if err != nil {
		t.Fatalf("read output (read_uncommitted): %v", err)
	}
	committed, aborted := pipelineOutcomes(p)
	v := checkTxnOutput(input, output, committed, aborted)
	t.Logf("%d input records, %d output records read_committed (%d read_uncommitted), %d pipeline processes, %d transactions committed and %d aborted as the pipelines saw them: lost %d, duplicated %d, aborted records visible %d, committed transactions partly visible %d, records not from the input %d",
		len(input), len(output), len(everything), p.instances, len(committed), len(aborted), v.lost, v.dup, v.abortedSeen, v.partial, v.phantom)
	for _, e := range v.examples {
		t.Log(e)
	}
	if v.lost+v.dup+v.abortedSeen+v.partial+v.phantom > 0 {
		t.Errorf("exactly-once violated: lost %d, duplicated %d, aborted visible %d, partial transactions %d, phantoms %d",
			v.lost, v.dup, v.abortedSeen, v.partial, v.phantom)
	}
	if len(committed) == 0 || len(input) == 0 {
		t.Errorf("nothing went through the pipeline (%d input records, %d transactions committed)", len(input), len(committed))
	}
}

// txnCoordinator is the broker that FindCoordinator names for a transactional id.
func txnCoordinator(c *cluster, id string) (*node, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, b := range c.brokers {
			if !b.running() {
				continue
			}
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.CoordinatorType = 1
			req.CoordinatorKey = id
			req.CoordinatorKeys = []string{id}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			resp, err := req.RequestWith(ctx, b.probe)
			cancel()
			if err != nil {
				continue
			}
			node, code := resp.NodeID, resp.ErrorCode
			if len(resp.Coordinators) > 0 {
				node, code = resp.Coordinators[0].NodeID, resp.Coordinators[0].ErrorCode
			}
			if code == 0 {
				if n := c.byID(node); n != nil && n.running() {
					return n, nil
				}
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no transaction coordinator for %q after 30s", id)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitPipelineCaughtUp waits until the pipeline's group has committed, on every input
// partition, the partition's end offset.
func waitPipelineCaughtUp(c *cluster, in string, timeout time.Duration) (bool, string) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.DialTimeout(3*time.Second))
	if err != nil {
		return false, err.Error()
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(timeout)
	why := ""
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ends, err1 := adm.ListEndOffsets(ctx, in)
		offs, err2 := adm.FetchOffsets(ctx, txnPipelineGroup)
		cancel()
		if err := errors.Join(err1, err2); err != nil {
			why = err.Error()
			time.Sleep(time.Second)
			continue
		}
		behind := []string{}
		ends.Each(func(o kadm.ListedOffset) {
			got, ok := offs.Lookup(in, o.Partition)
			switch {
			case o.Err != nil:
				behind = append(behind, fmt.Sprintf("p%d end unknown: %v", o.Partition, o.Err))
			case !ok && o.Offset > 0:
				behind = append(behind, fmt.Sprintf("p%d nothing committed, end %d", o.Partition, o.Offset))
			case !ok:
			case got.Err != nil:
				behind = append(behind, fmt.Sprintf("p%d committed unknown: %v", o.Partition, got.Err))
			case got.At < o.Offset:
				behind = append(behind, fmt.Sprintf("p%d %d/%d", o.Partition, got.At, o.Offset))
			}
		})
		if len(behind) == 0 {
			return true, ""
		}
		why = "committed behind the end: " + strings.Join(behind, ", ")
		time.Sleep(time.Second)
	}
	return false, why
}

// txnRecord is one output record: its value and the transaction that wrote it.
type txnRecord struct {
	value string
	txn   string
	count int // the records the transaction wrote, from its header
}

// readValues reads a topic from the start until every partition has been quiet for a
// while at its end.
func readValues(c *cluster, topic string, committed bool) ([]txnRecord, error) {
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(iso),
		kgo.FetchMaxWait(500*time.Millisecond), kgo.DialTimeout(3*time.Second))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var out []txnRecord
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	quietSince := time.Now()
	for time.Since(quietSince) < 5*time.Second {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollFetches(pctx)
		pcancel()
		if ctx.Err() != nil {
			return out, fmt.Errorf("read %s: %w", topic, ctx.Err())
		}
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			n++
			tr := txnRecord{value: string(r.Value)}
			for _, h := range r.Headers {
				switch h.Key {
				case "txn":
					tr.txn = string(h.Value)
				case "n":
					tr.count, _ = strconv.Atoi(string(h.Value))
				}
			}
			out = append(out, tr)
		})
		if n > 0 {
			quietSince = time.Now()
		}
	}
	return out, nil
}

type txnVerdict struct {
	lost, dup, abortedSeen, partial, phantom int
	examples                                 []string
}

// checkTxnOutput compares the committed output with the input: each input value exactly
// once, nothing else, no record of an aborted transaction, and each transaction whole.
func checkTxnOutput(input, output []txnRecord, committed, aborted map[string]bool) txnVerdict {
	var v txnVerdict
	example := func(format string, args ...any) {
		if len(v.examples) < 10 {
			v.examples = append(v.examples, fmt.Sprintf(format, args...))
		}
	}
	want := map[string]bool{}
	for _, r := range input {
		want[r.value] = true
	}
	seen := map[string]int{}
	perTxn := map[string]int{}
	declared := map[string]int{}
	for _, r := range output {
		seen[r.value]++
		perTxn[r.txn]++
		declared[r.txn] = r.count
		if !want[r.value] {
			v.phantom++
			example("output value %q (txn %s) is not in the input", r.value, r.txn)
		}
		if aborted[r.txn] {
			v.abortedSeen++
			example("value %q of aborted transaction %s is visible read_committed", r.value, r.txn)
		}
	}
	for val := range want {
		switch n := seen[val]; {
		case n == 0:
			v.lost++
			example("input value %s is not in the output", val)
		case n > 1:
			v.dup++
			example("input value %s is in the output %d times", val, n)
		}
	}
	for txn, n := range perTxn {
		if n != declared[txn] {
			v.partial++
			example("transaction %s shows %d of its %d records", txn, n, declared[txn])
		}
	}
	for txn := range committed {
		if perTxn[txn] == 0 {
			v.partial++
			example("transaction %s committed but none of its records is visible", txn)
		}
	}
	return v
}

// TestTxnPipelineWorker is the franz-go pipeline process that TestChaosTransactions
// starts; it does nothing in a normal test run.
func TestTxnPipelineWorker(t *testing.T) {
	if os.Getenv("SHALE_TXN_WORKER") == "" {
		t.Skip("a subprocess of TestChaosTransactions")
	}
	in, out, instance := os.Getenv("SHALE_TXN_IN"), os.Getenv("SHALE_TXN_OUT"), os.Getenv("SHALE_TXN_INSTANCE")
	sess, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(strings.Split(os.Getenv("SHALE_TXN_SEEDS"), ",")...),
		kgo.TransactionalID(txnPipelineID),
		kgo.TransactionTimeout(10*time.Second),
		kgo.ConsumerGroup(txnPipelineGroup),
		kgo.ConsumeTopics(in),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
		kgo.SessionTimeout(6*time.Second),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DialTimeout(3*time.Second),
		kgo.MetadataMinAge(500*time.Millisecond),
	)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	defer sess.Close()
	for n := 1; ctx.Err() == nil; {
		fs := sess.PollRecords(ctx, 20)
		if fs.IsClientClosed() || ctx.Err() != nil {
			break
		}
		fs.EachError(func(topic string, p int32, err error) { fmt.Printf("fetch error %s p%d: %v\n", topic, p, err) })
		recs := fs.Records()
		if len(recs) == 0 {
			continue
		}
		txn := fmt.Sprintf("%s-%d", instance, n)
		n++
		if err := sess.Begin(); err != nil {
			fmt.Printf("begin %s: %v\n", txn, err)
			os.Exit(3)
		}
		for _, r := range recs {
			sess.Produce(context.Background(), &kgo.Record{
				Topic: out, Partition: r.Partition, Key: r.Key, Value: r.Value,
				Headers: []kgo.RecordHeader{{Key: "txn", Value: []byte(txn)}, {Key: "n", Value: []byte(strconv.Itoa(len(recs)))}},
			}, func(_ *kgo.Record, err error) {
				if err != nil {
					fmt.Printf("produce in %s: %v\n", txn, err)
				}
			})
		}
		time.Sleep(txnPause)
		endCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		committed, err := sess.End(endCtx, kgo.TryCommit)
		cancel()
		switch {
		case err != nil:
			// The outcome is unknown to this process: neither line, so the checker holds
			// the transaction to exactly-once alone. franz-go's End errors are not
			// retryable: the process ends, and the harness starts another, as a
			// supervisor would.
			fmt.Printf("end %s: %v\n", txn, err)
			os.Exit(3)
		case committed:
			fmt.Printf("commit %s\n", txn)
		default:
			fmt.Printf("abort %s\n", txn)
		}
	}
}
