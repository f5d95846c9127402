package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/shalelog/shale/internal/testutil"
	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/server/console"
	"github.com/shalelog/shale/server/schemaregistry"
)

// chromium finds Debian's chromium (tests/deps.sh installs it).
func chromium(t *testing.T) string {
	t.Helper()
	p := findChromium()
	if p == "" {
		t.Skip("chromium is not installed (tests/deps.sh installs it)")
	}
	return p
}

func findChromium() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// screenshotDir is where the browser tests leave their screenshots:
// $SHALE_TEST_ARTIFACTS/console when set, else the test's temporary directory.
func screenshotDir(t *testing.T) string {
	dir := t.TempDir()
	if a := os.Getenv("SHALE_TEST_ARTIFACTS"); a != "" {
		dir = filepath.Join(a, "console")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// headless is a browser tab that records every console error, uncaught exception and
// browser log error (a CSP violation, a failed load) the pages cause.
type headless struct {
	t    *testing.T
	ctx  context.Context
	mu   sync.Mutex
	errs []string
	dir  string
}

func newHeadless(t *testing.T) *headless {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium(t)), chromedp.NoSandbox,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1280, 900))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelB := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelB(); cancelA() })
	h := &headless{t: t, ctx: ctx, dir: screenshotDir(t)}
	chromedp.ListenTarget(ctx, func(ev any) {
		var msg string
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.APITypeError || ev.Type == runtime.APITypeAssert {
				var args []string
				for _, a := range ev.Args {
					args = append(args, string(a.Value))
				}
				msg = "console." + string(ev.Type) + ": " + strings.Join(args, " ")
			}
		case *runtime.EventExceptionThrown:
			msg = "exception: " + ev.ExceptionDetails.Text
			if ev.ExceptionDetails.Exception != nil {
				msg += " " + ev.ExceptionDetails.Exception.Description
			}
		case *cdplog.EventEntryAdded:
			if ev.Entry.Level == cdplog.LevelError {
				msg = "log: " + ev.Entry.Text + " " + ev.Entry.URL
			}
		}
		if msg != "" {
			h.mu.Lock()
			h.errs = append(h.errs, msg)
			h.mu.Unlock()
		}
	})
	if err := chromedp.Run(ctx, cdplog.Enable(), runtime.Enable()); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return h
}

func (h *headless) run(actions ...chromedp.Action) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(h.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Run(ctx, actions...); err != nil {
		h.t.Fatal(err)
	}
}

// visit loads url, waits for its heading, screenshots it as name.png and fails on any
// error the page caused.
func (h *headless) visit(url, name string) {
	h.t.Helper()
	var shot []byte
	h.run(chromedp.Navigate(url), chromedp.WaitVisible("main h1", chromedp.ByQuery), chromedp.FullScreenshot(&shot, 100) /* 100: PNG */)
	if err := os.WriteFile(filepath.Join(h.dir, name+".png"), shot, 0o644); err != nil {
		h.t.Fatal(err)
	}
	h.checkErrors(url)
}

func (h *headless) checkErrors(where string) {
	h.t.Helper()
	time.Sleep(100 * time.Millisecond) // late console events
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.errs) > 0 {
		h.t.Errorf("%s: the page caused errors:\n%s", where, strings.Join(h.errs, "\n"))
		h.errs = nil
	}
}

// plotLine reads a plot line's last and largest values.
func (h *headless) plotLine(series string) (last, most float64, ok bool) {
	h.t.Helper()
	var attrs map[string]string
	var nodes []*cdp.Node
	h.run(chromedp.Nodes(fmt.Sprintf(`polyline[data-series=%q]`, series), &nodes, chromedp.ByQueryAll, chromedp.AtLeast(0)))
	if len(nodes) == 0 {
		return 0, 0, false
	}
	h.run(chromedp.Attributes(fmt.Sprintf(`polyline[data-series=%q]`, series), &attrs, chromedp.ByQuery))
	last, _ = strconv.ParseFloat(attrs["data-last"], 64)
	most, _ = strconv.ParseFloat(attrs["data-max"], 64)
	return last, most, true
}

