package exporter_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shalelog/shale/internal/testutil"
	"github.com/shalelog/shale/server"
	"github.com/shalelog/shale/server/config"
)

// node is one in-process `shale serve` with both roles.
type node struct {
	id    int
	kafka string
	http  string
	dir   string
}

// startCluster runs n combined nodes in this process and waits until every one is ready.
func startCluster(t *testing.T, n int) []node {
	t.Helper()
	var nodes []node
	var voters []string
	ctlPorts := map[int]int{}
	for id := 1; id <= n; id++ {
		ctlPorts[id] = testutil.FreePort(t)
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", id, ctlPorts[id]))
		nodes = append(nodes, node{id: id, dir: t.TempDir(),
			kafka: "127.0.0.1:" + strconv.Itoa(testutil.FreePort(t)), http: "127.0.0.1:" + strconv.Itoa(testutil.FreePort(t))})
	}
	// Registered after the TempDirs, so run before they are removed. Stop every node at
	// once: stopped one by one, the last ones wait out their
	// controlled shutdown against a quorum that has already lost its majority.
	var stops []context.CancelFunc
	var dones []chan error
	t.Cleanup(func() {
		for _, stop := range stops {
			stop()
		}
		for i, done := range dones {
			if err := <-done; err != nil {
				t.Errorf("node %d: %v", i+1, err)
			}
		}
	})
	for _, nd := range nodes {
		cfg, err := config.Load([]string{
			"--node.id=" + strconv.Itoa(nd.id),
			"--log.dirs=" + filepath.Join(nd.dir, "data"),
			fmt.Sprintf("--listeners=PLAINTEXT://%s,CONTROLLER://127.0.0.1:%d", nd.kafka, ctlPorts[nd.id]),
			"--controller.quorum.voters=" + strings.Join(voters, ","),
			"--schema.registry.listener=", "--rest.proxy.listener=", "--http.listener=" + nd.http,
			"--default.replication.factor=" + strconv.Itoa(n),
			"--group.initial.rebalance.delay.ms=0",
			"--auto.create.topics.enable=false",
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- server.Run(ctx, cfg) }()
		stops, dones = append(stops, cancel), append(dones, done)
	}
	for _, nd := range nodes {
		waitFor(t, 60*time.Second, fmt.Sprintf("node %d ready", nd.id), func() bool {
			resp, err := http.Get("http://" + nd.http + "/readyz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})
	}
	return nodes
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type families map[string]*dto.MetricFamily

func scrape(t *testing.T, addr string) families {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics of %s: %v", addr, err)
	}
	return fams
}

// labelsOf turns "k=v,k=v" into a matcher map; a missing or empty label is "".
func labelsOf(s string) map[string]string {
	out := map[string]string{}
	if s == "" {
		return out
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, _ := strings.Cut(kv, "=")
		out[k] = v
	}
	return out
}

func metricValue(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return 0
}

// series returns the values of name whose labels match want exactly on want's keys.
func (f families) series(name, want string) []float64 {
	fam := f[name]
	if fam == nil {
		return nil
	}
	w := labelsOf(want)
	var out []float64
	for _, m := range fam.Metric {
		got := map[string]string{}
		for _, l := range m.Label {
			got[l.GetName()] = l.GetValue()
		}
		ok := true
		for k, v := range w {
			if got[k] != v {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, metricValue(m))
		}
	}
	return out
}

// one returns the single series of name matching want.
func (f families) one(t *testing.T, name, want string) float64 {
	t.Helper()
	vs := f.series(name, want)
	if len(vs) != 1 {
		t.Fatalf("%s{%s}: %d series, want 1", name, want, len(vs))
	}
	return vs[0]
}

func produce(t *testing.T, cl *kgo.Client, topic string, counts map[int32]int) {
	t.Helper()
	var rs []*kgo.Record
	for p, n := range counts {
		for i := range n {
			rs = append(rs, &kgo.Record{Topic: topic, Partition: p, Value: []byte(fmt.Sprintf("record-%d-%d", p, i))})
		}
	}
	if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func commit(t *testing.T, adm *kadm.Client, group, topic string, at map[int32]int64) {
	t.Helper()
	var offs kadm.Offsets
	for p, o := range at {
		offs.Add(kadm.Offset{Topic: topic, Partition: p, At: o, LeaderEpoch: -1})
	}
	resp, err := adm.CommitOffsets(context.Background(), group, offs)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("commit %s: %v", group, err)
	}
}

func clients(t *testing.T, seeds ...string) (*kgo.Client, *kadm.Client) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl, kadm.NewClient(cl)
}

// TestSingleNodeValues produces, commits and consumes against a real node and checks
// the values of the kafka_exporter and JMX-exporter series in its /metrics, then that
// every metric and label the shipped Grafana dashboard uses is in that scrape.
func TestSingleNodeValues(t *testing.T) {
	nodes := startCluster(t, 1)
	nd := nodes[0]
	cl, adm := clients(t, nd.kafka)
	ctx := context.Background()
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	produce(t, cl, "orders", map[int32]int{0: 10, 1: 5})
	commit(t, adm, "billing", "orders", map[int32]int64{0: 4, 1: 5})

	// A live member, for kafka_consumergroup_members, that also reads every record:
	// bytes out.
	consumer, err := kgo.NewClient(kgo.SeedBrokers(nd.kafka), kgo.ConsumerGroup("audit"), kgo.ConsumeTopics("orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	read := 0
	pollCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for read < 15 {
		fs := consumer.PollFetches(pollCtx)
		if err := pollCtx.Err(); err != nil {
			t.Fatalf("consumed %d of 15 records: %v", read, err)
		}
		read += fs.NumRecords()
	}

	var f families
	waitFor(t, 30*time.Second, "the audit group's member in /metrics", func() bool {
		f = scrape(t, nd.http)
		return len(f.series("kafka_consumergroup_members", "consumergroup=audit")) == 1
	})

	checks := []struct {
		name, labels string
		want         float64
	}{
		// kafka_exporter
		{"kafka_brokers", "", 1},
		{"kafka_broker_info", "id=1,address=" + nd.kafka, 1},
		{"kafka_topic_partitions", "topic=orders", 2},
		{"kafka_topic_partition_current_offset", "topic=orders,partition=0", 10},
		{"kafka_topic_partition_current_offset", "topic=orders,partition=1", 5},
		{"kafka_topic_partition_oldest_offset", "topic=orders,partition=0", 0},
		{"kafka_topic_partition_leader", "topic=orders,partition=1", 1},
		{"kafka_topic_partition_replicas", "topic=orders,partition=0", 1},
		{"kafka_topic_partition_in_sync_replica", "topic=orders,partition=0", 1},
		{"kafka_topic_partition_leader_is_preferred", "topic=orders,partition=0", 1},
		{"kafka_topic_partition_under_replicated_partition", "topic=orders,partition=0", 0},
		{"kafka_consumergroup_current_offset", "consumergroup=billing,topic=orders,partition=0", 4},
		{"kafka_consumergroup_current_offset", "consumergroup=billing,topic=orders,partition=1", 5},
		{"kafka_consumergroup_lag", "consumergroup=billing,topic=orders,partition=0", 6},
		{"kafka_consumergroup_lag", "consumergroup=billing,topic=orders,partition=1", 0},
		{"kafka_consumergroup_lag_sum", "consumergroup=billing,topic=orders", 6},
		{"kafka_consumergroup_current_offset_sum", "consumergroup=billing,topic=orders", 9},
		{"kafka_consumergroup_members", "consumergroup=audit", 1},
		// JMX exporter, Strimzi's rules
		{"kafka_server_brokertopicmetrics_messagesin_total", "topic=orders", 15},
		{"kafka_server_brokertopicmetrics_totalproducerequests_total", "topic=orders", 2},
		{"kafka_server_brokertopicmetrics_failedproducerequests_total", "topic=orders", 0},
		{"kafka_server_replicamanager_underreplicatedpartitions", "", 0},
		{"kafka_cluster_partition_atminisr", "topic=orders,partition=0", 1},
		{"kafka_cluster_partition_underminisr", "topic=orders,partition=0", 0},
		{"kafka_cluster_partition_insyncreplicascount", "topic=orders,partition=1", 1},
		{"kafka_log_log_logendoffset", "topic=orders,partition=0", 10},
		{"kafka_log_log_logstartoffset", "topic=orders,partition=1", 0},
		{"kafka_controller_kafkacontroller_activecontrollercount", "", 1},
		{"kafka_controller_kafkacontroller_offlinepartitionscount", "", 0},
		{"kafka_controller_kafkacontroller_activebrokercount", "", 1},
		{"kafka_server_brokertopicmetrics_replicationbytesin_total", "", 0},
	}
	for _, c := range checks {
		if got := f.one(t, c.name, c.labels); got != c.want {
			t.Errorf("%s{%s} = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// The all-topics series (no topic label) counts at least this topic.
	if got := f.one(t, "kafka_server_brokertopicmetrics_messagesin_total", "topic="); got < 15 {
		t.Errorf("all-topics messagesin = %v, want >= 15", got)
	}
	bytesIn := f.one(t, "kafka_server_brokertopicmetrics_bytesin_total", "topic=orders")
	if bytesIn < float64(15*len("record-0-0")) {
		t.Errorf("bytesin{topic=orders} = %v, less than the record values alone", bytesIn)
	}
	if out := f.one(t, "kafka_server_brokertopicmetrics_bytesout_total", "topic=orders"); out < float64(15*len("record-0-0")) {
		t.Errorf("bytesout{topic=orders} = %v after consuming every record", out)
	}
	if fetches := f.one(t, "kafka_server_brokertopicmetrics_totalfetchrequests_total", "topic=orders"); fetches < 2 {
		t.Errorf("totalfetchrequests{topic=orders} = %v, want >= 2 (both partitions read)", fetches)
	}
	if size := f.one(t, "kafka_log_log_size", "topic=orders,partition=0"); size <= 0 {
		t.Errorf("kafka_log_log_size{orders/0} = %v", size)
	}
	leaders := f.one(t, "kafka_server_replicamanager_leadercount", "")
	if parts := f.one(t, "kafka_server_replicamanager_partitioncount", ""); leaders != parts || parts < 2 {
		t.Errorf("leadercount %v, partitioncount %v on a single node", leaders, parts)
	}
	// The shale_ names stay.
	if got := f.one(t, "shale_consumer_group_lag", "group=billing,topic=orders,partition=0"); got != 6 {
		t.Errorf("shale_consumer_group_lag = %v, want 6", got)
	}
	if got := f.one(t, "shale_high_watermark", "topic=orders,partition=0"); got != 10 {
		t.Errorf("shale_high_watermark = %v, want 10", got)
	}

	t.Run("dashboard", func(t *testing.T) { checkDashboard(t, f) })
}

// TestClusterSeriesOnce checks, on three nodes with RF=3, that every per-partition and
// cluster-wide series is reported by exactly one node, so that the dashboards' sum()
// counts the cluster once, while per-replica series come from every replica.
func TestClusterSeriesOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	nodes := startCluster(t, 3)
	var seeds []string
	for _, nd := range nodes {
		seeds = append(seeds, nd.kafka)
	}
	cl, adm := clients(t, seeds...)
	ctx := context.Background()
	if _, err := adm.CreateTopic(ctx, 3, 3, nil, "events"); err != nil {
		t.Fatal(err)
	}
	produce(t, cl, "events", map[int32]int{0: 7, 1: 7, 2: 7})
	commit(t, adm, "etl", "events", map[int32]int64{0: 2, 1: 2, 2: 2})

	// count sums a series over the nodes and says how many nodes reported it.
	count := func(fs []families, name, labels string) (sum float64, n int) {
		for _, f := range fs {
			for _, v := range f.series(name, labels) {
				sum += v
				n++
			}
		}
		return sum, n
	}
	var last string
	ok := func() bool {
		var fs []families
		for _, nd := range nodes {
			fs = append(fs, scrape(t, nd.http))
		}
		type want struct {
			name, labels string
			sum          float64
			n            int
		}
		wants := []want{
			{"kafka_controller_kafkacontroller_activecontrollercount", "", 1, 3},
			{"kafka_brokers", "", 3, 1},
			{"kafka_topic_partitions", "topic=events", 3, 1},
			{"kafka_server_replicamanager_partitioncount", "", 9, 3},
			{"kafka_server_replicamanager_underreplicatedpartitions", "", 0, 3},
			{"kafka_topic_partition_in_sync_replica", "topic=events", 9, 3},
			{"kafka_consumergroup_lag", "consumergroup=etl,topic=events", 15, 3},
			// Every replica has all 21 records: 3 replicas x 3 partitions x 7.
			{"kafka_log_log_logendoffset", "topic=events", 63, 9},
		}
		for p := range 3 {
			pl := "topic=events,partition=" + strconv.Itoa(p)
			wants = append(wants,
				want{"kafka_topic_partition_current_offset", pl, 7, 1},
				want{"kafka_topic_partition_oldest_offset", pl, 0, 1},
				want{"kafka_cluster_partition_insyncreplicascount", pl, 3, 1},
				want{"kafka_consumergroup_current_offset", "consumergroup=etl," + pl, 2, 1},
				want{"kafka_log_log_logendoffset", pl, 21, 3})
		}
		for _, w := range wants {
			sum, n := count(fs, w.name, w.labels)
			if sum != w.sum || n != w.n {
				last = fmt.Sprintf("%s{%s}: sum %v over %d series, want %v over %d", w.name, w.labels, sum, n, w.sum, w.n)
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(60 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal(last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// promqlRefs is what one PromQL expression refers to: metric names with the label
// names of their matchers, and the labels of by/without clauses.
type promqlRefs struct {
	metrics map[string][]string
	by      []string
}

var promqlKeywords = map[string]bool{"bool": true, "and": true, "or": true, "unless": true, "offset": true}

// parsePromQL finds metric selectors in an expression: identifiers that are not
// functions or aggregations (followed by "("), keywords, or inside strings, matchers
// or range brackets.
func parsePromQL(expr string) promqlRefs {
	refs := promqlRefs{metrics: map[string][]string{}}
	isIdent := func(c byte, first bool) bool {
		return c == '_' || c == ':' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (!first && c >= '0' && c <= '9')
	}
	matcherName := regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)`)
	i := 0
	last := ""
	for i < len(expr) {
		c := expr[i]
		switch {
		case c == '"' || c == '\'':
			j := i + 1
			for j < len(expr) && expr[j] != c {
				if expr[j] == '\\' {
					j++
				}
				j++
			}
			i = j + 1
		case c == '[':
			i += strings.IndexByte(expr[i:], ']') + 1
		case c == '{':
			end := i + strings.IndexByte(expr[i:], '}')
			if last != "" {
				for _, m := range matcherName.FindAllStringSubmatch(expr[i+1:end], -1) {
					refs.metrics[last] = append(refs.metrics[last], m[1])
				}
			}
			i = end + 1
		case c >= '0' && c <= '9' || c == '.':
			for i < len(expr) && (isIdent(expr[i], false) || expr[i] == '.') {
				i++
			}
			last = ""
		case isIdent(c, true):
			j := i
			for j < len(expr) && isIdent(expr[j], false) {
				j++
			}
			word := expr[i:j]
			k := j
			for k < len(expr) && expr[k] == ' ' {
				k++
			}
			switch {
			case word == "by" || word == "without" || word == "on" || word == "ignoring" || word == "group_left" || word == "group_right":
				if k < len(expr) && expr[k] == '(' {
					end := k + strings.IndexByte(expr[k:], ')')
					for _, l := range strings.Split(expr[k+1:end], ",") {
						if l = strings.TrimSpace(l); l != "" {
							refs.by = append(refs.by, l)
						}
					}
					j = end + 1
				}
				last = ""
			case k < len(expr) && expr[k] == '(', promqlKeywords[word],
				// An aggregation written "sum by (l) (...)".
				strings.HasPrefix(expr[k:], "by ") || strings.HasPrefix(expr[k:], "by(") ||
					strings.HasPrefix(expr[k:], "without ") || strings.HasPrefix(expr[k:], "without("):
				last = ""
			default:
				if _, ok := refs.metrics[word]; !ok {
					refs.metrics[word] = nil
				}
				last = word
			}
			i = j
		default:
			if c != ' ' {
				last = ""
			}
			i++
		}
	}
	return refs
}

func TestParsePromQL(t *testing.T) {
	r := parsePromQL(`histogram_quantile(0.99, sum by (le, api) (rate(shale_request_duration_seconds_bucket{api!="x",topic=~"$t"}[$__rate_interval]))) + sum(kafka_a < bool 1) * 60`)
	if got := slices.Sorted(func(yield func(string) bool) {
		for k := range r.metrics {
			if !yield(k) {
				return
			}
		}
	}); !slices.Equal(got, []string{"kafka_a", "shale_request_duration_seconds_bucket"}) {
		t.Errorf("metrics %v", got)
	}
	if got := r.metrics["shale_request_duration_seconds_bucket"]; !slices.Equal(got, []string{"api", "topic"}) {
		t.Errorf("matcher labels %v", got)
	}
	if !slices.Equal(r.by, []string{"le", "api"}) {
		t.Errorf("by %v", r.by)
	}
}

// scrapeIndex maps every series name in a scrape (histograms and summaries by their
// _bucket, _sum and _count names) to the label names seen on it.
func scrapeIndex(f families) map[string]map[string]bool {
	idx := map[string]map[string]bool{}
	add := func(name string, labels []*dto.LabelPair, extra ...string) {
		if idx[name] == nil {
			idx[name] = map[string]bool{}
		}
		for _, l := range labels {
			if l.GetValue() != "" {
				idx[name][l.GetName()] = true
			}
		}
		for _, e := range extra {
			idx[name][e] = true
		}
	}
	for name, fam := range f {
		for _, m := range fam.Metric {
			switch fam.GetType() {
			case dto.MetricType_HISTOGRAM:
				add(name+"_bucket", m.Label, "le")
				add(name+"_sum", m.Label)
				add(name+"_count", m.Label)
			case dto.MetricType_SUMMARY:
				add(name, m.Label, "quantile")
				add(name+"_sum", m.Label)
				add(name+"_count", m.Label)
			default:
				add(name, m.Label)
			}
		}
	}
	return idx
}

// checkDashboard checks that every metric the dashboards in deploy/grafana query is in
// the scrape f, with every label its matchers, by clauses and variables use.
func checkDashboard(t *testing.T, f families) {
	idx := scrapeIndex(f)
	// Prometheus adds these at ingestion.
	targetLabels := map[string]bool{"instance": true, "job": true}
	paths, err := filepath.Glob("../../deploy/grafana/*.json")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no dashboards in deploy/grafana: %v", err)
	}
	labelValues := regexp.MustCompile(`label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)`)
	for _, path := range paths {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var dash any
		if err := json.Unmarshal(b, &dash); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		var exprs, queries []string
		var walk func(v any, key string)
		walk = func(v any, key string) {
			switch v := v.(type) {
			case map[string]any:
				for k, x := range v {
					walk(x, k)
				}
			case []any:
				for _, x := range v {
					walk(x, key)
				}
			case string:
				switch key {
				case "expr":
					exprs = append(exprs, v)
				case "definition":
					queries = append(queries, v)
				}
			}
		}
		walk(dash, "")
		if len(exprs) < 20 {
			t.Fatalf("%s: only %d expressions found", path, len(exprs))
		}
		for _, e := range exprs {
			refs := parsePromQL(e)
			if len(refs.metrics) == 0 {
				t.Errorf("%s: no metric in %q", path, e)
			}
			have := map[string]bool{}
			for name, labels := range refs.metrics {
				seen, ok := idx[name]
				if !ok {
					t.Errorf("%s: %s (in %q) is not in the scrape", path, name, e)
					continue
				}
				for l := range seen {
					have[l] = true
				}
				for _, l := range labels {
					if !seen[l] && !targetLabels[l] && !strings.Contains(e, l+`=""`) {
						t.Errorf("%s: %s has no label %q (in %q)", path, name, l, e)
					}
				}
			}
			for _, l := range refs.by {
				if !have[l] && !targetLabels[l] {
					t.Errorf("%s: no metric of %q has label %q", path, e, l)
				}
			}
		}
		for _, q := range queries {
			for _, m := range labelValues.FindAllStringSubmatch(q, -1) {
				if !idx[m[1]][m[2]] {
					t.Errorf("%s: variable query %q: %s has no label %s in the scrape", path, q, m[1], m[2])
				}
			}
		}
	}
}
