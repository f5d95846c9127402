package server

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"iter"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/internal/testutil"
)

// instanceLogger catches the client instance id franz-go logs when it gets a
// subscription.
type instanceLogger struct {
	mu sync.Mutex
	id string
}

func (l *instanceLogger) Level() kgo.LogLevel { return kgo.LogLevelInfo }
func (l *instanceLogger) Log(_ kgo.LogLevel, msg string, kv ...any) {
	if !strings.HasPrefix(msg, "received client metrics subscription") {
		return
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i] == "client_instance_id" {
			l.mu.Lock()
			l.id = fmt.Sprint(kv[i+1])
			l.mu.Unlock()
		}
	}
}

func (l *instanceLogger) get() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.id
}

func scrape(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func metricValue(body, name string) float64 {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		return -1
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// franz-go pushes its metrics (KIP-714) once a CLIENT_METRICS subscription asks for
// them: they appear on the broker's /metrics with franz-go's client instance id, at
// most telemetry.max.series of them (the rest counted as dropped), and go away when the
// client closes (its terminating push).
func TestClientTelemetryThroughFranzGo(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	httpAddr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	var logs testutil.Buffer
	const maxSeries = 12
	runNode(t, &logs, "--log.dirs="+filepath.Join(t.TempDir(), "data"), "--schema.registry.listener=", "--rest.proxy.listener=", "--http.listener="+httpAddr,
		"--listeners=PLAINTEXT://"+addr, "--telemetry.max.series="+strconv.Itoa(maxSeries))
	waitBroker(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	admin, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DisableClientMetrics())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeClientMetrics, "everything"
	for k, v := range map[string]string{"metrics": "*", "interval.ms": "1000", "match": "client_id=telemetry-.*"} {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		res.Configs = append(res.Configs, c)
	}
	req.Resources = append(req.Resources, res)
	aresp, err := req.RequestWith(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(aresp.Resources[0].ErrorCode); err != nil {
		t.Fatal(err)
	}

	// Twenty user gauges on top of franz-go's own metrics: more than the cap.
	user := func() iter.Seq[kgo.Metric] {
		return func(yield func(kgo.Metric) bool) {
			for i := range 20 {
				if !yield(kgo.Metric{Name: fmt.Sprintf("app.test.gauge%02d", i), Type: kgo.MetricTypeGauge, ValueInt: int64(i + 1)}) {
					return
				}
			}
		}
	}
	lg := &instanceLogger{}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID("telemetry-app"), kgo.WithLogger(lg), kgo.UserMetricsFn(user),
		kgo.DefaultProduceTopic("telemetry"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			cl.Close()
		}
	}()
	produce := func() {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	produce()

	var body, label string
	testutil.Eventually(t, 30*time.Second, "franz-go's metrics on /metrics", func() bool {
		produce()
		hexID := lg.get()
		if hexID == "" {
			return false
		}
		raw, err := hex.DecodeString(hexID)
		if err != nil {
			t.Fatalf("instance id %q: %v", hexID, err)
		}
		label = `client_instance_id="` + base64.RawURLEncoding.EncodeToString(raw) + `"`
		body = scrape(t, httpAddr)
		return strings.Contains(body, "client_org_apache_kafka_producer_") && metricValue(body, "shale_client_telemetry_series_dropped_total") > 0
	})
	var ours []string
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "client_") {
			if !strings.Contains(line, label) || !strings.Contains(line, `client_id="telemetry-app"`) || !strings.Contains(line, `client_software_name="kgo"`) {
				t.Errorf("series without the client's labels (%s): %s", label, line)
			}
			ours = append(ours, line)
		}
	}
	if len(ours) != maxSeries || metricValue(body, "shale_client_telemetry_series") != maxSeries {
		t.Errorf("%d client series exported (gauge %v), want the cap %d:\n%s", len(ours), metricValue(body, "shale_client_telemetry_series"), maxSeries, strings.Join(ours, "\n"))
	}
	t.Logf("exported %d series, dropped %v points; e.g. %s", len(ours), metricValue(body, "shale_client_telemetry_series_dropped_total"), ours[0])

	// Closing the client sends a terminating push, which removes its series.
	cl.Close()
	closed = true
	testutil.Eventually(t, 10*time.Second, "series removed after the terminating push", func() bool {
		return !strings.Contains(scrape(t, httpAddr), label)
	})
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("the node logged an error:\n%s", logs.String())
	}
}
