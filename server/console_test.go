package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/shalelog/shale/internal/testutil"
	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/server/schemaregistry"
)

// consoleNode is one combined node with its console on a free port.
type consoleNode struct {
	kafka, http string
	logs        *testutil.Buffer
}

func startConsoleNode(t *testing.T, extra ...string) *consoleNode {
	t.Helper()
	n := &consoleNode{
		kafka: fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t)),
		http:  fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t)),
		logs:  &testutil.Buffer{},
	}
	ctl := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	runNode(t, n.logs, append([]string{"--log.dirs=" + filepath.Join(t.TempDir(), "data"), "--schema.registry.listener=",
		"--rest.proxy.listener=", "--http.listener=" + n.http, "--listeners=PLAINTEXT://" + n.kafka + ",CONTROLLER://" + ctl,
		"--group.initial.rebalance.delay.ms=0"}, extra...)...)
	waitBroker(t, n.kafka)
	return n
}

// browser is an HTTP client with cookies that does not follow redirects.
type browser struct {
	t    *testing.T
	base string
	c    *http.Client
}

func newBrowser(t *testing.T, base string) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, base: base, c: &http.Client{Jar: jar, Timeout: 20 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (b *browser) get(path string) (int, string) {
	b.t.Helper()
	resp, err := b.c.Get(b.base + path)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func (b *browser) post(path string, form url.Values) (int, string, string) {
	b.t.Helper()
	resp, err := b.c.PostForm(b.base+path, form)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Location"), string(body)
}

var csrfRE = regexp.MustCompile(`name="csrf-token" content="([^"]+)"`)

func csrfOf(t *testing.T, body string) string {
	t.Helper()
	m := csrfRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no CSRF token on the page:\n%s", body)
	}
	return m[1]
}

// fill creates topic with partitions, produces n JSON records with a header round-robin
// over them, and has group commit partition 0 at offset 4 (records 0-3 consumed).
func fill(t *testing.T, ctx context.Context, addr, topic string, partitions int32, n int, group string) {
	t.Helper()
	fillReplicated(t, ctx, addr, topic, partitions, 1, n, group)
}

// fillReplicated is fill with the topic's replication factor.
func fillReplicated(t *testing.T, ctx context.Context, addr, topic string, partitions int32, replicas int16, n int, group string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, partitions, replicas, nil, topic); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		rec := &kgo.Record{Topic: topic, Partition: int32(i) % partitions, Key: fmt.Appendf(nil, "key-%d", i),
			Value: fmt.Appendf(nil, `{"n":%d,"what":"record %d"}`, i, i), Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte("h" + fmt.Sprint(i))}}}
		if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if group != "" {
		if err := adm.CommitAllOffsets(ctx, group, kadm.OffsetsFromRecords(kgo.Record{Topic: topic, Partition: 0, Offset: 3})); err != nil {
			t.Fatal(err)
		}
	}
}