// startTestConsole serves a console of the node at addr with a fast sampler, as the
// node's own (10 s) would make the test wait minutes for a plot.
func startTestConsole(t *testing.T, addr string, interval time.Duration) string {
	t.Helper()
	c, err := console.New(console.Options{Kafka: console.Kafka{Addr: addr}, SampleInterval: interval, Window: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go c.Run(ctx)
	srv := httptest.NewServer(c)
	t.Cleanup(func() { srv.Close(); cancel(); c.Close() })
	return srv.URL
}

// In Debian's chromium, against three nodes with a producer running throughout: every
// page loads without an error, the messages browsed are the ones produced, a test record
// produced through the form shows up, a change without its CSRF token is refused, Avro
// values in the wire format show decoded, a group's lag plot rises while its consumer is
// stopped and falls once it is back, and a broker stopped abruptly shows as fenced, its
// partitions as under-replicated, within seconds (tests/cluster's TestConsoleBrokerKilled
// does the same to a process killed with SIGKILL). Screenshots of each page go to the
// artifacts directory.
func TestConsoleInBrowser(t *testing.T) {
	h := newHeadless(t)
	registry := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	c := startConsoleCluster(t, func(i int) []string {
		if i == 0 {
			return []string{"--schema.registry.listener=" + registry}
		}
		return nil
	})
	n := &consoleNode{kafka: c.kafka[0], http: c.http[0], logs: c.logs} // the controller, with the schema registry
	ctx := ctxFor(t, 3*time.Minute)
	fillReplicated(t, ctx, c.kafka[1], "orders", 2, 3, 20, "billing")
	produceAvro(t, ctx, n.kafka, registry, "payments", 5)
	// The test's console reads the cluster through node 2, sampling fast.
	base := startTestConsole(t, c.kafka[1], 250*time.Millisecond)

	// The node's own console, on http.listener, shows the three brokers live.
	h.visit("http://"+n.http+"/", "overview-node")
	var live []string
	h.run(chromedp.Evaluate(`Array.from(document.querySelectorAll("#brokers tr[data-broker]")).filter(r => !r.querySelector(".badge")).map(r => r.dataset.broker)`, &live))
	if strings.Join(live, ",") != "1,2,3" {
		t.Fatalf("the overview shows brokers %v live, want 1,2,3", live)
	}

	// A consumer keeps up with a steady producer, then stops, then comes back.
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.kafka...), kgo.DefaultProduceTopic("stream"),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner())) // to every partition, so to every broker
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 3, 3, nil, "stream"); err != nil {
		t.Fatal(err)
	}
	var produced atomic.Int64
	pctx, stopProducing := context.WithCancel(ctx)
	defer stopProducing()
	go func() {
		for pctx.Err() == nil {
			if cl.ProduceSync(pctx, &kgo.Record{Value: []byte("tick")}).FirstErr() == nil {
				produced.Add(1)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	consume := func() (stop func()) {
		gc, err := kgo.NewClient(kgo.SeedBrokers(c.kafka...), kgo.ConsumerGroup("live"), kgo.ConsumeTopics("stream"),
			kgo.AutoCommitInterval(100*time.Millisecond), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			t.Fatal(err)
		}
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for cctx.Err() == nil {
				gc.PollFetches(cctx)
			}
		}()
		return func() { cancel(); <-done; gc.Close() }
	}
	stop := consume()
	waitUntil(t, 60*time.Second, "the consumer group to catch up", func() bool {
		h.visit(base+"/group?id=live", "group-live")
		last, _, ok := h.plotLine("total")
		return ok && last < 100 && produced.Load() > 100
	})
	stop()
	var peak float64
	waitUntil(t, 60*time.Second, "the lag plot to rise while the consumer is stopped", func() bool {
		time.Sleep(500 * time.Millisecond)
		h.visit(base+"/group?id=live", "group-lag-rising")
		last, _, _ := h.plotLine("total")
		peak = last
		return last > 300
	})
	stop = consume()
	defer stop()
	waitUntil(t, 60*time.Second, "the lag plot to fall once the consumer is back", func() bool {
		time.Sleep(500 * time.Millisecond)
		h.visit(base+"/group?id=live", "group-lag-falling")
		last, most, _ := h.plotLine("total")
		return most >= peak && last < peak/4
	})

	// Every page, screenshotted.
	for _, p := range []struct{ path, name string }{
		{"/", "overview"}, {"/topics", "topics"}, {"/topic?name=orders", "topic"}, {"/groups", "groups"},
		{"/group?id=live", "group"}, {"/security", "security"},
	} {
		h.visit(base+p.path, p.name)
	}
	// The node's own console decodes through the node's schema registry.
	h.visit("http://"+n.http+"/messages?topic=payments&partition=0&offset=0", "messages")
	var decoded []string
	h.run(chromedp.Evaluate(`Array.from(document.querySelectorAll("#records .value-schema")).map(e => e.textContent)`, &decoded))
	if len(decoded) != 5 || !strings.Contains(decoded[0], "AVRO · payments-value") {
		t.Fatalf("the Avro values show as %q", decoded)
	}

	// The messages shown are those produced: partition 1 holds the odd records.
	var rows [][]string
	h.run(chromedp.Navigate(base+"/messages?topic=orders&partition=1&offset=0"), chromedp.WaitVisible("#records", chromedp.ByQuery),
		chromedp.Evaluate(`Array.from(document.querySelectorAll("#records tr[data-offset]")).map(r => [r.dataset.offset, r.querySelector("pre.key").textContent, r.querySelector("pre.value").textContent])`, &rows))
	if len(rows) != 10 {
		t.Fatalf("%d records shown, want 10: %v", len(rows), rows)
	}
	for i, r := range rows {
		want := 2*i + 1
		var v struct {
			N    int    `json:"n"`
			What string `json:"what"`
		}
		if err := json.Unmarshal([]byte(r[2]), &v); err != nil || r[0] != strconv.Itoa(i) || r[1] != fmt.Sprintf("key-%d", want) || v.N != want || v.What != fmt.Sprintf("record %d", want) {
			t.Fatalf("row %d shows %q, want offset %d, key-%d, record %d (%v)", i, r, i, want, want, err)
		}
	}

	// A test record through the form.
	h.run(chromedp.SetValue(`#produce textarea[name=value]`, `{"from":"the browser"}`, chromedp.ByQuery),
		chromedp.SetValue(`#produce input[name=key]`, "browser-key", chromedp.ByQuery),
		chromedp.Click(`#produce button`, chromedp.ByQuery), chromedp.WaitVisible("#produced", chromedp.ByQuery))
	var shown string
	h.run(chromedp.Text(`#records tr[data-offset="10"] pre.value`, &shown, chromedp.ByQuery))
	if !strings.Contains(shown, `"from": "the browser"`) {
		t.Fatalf("the produced record shows %q", shown)
	}
	h.checkErrors("produce")

	// A change without its CSRF token, sent from the page itself, is refused.
	var status int
	h.run(chromedp.Evaluate(`fetch("/messages", {method: "POST", body: new URLSearchParams({topic: "orders", partition: "1", value: "forged"})}).then(r => r.status)`,
		&status, func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }))
	if status != 403 {
		t.Fatalf("a POST without a CSRF token: %d, want 403", status)
	}
	h.run(chromedp.Navigate(base+"/messages?topic=orders&partition=1&offset=0"), chromedp.WaitVisible("#records", chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelectorAll("#records tr[data-offset]").length`, &status))
	if status != 11 {
		t.Fatalf("%d records after the refused change, want 11", status)
	}
	h.mu.Lock()
	h.errs = nil // the refused fetch logs a 403, as it should
	h.mu.Unlock()

	// Broker 3 stopped abruptly while the producer runs: node 2's console shows it
	// fenced, and every partition with a replica on it (and another elsewhere) as
	// under-replicated, without 3 in its ISR.
	md, err := adm.Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	for _, td := range md.Topics {
		for _, pd := range td.Partitions {
			if len(pd.Replicas) > 1 && slices.Contains(pd.Replicas, 3) {
				want++
			}
		}
	}
	if want < 2+3 { // orders and stream at least
		t.Fatalf("only %d partitions have a replica on broker 3", want)
	}
	sentBefore := produced.Load()
	if err := c.stops[2](); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	var view struct {
		State string     `json:"state"`
		URP   [][]string `json:"urp"`
	}
	waitUntil(t, 30*time.Second, "broker 3 shown fenced and its partitions under-replicated", func() bool {
		h.run(chromedp.Navigate("http://"+c.http[1]+"/"), chromedp.WaitVisible("main h1", chromedp.ByQuery),
			chromedp.Evaluate(`({state: (document.querySelector('tr[data-broker="3"] .badge') || {}).textContent || "",
				urp: Array.from(document.querySelectorAll("#urp tbody tr")).map(r => Array.from(r.cells).map(c => c.textContent))})`, &view))
		return view.State == "fenced or down" && len(view.URP) == want
	})
	took := time.Since(stopped)
	h.visit("http://"+c.http[1]+"/", "overview-broker-stopped")
	for _, row := range view.URP { // topic, partition, leader, replicas, ISR
		if len(row) != 5 || !strings.Contains(row[3], "3") || strings.Contains(row[4], "3") || row[2] == "3" {
			t.Errorf("an under-replicated partition shows as %q", row)
		}
	}
	waitUntil(t, 30*time.Second, "the producer to carry on without broker 3", func() bool { return produced.Load() > sentBefore+50 })
	t.Logf("broker 3 shown fenced, %d partitions under-replicated, %s after it stopped; %d records produced in all; screenshots in %s",
		want, took.Round(100*time.Millisecond), produced.Load(), h.dir)
}

// produceAvro registers an Avro schema under topic-value and produces n records in
// Confluent's wire format to a new topic of one partition.
func produceAvro(t *testing.T, ctx context.Context, addr, registry, topic string, n int) {
	t.Helper()
	rc, err := sr.NewClient(sr.URLs("http://" + registry))
	if err != nil {
		t.Fatal(err)
	}
	text := `{"type":"record","name":"Payment","namespace":"shop","fields":[{"name":"id","type":"long"},` +
		`{"name":"customer","type":"string"},{"name":"cents","type":"long"},{"name":"note","type":["null","string"],"default":null}]}`
	var ss sr.SubjectSchema
	waitUntil(t, 20*time.Second, "the schema registered", func() bool {
		ss, err = rc.CreateSchema(ctx, topic+"-value", sr.Schema{Schema: text, Type: sr.TypeAvro})
		return err == nil
	})
	id := int32(ss.ID)
	reg := &metadata.SchemaRegistry{Schemas: map[int32]*metadata.RegistrySchema{id: {ID: id, Type: schemaregistry.TypeAvro, Schema: text}}}
	serde := schemaregistry.NewSerde()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		note := `null`
		if i%2 == 0 {
			note = fmt.Sprintf(`{"string": "invoice %d"}`, 1000+i)
		}
		v, err := serde.Encode(reg, id, fmt.Appendf(nil, `{"id": %d, "customer": "customer-%d", "cents": %d, "note": %s}`, i, i%3, 1999+i*250, note))
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "payment-%d", i), Value: v}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// In chromium, on three nodes that require SASL: the login form, then alice, on a
// broker's console, sees only the topic her ACLs let her describe, and a refusal is shown
// as Kafka's error.
func TestConsoleInBrowserLogin(t *testing.T) {
	h := newHeadless(t)
	n := startSecureNode(t, "--http.listener=", "--authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer", "--super.users=User:admin")
	httpAddr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	n.addBrokers(t, []string{"", httpAddr}, "--authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer", "--super.users=User:admin")
	ctx := ctxFor(t, 90*time.Second)
	n.addAlice(t, ctx, "visible")
	adm := kadm.NewClient(n.saslClient(t, scram512("admin", "admin-secret")))
	testutil.Eventually(t, 30*time.Second, "three brokers", func() bool {
		bs, err := adm.ListBrokers(ctx)
		return err == nil && len(bs) == 3
	})
	if _, err := adm.CreateTopic(ctx, 3, 3, nil, "hidden"); err != nil {
		t.Fatal(err)
	}
	acl := kadm.NewACLs().Allow("User:alice").Topics("visible").Operations(kadm.OpDescribe, kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral)
	if res, err := adm.CreateACLs(ctx, acl); err != nil || res[0].Err != nil {
		t.Fatalf("create ACL: %v %+v", err, res)
	}
	base := "http://" + httpAddr
	h.visit(base+"/topics", "login") // sent to the login page
	h.run(chromedp.SetValue(`input[name=user]`, "alice", chromedp.ByQuery),
		chromedp.SetValue(`input[name=password]`, "alice-secret", chromedp.ByQuery),
		chromedp.SetValue(`select[name=mechanism]`, "SCRAM-SHA-512", chromedp.ByQuery),
		chromedp.Click(`form.login button`, chromedp.ByQuery), chromedp.WaitVisible("#topics", chromedp.ByQuery))
	var topics []string
	h.run(chromedp.Evaluate(`Array.from(document.querySelectorAll("#topics tr[data-topic]")).map(r => r.dataset.topic)`, &topics))
	if len(topics) != 1 || topics[0] != "visible" {
		t.Fatalf("alice sees topics %v, want only visible", topics)
	}
	var alert string
	h.run(chromedp.Text(`p.error`, &alert, chromedp.ByQuery))
	if !strings.Contains(alert, "TOPIC_AUTHORIZATION_FAILED") {
		t.Fatalf("the refusal shown is %q", alert)
	}
	h.visit(base+"/topics", "topics-as-alice")
	h.visit(base+"/security", "security-as-alice")
}

// addBrokers starts broker-only nodes 2, 3, ... beside n (node 1, the controller), one
// per entry of httpAddrs (its http.listener, "" for none), with n's certificate,
// truststore and users and a SASL_SSL listener each, and returns their addresses.
func (n *secureNode) addBrokers(t *testing.T, httpAddrs []string, extra ...string) []string {
	t.Helper()
	var addrs []string
	for i, h := range httpAddrs {
		addr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
		addrs = append(addrs, addr)
		runNode(t, n.logs, append([]string{
			fmt.Sprintf("--node.id=%d", i+2), "--process.roles=broker", "--controller.quorum.voters=1@" + n.ctl,
			"--log.dirs=" + filepath.Join(n.dir, fmt.Sprintf("data-%d", i+2)), "--schema.registry.listener=", "--rest.proxy.listener=", "--http.listener=" + h,
			"--listeners=SECURE://" + addr, "--listener.security.protocol.map=SECURE:SASL_SSL,CONTROLLER:PLAINTEXT",
			"--inter.broker.listener.name=SECURE",
			"--ssl.keystore.location=" + filepath.Join(n.dir, "broker.pem"), "--ssl.truststore.location=" + filepath.Join(n.dir, "ca.pem"),
			"--sasl.enabled.mechanisms=SCRAM-SHA-512,SCRAM-SHA-256,PLAIN", "--sasl.plain.users.file=" + filepath.Join(n.dir, "plain-users"),
			"--sasl.inter.broker.username=admin", "--sasl.inter.broker.password=admin-secret",
			"--group.initial.rebalance.delay.ms=0",
		}, extra...)...)
	}
	return addrs
}
