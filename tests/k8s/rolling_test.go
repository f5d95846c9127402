package k8s

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/shalelog/shale/tests/netns"
)

// TestRollingRestart renders the chart with 3 brokers and runs each pod's container as a
// real `shale` process with exactly the rendered command, args, environment, files and
// user (see pod), in network namespaces whose /etc/hosts resolves the headless Service's
// per-pod names. With an RF=3 topic taking acks=all writes, it restarts the pods as the
// StatefulSet controller does on an update: highest ordinal first, SIGTERM with the
// rendered grace period, and the next pod only once the restarted one passes the rendered
// readiness probe. Nothing acknowledged may be lost, no write may fail, and the probe must
// not pass before the restarted broker is back in every ISR.
func TestRollingRestart(t *testing.T) {
	out, err := render(t, map[string]any{"replicas": 3}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ss *appsv1.StatefulSet
	var headless string
	configs := map[string]*corev1.ConfigMap{}
	for _, m := range decodeAll(t, out) {
		switch o := m.obj.(type) {
		case *appsv1.StatefulSet:
			ss = o
		case *corev1.ConfigMap:
			configs[o.Name] = o
		case *corev1.Service:
			if o.Spec.ClusterIP == corev1.ClusterIPNone {
				headless = o.Name
			}
		}
	}
	if ss == nil || headless != ss.Spec.ServiceName {
		t.Fatalf("rendered StatefulSet %v with headless Service %q", ss, headless)
	}
	replicas := int(*ss.Spec.Replicas)

	nw := netns.New(t, replicas)
	// The names cluster DNS would give the pods: <pod>.<service>.<namespace>.svc.<domain>
	// and its shorter forms.
	names := map[string]string{}
	for i, nn := range nw.Nodes {
		pod := fmt.Sprintf("%s-%d", ss.Name, i)
		for _, n := range []string{pod + "." + headless, pod + "." + headless + "." + namespace,
			pod + "." + headless + "." + namespace + ".svc", pod + "." + headless + "." + namespace + ".svc.cluster.local"} {
			names[n] = nn.IP
		}
	}
	if err := nw.SetHosts(names); err != nil {
		t.Fatal(err)
	}
	var pods []*pod
	for i, nn := range nw.Nodes {
		hosts := "127.0.0.1\tlocalhost\n"
		for _, n := range slices.Sorted(maps.Keys(names)) {
			hosts += names[n] + "\t" + n + "\n"
		}
		hosts += nn.IP + "\t" + fmt.Sprintf("%s-%d", ss.Name, i) + "\n"
		p := newPod(t, ss, configs, i, nn, hosts)
		pods = append(pods, p)
	}
	t.Cleanup(func() {
		for _, p := range pods {
			p.kill()
		}
		if t.Failed() {
			for _, p := range pods {
				t.Logf("%s log tail:\n%s", p.name, p.logTail(40))
			}
		}
	})

	// podManagementPolicy: Parallel: every pod starts at once.
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	for _, p := range pods {
		p.start()
	}
	for _, p := range pods {
		if err := p.waitReady(ctx); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d pods ready: %s", replicas, strings.Join(pods[0].argv, " "))

	// The client in the root namespace resolves the advertised names the same way.
	dialer := func(ctx context.Context, network, host string) (net.Conn, error) {
		h, port, err := net.SplitHostPort(host)
		if err != nil {
			return nil, err
		}
		if ip, ok := names[h]; ok {
			host = net.JoinHostPort(ip, port)
		}
		var d net.Dialer
		return d.DialContext(ctx, network, host)
	}
	seed := net.JoinHostPort(fmt.Sprintf("%s-0.%s", ss.Name, headless), "9092")
	adminCl, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.Dialer(dialer),
		kgo.WithLogger(kgo.BasicLogger(testLogWriter{t}, kgo.LogLevelWarn, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer adminCl.Close()
	adm := kadm.NewClient(adminCl)
	const topic = "rolling"
	const partitions = 3
	// The chart's default topic settings: RF 3, min.insync.replicas 2.
	if _, err := adm.CreateTopic(ctx, partitions, -1, nil, topic); err != nil {
		t.Fatal(err)
	}
	waitFullISR := func() {
		t.Helper()
		for {
			td, err := adm.ListTopics(ctx, topic)
			if err == nil && td[topic].Err == nil && len(td[topic].Partitions) == partitions {
				full := true
				for _, p := range td[topic].Partitions {
					full = full && len(p.Replicas) == replicas && len(p.ISR) == replicas && p.Leader >= 0
				}
				if full {
					return
				}
			}
			if ctx.Err() != nil {
				t.Fatalf("topic never had full ISRs: %v", ctx.Err())
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	waitFullISR()

	// An idempotent acks=all producer writes numbered records until told to stop.
	prod, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.Dialer(dialer), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordDeliveryTimeout(60*time.Second), kgo.MaxBufferedRecords(2000))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	var (
		mu       sync.Mutex
		acked    = map[string]bool{}
		failures []error
		lastAck  = time.Now()
		maxGap   time.Duration
	)
	stopProduce := make(chan struct{})
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		for n := 0; ; n++ {
			select {
			case <-stopProduce:
				prod.Flush(context.Background())
				return
			default:
			}
			v := strconv.Itoa(n)
			prod.Produce(ctx, &kgo.Record{Key: []byte(v), Value: []byte(v)}, func(r *kgo.Record, err error) {
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failures = append(failures, fmt.Errorf("record %s: %w", r.Value, err))
					return
				}
				acked[string(r.Value)] = true
				if gap := time.Since(lastAck); gap > maxGap {
					maxGap = gap
				}
				lastAck = time.Now()
			})
			time.Sleep(2 * time.Millisecond)
		}
	}()
	ackedNow := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}
	time.Sleep(3 * time.Second)

	// The StatefulSet controller's rolling update: highest ordinal first.
	for i := replicas - 1; i >= 0; i-- {
		p := pods[i]
		for _, other := range pods {
			if ok, why := other.ready(ctx); !ok {
				t.Fatalf("before restarting %s: %s is not ready (%s)", p.name, other.name, why)
			}
		}
		before := ackedNow()
		took, killed := p.stop()
		if killed {
			t.Errorf("%s did not stop within terminationGracePeriodSeconds (%v)", p.name, p.grace)
		}
		t.Logf("%s stopped in %v (controlled shutdown); %d records acknowledged so far", p.name, took.Round(time.Millisecond), before)
		p.start()
		restarted := time.Now()
		if err := p.waitReady(ctx); err != nil {
			t.Fatal(err)
		}
		// Ready must mean back in every ISR: check against the cluster's own metadata.
		node := int32(i)
		// A client may see its old connection to the restarted pod end (EOF) on the
		// first request after the restart, as with Kafka; that is the client's to
		// retry, not a readiness failure, so only a lasting error fails the test.
		td, err := listTopicsRetrying(ctx, t, adm, topic)
		if err != nil {
			t.Fatal(err)
		}
		for _, part := range td[topic].Partitions {
			if !slices.Contains(part.ISR, node) {
				t.Errorf("%s passed its readiness probe outside the ISR of %s-%d (ISR %v)", p.name, topic, part.Partition, part.ISR)
			}
		}
		t.Logf("%s ready %v after its restart", p.name, time.Since(restarted).Round(time.Millisecond))
	}
	time.Sleep(2 * time.Second)
	close(stopProduce)
	<-produced

	mu.Lock()
	n, fails, gap := len(acked), failures, maxGap
	mu.Unlock()
	for i, err := range fails {
		if i < 10 {
			t.Errorf("acks=all write failed during the rolling restart: %v", err)
		}
	}
	if n == 0 {
		t.Fatal("nothing was acknowledged")
	}
	t.Logf("%d records acknowledged; longest wait between two acknowledgements %v", n, gap.Round(time.Millisecond))

	// Every acknowledged record is in the log, read from every partition's start.
	waitFullISR()
	cons, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.Dialer(dialer), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadUncommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	seen := map[string]int{}
	var read int64
	for read < total {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records: %v", read, total, ctx.Err())
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			seen[string(r.Value)]++
			read++
		})
	}
	lost := 0
	for v := range acked {
		if seen[v] == 0 {
			lost++
			if lost <= 10 {
				t.Errorf("acknowledged record %s is not in the log", v)
			}
		}
	}
	for v, c := range seen {
		if c > 1 {
			t.Errorf("record %s is in the log %d times (the producer is idempotent)", v, c)
		}
	}
	t.Logf("read back %d records: %d acknowledged, %d lost", read, n, lost)
}

// listTopicsRetrying lists topic, retrying transport errors for up to 15 seconds and
// logging each one so that a broker closing fresh connections would still show.
func listTopicsRetrying(ctx context.Context, t *testing.T, adm *kadm.Client, topic string) (kadm.TopicDetails, error) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		td, err := adm.ListTopics(ctx, topic)
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return td, err
		}
		t.Logf("listing %s: %v (retrying)", topic, err)
		time.Sleep(250 * time.Millisecond)
	}
}

// testLogWriter sends a client's log lines to the test log, so that the client's own
// account of a connection failure is beside the test's.
type testLogWriter struct{ t *testing.T }

func (w testLogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