// Every page renders what the cluster holds, read through the Kafka APIs.
func TestConsolePages(t *testing.T) {
	n := startConsoleNode(t)
	ctx := ctxFor(t, 60*time.Second)
	fill(t, ctx, n.kafka, "orders", 2, 20, "billing")
	b := newBrowser(t, "http://"+n.http)

	code, body := b.get("/")
	for _, want := range []string{`data-broker="1"`, "live", `id="quorum"`, "(leader)", "Under-replicated partitions (0)", `<svg class="plot"`} {
		if code != 200 || !strings.Contains(body, want) {
			t.Fatalf("overview: %d, no %q:\n%s", code, want, body)
		}
	}
	code, body = b.get("/topics")
	if code != 200 || !strings.Contains(body, `data-topic="orders"`) || !strings.Contains(body, "168h0m0s") ||
		!regexp.MustCompile(`data-topic="orders">.*\n.*\n<td>\d+(\.\d)? [KM]?i?B</td>`).MatchString(body) {
		t.Fatalf("topics: %d\n%s", code, body)
	}
	code, body = b.get("/topic?name=orders")
	for _, want := range []string{`id="partitions"`, "<td>0</td><td>10</td>", "retention.ms", "cleanup.policy"} {
		if code != 200 || !strings.Contains(body, want) {
			t.Fatalf("topic page: %d, no %q:\n%s", code, want, body)
		}
	}
	// A share group (KIP-932) with one member reading orders.
	sc, err := kgo.NewClient(kgo.SeedBrokers(n.kafka), kgo.ShareGroup("workers"), kgo.ConsumeTopics("orders"), kgo.ClientID("worker"))
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	sctx, stopShare := context.WithCancel(ctx)
	defer stopShare()
	go func() {
		for sctx.Err() == nil {
			sc.PollFetches(sctx)
		}
	}()
	testutil.Eventually(t, 30*time.Second, "the share group on the groups page", func() bool {
		code, body = b.get("/groups")
		return code == 200 && strings.Contains(body, `data-group="billing"`) && strings.Contains(body, `data-group="workers"`) &&
			strings.Contains(body, "<td>share</td>")
	})
	testutil.Eventually(t, 30*time.Second, "the share group's page with its member", func() bool {
		code, body = b.get("/group?id=workers")
		return code == 200 && strings.Contains(body, "share group") && strings.Contains(body, "<td>worker</td>") &&
			strings.Contains(body, "orders [0 1]") && strings.Contains(body, "Share start offset")
	})
	// billing committed offset 4 of partition 0's 10 records: 6 behind there, and all 10
	// of partition 1's, where it committed nothing (counted from the log start, as kadm
	// and kafka-consumer-groups.sh do for a subscribed topic).
	code, body = b.get("/group?id=billing")
	if code != 200 || !strings.Contains(body, `id="total-lag">16<`) || !strings.Contains(body, "<td>1</td><td>none</td><td>10</td>") {
		t.Fatalf("group page: %d\n%s", code, body)
	}
	code, body = b.get("/messages?topic=orders&partition=1&offset=2&limit=3")
	if code != 200 {
		t.Fatalf("messages: %d\n%s", code, body)
	}
	for i, off := range []int{2, 3, 4} {
		n := 2*off + 1 // partition 1 holds the odd records
		for _, want := range []string{fmt.Sprintf(`data-offset="%d"`, off), fmt.Sprintf("key-%d", n), fmt.Sprintf("&#34;what&#34;: &#34;record %d&#34;", n), fmt.Sprintf("<b>trace</b>: h%d", n)} {
			if !strings.Contains(body, want) {
				t.Fatalf("record %d: no %q:\n%s", i, want, body)
			}
		}
	}
	if strings.Contains(body, `data-offset="5"`) || strings.Contains(body, `data-offset="1"`) {
		t.Fatalf("more records than asked for:\n%s", body)
	}
	// By timestamp: from the start of time, every record of the partition, in hex.
	code, body = b.get("/messages?topic=orders&partition=0&from=timestamp&timestamp=0&format=hex")
	if code != 200 || strings.Count(body, "data-offset=") != 10 || !strings.Contains(body, "6b 65 79 2d") { // "key-"
		t.Fatalf("messages by timestamp in hex: %d\n%s", code, body)
	}
	code, body = b.get("/messages?topic=orders&partition=0&offset=0&search=record+8")
	if code != 200 || strings.Count(body, "data-offset=") != 1 || !strings.Contains(body, `data-offset="4"`) {
		t.Fatalf("search: %d\n%s", code, body)
	}
	code, body = b.get("/security")
	if code != 200 || !strings.Contains(body, "SECURITY_DISABLED") || !strings.Contains(body, `id="users"`) {
		t.Fatalf("security: %d\n%s", code, body)
	}
	// A page about a topic that does not exist says so and creates nothing, though
	// auto.create.topics.enable is on.
	code, body = b.get("/topic?name=nosuch")
	if code != 200 || !strings.Contains(body, "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Fatalf("missing topic: %d\n%s", code, body)
	}
	b.get("/messages?topic=nosuch2&partition=0")
	if _, body = b.get("/topics"); strings.Contains(body, "nosuch") {
		t.Fatalf("a page view created a topic:\n%s", body)
	}
	if code, _ := b.get("/console/static/console.js"); code != 200 {
		t.Fatalf("static file: %d", code)
	}
}

// A change needs its session's CSRF token: without it nothing is produced.
func TestConsoleProduceNeedsCSRF(t *testing.T) {
	n := startConsoleNode(t)
	ctx := ctxFor(t, 60*time.Second)
	fill(t, ctx, n.kafka, "events", 1, 3, "")
	b := newBrowser(t, "http://"+n.http)
	_, page := b.get("/messages?topic=events&partition=0")
	token := csrfOf(t, page)
	form := url.Values{"topic": {"events"}, "partition": {"0"}, "key": {"k"}, "value": {"from the console"}, "headers": {"src=test"}}
	for _, bad := range []string{"", "forged"} {
		f := url.Values{}
		for k, v := range form {
			f[k] = v
		}
		if bad != "" {
			f.Set("csrf", bad)
		}
		if code, _, body := b.post("/messages", f); code != http.StatusForbidden || !strings.Contains(body, "CSRF") {
			t.Fatalf("token %q: %d\n%s", bad, code, body)
		}
	}
	// Another browser's token is not this one's.
	other := newBrowser(t, "http://"+n.http)
	form.Set("csrf", token)
	if code, _, _ := other.post("/messages", form); code != http.StatusForbidden {
		t.Fatalf("a token used from another session: %d", code)
	}
	_, page = b.get("/messages?topic=events&partition=0&offset=0")
	if strings.Count(page, "data-offset=") != 3 {
		t.Fatalf("a refused change produced:\n%s", page)
	}
	code, loc, body := b.post("/messages", form)
	if code != http.StatusSeeOther || !strings.Contains(loc, "produced=3") {
		t.Fatalf("produce with the token: %d %q\n%s", code, loc, body)
	}
	_, page = b.get(loc)
	if !strings.Contains(page, `data-offset="3"`) || !strings.Contains(page, "from the console") || !strings.Contains(page, "<b>src</b>: test") {
		t.Fatalf("the produced record is not shown:\n%s", page)
	}
	// Cookies: HttpOnly and SameSite=Strict.
	resp, err := http.Get("http://" + n.http + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	ck := resp.Header.Get("Set-Cookie")
	if !strings.Contains(ck, "HttpOnly") || !strings.Contains(ck, "SameSite=Strict") || strings.Contains(ck, "Secure") {
		t.Fatalf("session cookie over plain HTTP: %q", ck)
	}
}

// console.read.only refuses changes even with a valid token, and offers none.
func TestConsoleReadOnly(t *testing.T) {
	n := startConsoleNode(t, "--console.read.only=true")
	ctx := ctxFor(t, 60*time.Second)
	fill(t, ctx, n.kafka, "events", 1, 1, "")
	b := newBrowser(t, "http://"+n.http)
	_, page := b.get("/messages?topic=events&partition=0")
	if strings.Contains(page, `id="produce"`) || !strings.Contains(page, "read-only") {
		t.Fatalf("a read-only console offers to produce:\n%s", page)
	}
	token := csrfOf(t, page)
	code, _, body := b.post("/messages", url.Values{"csrf": {token}, "topic": {"events"}, "partition": {"0"}, "value": {"x"}})
	if code != http.StatusForbidden || !strings.Contains(body, "console.read.only") {
		t.Fatalf("produce on a read-only console: %d\n%s", code, body)
	}
	if _, page = b.get("/messages?topic=events&partition=0&offset=0"); strings.Count(page, "data-offset=") != 1 {
		t.Fatalf("a read-only console produced:\n%s", page)
	}
}

// console.enable=false leaves /metrics and the health checks alone.
func TestConsoleDisabled(t *testing.T) {
	n := startConsoleNode(t, "--console.enable=false")
	b := newBrowser(t, "http://"+n.http)
	if code, _ := b.get("/"); code != http.StatusNotFound {
		t.Fatalf("/ with the console off: %d", code)
	}
	if code, _ := b.get("/metrics"); code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
}

// On a SASL listener the console asks who is looking, dials Kafka as that user, and
// shows only what the user's ACLs let it describe; refusals are Kafka's errors.
func TestConsoleSASLLoginAppliesACLs(t *testing.T) {
	httpAddr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	n := startSecureNode(t, "--http.listener="+httpAddr,
		"--authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer", "--super.users=User:admin")
	ctx := ctxFor(t, 90*time.Second)
	n.addAlice(t, ctx, "visible")
	adm := kadm.NewClient(n.saslClient(t, scram512("admin", "admin-secret")))
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "hidden"); err != nil {
		t.Fatal(err)
	}
	acl := kadm.NewACLs().Allow("User:alice").Topics("visible").Operations(kadm.OpDescribe, kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral)
	if res, err := adm.CreateACLs(ctx, acl); err != nil || res[0].Err != nil {
		t.Fatalf("create ACL: %v %+v", err, res)
	}

	b := newBrowser(t, "http://"+httpAddr)
	code, _ := b.get("/topics")
	if code != http.StatusSeeOther {
		t.Fatalf("a page before logging in: %d", code)
	}
	_, login := b.get("/login?next=%2Ftopics")
	if !strings.Contains(login, "<option>SCRAM-SHA-512</option>") || !strings.Contains(login, "<option>PLAIN</option>") {
		t.Fatalf("login page:\n%s", login)
	}
	code, _, body := b.post("/login", url.Values{"user": {"alice"}, "password": {"wrong"}, "mechanism": {"SCRAM-SHA-512"}, "next": {"/topics"}})
	if code != http.StatusUnauthorized || !strings.Contains(body, "SASL_AUTHENTICATION_FAILED") {
		t.Fatalf("a wrong password: %d\n%s", code, body)
	}
	code, loc, _ := b.post("/login", url.Values{"user": {"alice"}, "password": {"alice-secret"}, "mechanism": {"SCRAM-SHA-512"}, "next": {"/topics"}})
	if code != http.StatusSeeOther || loc != "/topics" {
		t.Fatalf("login as alice: %d %q", code, loc)
	}
	_, body = b.get("/topics")
	if !strings.Contains(body, `data-topic="visible"`) || strings.Contains(body, `data-topic="hidden"`) || !strings.Contains(body, "<span>alice</span>") || !strings.Contains(body, "DescribeConfigs: TOPIC_AUTHORIZATION_FAILED") {
		t.Fatalf("alice's topics:\n%s", body)
	}
	_, body = b.get("/security")
	if !strings.Contains(body, "CLUSTER_AUTHORIZATION_FAILED") {
		t.Fatalf("alice's security page shows no refusal:\n%s", body)
	}
	_, page := b.get("/messages?topic=visible&partition=0")
	token := csrfOf(t, page)
	code, _, body = b.post("/messages", url.Values{"csrf": {token}, "topic": {"visible"}, "partition": {"0"}, "value": {"x"}})
	if code != http.StatusBadRequest || !strings.Contains(body, "TOPIC_AUTHORIZATION_FAILED") {
		t.Fatalf("alice produces without WRITE: %d\n%s", code, body)
	}

	// admin, a super user, sees everything.
	a := newBrowser(t, "http://"+httpAddr)
	if code, _, _ := a.post("/login", url.Values{"user": {"admin"}, "password": {"admin-secret"}, "mechanism": {"SCRAM-SHA-512"}}); code != http.StatusSeeOther {
		t.Fatalf("login as admin: %d", code)
	}
	if _, body = a.get("/topics"); !strings.Contains(body, `data-topic="hidden"`) {
		t.Fatalf("admin's topics:\n%s", body)
	}
	if _, body = a.get("/security"); !strings.Contains(body, "User:alice") || !strings.Contains(body, "SCRAM-SHA-512 (4096 iterations)") {
		t.Fatalf("admin's security page:\n%s", body)
	}

	// The history names topics and groups: on this cluster only other nodes may read it.
	if code, _ := b.get("/console/api/history"); code != http.StatusForbidden {
		t.Fatalf("the history without the peer token: %d", code)
	}

	// Logging out ends the session on the server: the old cookie no longer works.
	if code, loc, _ := b.post("/logout", url.Values{"csrf": {token}}); code != http.StatusSeeOther || loc != "/login" {
		t.Fatalf("logout: %d %q", code, loc)
	}
	if code, _ := b.get("/topics"); code != http.StatusSeeOther {
		t.Fatalf("a page after logging out: %d", code)
	}
}

// consoleCluster is three in-process nodes, each with its console on http.listener:
// node 1 the controller and a broker, nodes 2 and 3 brokers, all quick to notice a
// broker gone (a 3 s session, replicas out of the ISR after 2 s).
type consoleCluster struct {
	kafka, http []string
	stops       []func() error
	logs        *testutil.Buffer
}

// startConsoleCluster starts the three nodes, node i (from 0) with extra(i) appended to
// its flags when extra is not nil, and waits until the controller lists all three.
func startConsoleCluster(t *testing.T, extra func(i int) []string) *consoleCluster {
	t.Helper()
	dir := t.TempDir()
	c := &consoleCluster{kafka: make([]string, 3), http: make([]string, 3), stops: make([]func() error, 3), logs: &testutil.Buffer{}}
	ctl := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	fast := []string{"--schema.registry.listener=", "--rest.proxy.listener=", "--group.initial.rebalance.delay.ms=0",
		"--broker.heartbeat.interval.ms=500", "--broker.session.timeout.ms=3000", "--replica.lag.time.max.ms=2000"}
	for i := range 3 {
		c.kafka[i] = fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
		c.http[i] = fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
		args := append([]string{fmt.Sprintf("--node.id=%d", i+1), "--controller.quorum.voters=1@" + ctl,
			"--log.dirs=" + filepath.Join(dir, fmt.Sprint(i+1)), "--http.listener=" + c.http[i]}, fast...)
		if i == 0 {
			args = append(args, "--listeners=PLAINTEXT://"+c.kafka[i]+",CONTROLLER://"+ctl)
		} else {
			args = append(args, "--process.roles=broker", "--listeners=PLAINTEXT://"+c.kafka[i])
		}
		if extra != nil {
			args = append(args, extra(i)...)
		}
		c.stops[i] = runNode(t, c.logs, args...)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.kafka[0]))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	testutil.Eventually(t, 30*time.Second, "three brokers", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		bs, err := adm.ListBrokers(ctx)
		return err == nil && len(bs) == 3
	})
	return c
}

// Three nodes: any node's console shows the whole cluster and merges the other nodes'
// histories (found through their DescribeConfigs answers); a broker stopped shows as
// fenced or down within seconds, and its partitions as under-replicated.
func TestConsoleThreeNodes(t *testing.T) {
	c := startConsoleCluster(t, nil)
	kafka, httpAddr, stops := c.kafka, c.http, c.stops
	cl, err := kgo.NewClient(kgo.SeedBrokers(kafka[0]))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx := ctxFor(t, 2*time.Minute)
	if _, err := adm.CreateTopic(ctx, 6, 3, nil, "spread"); err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, "http://"+httpAddr[1])
	testutil.Eventually(t, 30*time.Second, "node 2's overview with every broker and both peers", func() bool {
		_, body := b.get("/")
		return strings.Contains(body, `data-broker="1"`) && strings.Contains(body, `data-broker="3"`) &&
			strings.Contains(body, "Merged with the history of 2 of 2 other nodes") && strings.Contains(body, "Under-replicated partitions (0)")
	})
	if err := stops[2](); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var body string
	testutil.Eventually(t, 30*time.Second, "broker 3 shown fenced and its partitions under-replicated", func() bool {
		_, body = b.get("/")
		return regexp.MustCompile(`data-broker="3">\s*<td>3</td><td></td><td></td>\s*<td><span class="badge bad">fenced or down`).MatchString(body) &&
			strings.Contains(body, "Under-replicated partitions (6)")
	})
	t.Logf("broker 3 shown fenced, 6 partitions under-replicated, %s after it stopped", time.Since(start).Round(100*time.Millisecond))
	if findChromium() != "" {
		// The same in a browser, for the screenshot.
		h := newHeadless(t)
		h.visit("http://"+httpAddr[1]+"/", "overview-broker-down")
		var state string
		h.run(chromedp.Text(`tr[data-broker="3"] .badge`, &state, chromedp.ByQuery))
		if state != "fenced or down" {
			t.Errorf("broker 3 in the browser: %q", state)
		}
	}
	// Broker 3's console went with it: the history merged is node 1's (the peer list,
	// cached for 30 s, may still name node 3).
	if !regexp.MustCompile(`Merged with the history of 1 of [12] other nodes`).MatchString(body) {
		t.Errorf("the overview after broker 3 stopped does not merge the one other node left:\n%s", body)
	}
}

// Keys and values in Confluent's wire format show decoded through the built-in schema
// registry, with the schema's id, type and subject; other bytes show as before.
func TestConsoleDecodesRegisteredSchemas(t *testing.T) {
	registry := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	n := startConsoleNode(t, "--schema.registry.listener="+registry)
	ctx := ctxFor(t, 60*time.Second)
	rc, err := sr.NewClient(sr.URLs("http://" + registry))
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, "the registry answers", func() bool {
		_, err := rc.Subjects(ctx)
		return err == nil
	})
	avroText := `{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},{"name":"item","type":"string"}]}`
	protoText := "syntax = \"proto3\";\npackage shop;\nmessage Key { string region = 1; int64 customer = 2; }\n"
	av, err := rc.CreateSchema(ctx, "orders-value", sr.Schema{Schema: avroText, Type: sr.TypeAvro})
	if err != nil {
		t.Fatal(err)
	}
	pk, err := rc.CreateSchema(ctx, "orders-key", sr.Schema{Schema: protoText, Type: sr.TypeProtobuf})
	if err != nil {
		t.Fatal(err)
	}
	// Encoded as a serializer would, by the registry's own Serde over the same texts.
	reg := &metadata.SchemaRegistry{Schemas: map[int32]*metadata.RegistrySchema{
		int32(av.ID): {ID: int32(av.ID), Type: schemaregistry.TypeAvro, Schema: avroText},
		int32(pk.ID): {ID: int32(pk.ID), Type: schemaregistry.TypeProtobuf, Schema: protoText},
	}}
	serde := schemaregistry.NewSerde()
	value, err := serde.Encode(reg, int32(av.ID), json.RawMessage(`{"id": 42, "item": "anvil"}`))
	if err != nil {
		t.Fatal(err)
	}
	key, err := serde.Encode(reg, int32(pk.ID), json.RawMessage(`{"region": "emea", "customer": "7"}`))
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.kafka), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	// A schema id nothing is registered under, and plain text.
	unknown := append([]byte{0, 0, 0, 0x7f, 0x7f}, "opaque"...)
	for _, rec := range []*kgo.Record{
		{Topic: "orders", Key: key, Value: value},
		{Topic: "orders", Key: []byte("plain-key"), Value: []byte("just text")},
		{Topic: "orders", Value: unknown},
	} {
		if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	b := newBrowser(t, "http://"+n.http)
	var body string
	testutil.Eventually(t, 20*time.Second, "the decoded records", func() bool {
		var code int
		code, body = b.get("/messages?topic=orders&partition=0&offset=0")
		return code == 200 && strings.Contains(body, "&#34;item&#34;: &#34;anvil&#34;")
	})
	for _, want := range []string{
		fmt.Sprintf("schema %d · AVRO · orders-value", av.ID), "&#34;id&#34;: 42",
		fmt.Sprintf("schema %d · PROTOBUF · orders-key", pk.ID), "&#34;region&#34;: &#34;emea&#34;", "&#34;customer&#34;: &#34;7&#34;",
		`<pre class="key">plain-key</pre>`, `<pre class="value">just text</pre>`,
		// The unknown id's record in hex ("opaque"), and why.
		"7f 7f 6f 70 61  71 75 65", "not decoded by schema 32639: Schema 32639 not found",
	} {
		if !strings.Contains(body, want) {
			t.Fatalf("no %q on the messages page:\n%s", want, body)
		}
	}
	if strings.Count(body, `class="schema `) != 3 {
		t.Fatalf("records not in the wire format show a schema:\n%s", body)
	}
	// Asked for hex, the encoded bytes show as they are.
	if _, body = b.get("/messages?topic=orders&partition=0&offset=0&format=hex"); strings.Contains(body, `class="schema `) {
		t.Fatalf("hex shows a schema:\n%s", body)
	}
}
