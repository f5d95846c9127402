package restproxy

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/security/acl"
	"github.com/shalelog/shale/security/httpauth"
)

// images is a fixed metadata image.
type images struct{ im *metadata.Image }

func (i images) Current() *metadata.Image { return i.im }
func (i images) Watch(ctx context.Context) <-chan *metadata.Image {
	return make(chan *metadata.Image)
}

const payAvro = `{"type":"record","name":"Pay","namespace":"shop","fields":[
 {"name":"id","type":"long"},
 {"name":"note","type":["null","string"],"default":null},
 {"name":"raw","type":"bytes"},
 {"name":"kind","type":{"type":"enum","name":"Kind","symbols":["CARD","CASH"]}},
 {"name":"tag","type":{"type":"fixed","name":"Tag","size":2}},
 {"name":"items","type":{"type":"array","items":"int"}},
 {"name":"attrs","type":{"type":"map","values":"double"}},
 {"name":"rate","type":"float","default":1.5}]}`

// fixture is a proxy over a kfake cluster, with an image that names the same topic.
type fixture struct {
	url   string
	kafka *kfake.Cluster
	im    *metadata.Image
	hs    *httptest.Server
	srv   *Server
	reg   *prometheus.Registry
}

func newFixture(t *testing.T, authz *acl.Authorizer, acls []acl.Binding, maxBody ...int64) *fixture {
	t.Helper()
	kf, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kf.Close)
	im := &metadata.Image{ClusterID: "c1", ControllerID: 1, Topics: map[string]*metadata.Topic{
		"t": {Name: "t", Partitions: []metadata.Partition{{Leader: 0, Replicas: []int32{0}}, {Leader: 0, Replicas: []int32{0}}, {Leader: 0, Replicas: []int32{0}}}},
	}, SchemaRegistry: &metadata.SchemaRegistry{
		Schemas:  map[int32]*metadata.RegistrySchema{1: {ID: 1, Type: "AVRO", Schema: payAvro}},
		Subjects: map[string][]metadata.SubjectVersion{"t-value": {{Subject: "t-value", Version: 1, SchemaID: 1}}, "shop.Pay": {{Subject: "shop.Pay", Version: 1, SchemaID: 1}}},
	}}
	if acls != nil {
		im.ACLs = acl.NewSet(acls)
	}
	reg := prometheus.NewRegistry()
	srv, err := New(Options{Images: images{im}, Registerer: reg, Kafka: []kgo.Opt{kgo.SeedBrokers(kf.ListenAddrs()...)}, Authorizer: authz, Timeout: 10 * time.Second, MaxBodyBytes: append(maxBody, 0)[0],
		// The test's authentication: the principal is the X-User header's.
		Wrap: func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if u := r.Header.Get("X-User"); u != "" {
					r = r.WithContext(httpauth.WithPrincipal(r.Context(), "User:"+u))
				}
				h.ServeHTTP(w, r)
			})
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return &fixture{url: hs.URL + "/v3/clusters/c1", kafka: kf, im: im, hs: hs, srv: srv, reg: reg}
}

func (f *fixture) call(t *testing.T, method, path, user, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, f.url+path, strings.NewReader(body))
	if user != "" {
		req.Header.Set("X-User", user)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]any{}
	raw, _ := io.ReadAll(resp.Body)
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("%s %s: %d %q", method, path, resp.StatusCode, raw)
		}
	}
	return resp.StatusCode, out
}

// consume reads one record at partition p, offset o from the kfake cluster.
func (f *fixture) consume(t *testing.T, p int32, o int64) *kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.kafka.ListenAddrs()...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"t": {p: kgo.NewOffset().At(o)}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fs := cl.PollRecords(ctx, 1)
	if err := fs.Err(); err != nil || len(fs.Records()) != 1 {
		t.Fatalf("consume t-%d@%d: %v", p, o, err)
	}
	return fs.Records()[0]
}

func TestProduceBodiesAndRequestErrors(t *testing.T) {
	f := newFixture(t, nil, nil)
	for _, tc := range []struct {
		name, body string
		status     int
		code       float64
	}{
		{"string", `{"partition_id":1,"key":{"type":"STRING","data":"k"},"value":{"type":"STRING","data":"v"}}`, 200, 200},
		{"tombstone", `{"partition_id":1,"key":{"type":"STRING","data":"k"}}`, 200, 200},
		{"unknown type", `{"value":{"type":"XML","data":"v"}}`, 400, 400},
		{"unknown field", `{"valu":{"type":"STRING","data":"v"}}`, 400, 400},
		{"subject and strategy", `{"value":{"subject":"t-value","subject_name_strategy":"TOPIC_NAME","data":{}}}`, 400, 400},
		{"schema_id and version", `{"value":{"schema_id":1,"schema_version":1,"data":{}}}`, 400, 400},
		{"JSON with a schema", `{"value":{"type":"JSON","schema_id":1,"data":{}}}`, 400, 400},
		{"JSON not JSON", `{"value":{"type":"STRING","data":7}}`, 400, 400},
		{"unknown strategy", `{"value":{"subject_name_strategy":"NOPE","data":{}}}`, 400, 400},
		{"record name without schema id", `{"value":{"subject_name_strategy":"RECORD_NAME","data":{}}}`, 400, 400},
		{"unknown subject", `{"value":{"type":"AVRO","subject":"nope","data":{}}}`, 404, 40401},
		{"unknown subject without a type", `{"value":{"subject":"nope","data":{}}}`, 404, 40401},
		{"no type, no schema: BINARY", `{"key":{"subject_name_strategy":"TOPIC_NAME","data":"AA=="},"value":{"data":"AA=="}}`, 404, 40401},
		{"unknown version", `{"value":{"type":"AVRO","schema_version":5,"data":{}}}`, 404, 40402},
		{"type against schema", `{"value":{"type":"PROTOBUF","schema_id":1,"data":{}}}`, 400, 400},
		{"empty body", ``, 400, 400},
		{"partition out of range", `{"partition_id":3,"value":{"type":"STRING","data":"v"}}`, 404, 40403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, body := f.call(t, "POST", "/topics/t/records", "", tc.body)
			if st != tc.status || body["error_code"] != tc.code {
				t.Fatalf("answered %d %v, want %d with error_code %v", st, body, tc.status, tc.code)
			}
		})
	}
	st, body := f.call(t, "POST", "/topics/t/records", "", `{"partition_id":2,"value":{"type":"STRING","data":"v"}}`)
	if st != 200 || body["partition_id"] != float64(2) || body["key"] != nil {
		t.Fatalf("no key: %d %v", st, body)
	}
	if rec := f.consume(t, 1, 1); rec.Key == nil || string(rec.Key) != "k" || rec.Value != nil {
		t.Fatalf("tombstone read back as key %q value %q", rec.Key, rec.Value)
	}
	// Several records in one (not chunked) body: a report each, status 200.
	st2, reports := postMany(t, f.url+"/topics/t/records", `{"partition_id":0,"value":{"type":"STRING","data":"a"}} {"value":{"type":"XML"}}`)
	if st2 != 200 || len(reports) != 2 || reports[0]["error_code"] != float64(200) || reports[1]["error_code"] != float64(400) {
		t.Fatalf("two records: %d %v", st2, reports)
	}
	if st, body := f.call(t, "POST", "/topics/nope/records", "", `{}`); st != 404 || body["error_code"] != float64(40403) {
		t.Fatalf("unknown topic: %d %v", st, body)
	}
	if st, body := f.call(t, "GET", "/nothing/here", "", ``); st != 404 || body["error_code"] != float64(404) {
		t.Fatalf("unknown path: %d %v", st, body)
	}
	// Delivered: string, tombstone, no key, the first of two; refused for a bad record: 9
	// in the table (the empty body has no record) and the second of two.
	m := f.srv.metrics
	if ok, bad := counterValue(t, m.records.WithLabelValues("200")), counterValue(t, m.records.WithLabelValues("400")); ok != 4 || bad != 10 {
		t.Fatalf("produced_records_total: 200=%v 400=%v", ok, bad)
	}
	if n := counterValue(t, m.requests.WithLabelValues("POST /v3/clusters/{cluster}/topics/{topic}/records", "404")); n != 6 { // 3 subjects, a version, a partition, a topic
		t.Fatalf("404 produce requests counted %v", n)
	}
}

func postMany(t *testing.T, url, body string) (int, []map[string]any) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []map[string]any
	dec := json.NewDecoder(resp.Body)
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			break
		}
		out = append(out, m)
	}
	return resp.StatusCode, out
}

// Avro data in Avro's JSON encoding (unions, bytes, enums, fixed, arrays, maps,
// defaults) becomes the bytes hamba/avro writes for the same value, behind Confluent's
// header; RECORD_NAME names the subject after the record.
func TestProduceAvroJSONEncoding(t *testing.T) {
	f := newFixture(t, nil, nil)
	body := `{"partition_id":0,"value":{"subject_name_strategy":"RECORD_NAME","schema_id":1,"data":
	  {"id":5,"note":{"string":"hi"},"raw":"\u0000\u00ff","kind":"CASH","tag":"ab","items":[1,2],"attrs":{"x":0.5}}}}`
	st, rep := f.call(t, "POST", "/topics/t/records", "", body)
	if st != 200 || rep["value"].(map[string]any)["subject"] != "shop.Pay" || rep["value"].(map[string]any)["schema_version"] != float64(1) {
		t.Fatalf("produce: %d %v", st, rep)
	}
	rec := f.consume(t, 0, 0)
	type pay struct {
		ID    int64              `avro:"id"`
		Note  *string            `avro:"note"`
		Raw   []byte             `avro:"raw"`
		Kind  string             `avro:"kind"`
		Tag   [2]byte            `avro:"tag"`
		Items []int              `avro:"items"`
		Attrs map[string]float64 `avro:"attrs"`
		Rate  float32            `avro:"rate"`
	}
	if !bytes.Equal(rec.Value[:5], []byte{0, 0, 0, 0, 1}) {
		t.Fatalf("header % x", rec.Value[:5])
	}
	var got pay
	if err := avro.Unmarshal(avro.MustParse(payAvro), rec.Value[5:], &got); err != nil {
		t.Fatal(err)
	}
	if got.ID != 5 || got.Note == nil || *got.Note != "hi" || !bytes.Equal(got.Raw, []byte{0, 255}) || got.Kind != "CASH" ||
		got.Tag != [2]byte{'a', 'b'} || fmt.Sprint(got.Items) != "[1 2]" || got.Attrs["x"] != 0.5 || got.Rate != 1.5 {
		t.Fatalf("decoded %+v", got)
	}
	// Read back through the proxy in Avro's JSON encoding.
	st, list := f.call(t, "GET", "/topics/t/partitions/0/records?value_format=avro", "", "")
	if st != 200 || len(list["data"].([]any)) != 1 {
		t.Fatalf("read: %d %v", st, list)
	}
	v := list["data"].([]any)[0].(map[string]any)["value"].(map[string]any)
	js, _ := json.Marshal(v["data"])
	want := `{"attrs":{"x":0.5},"id":5,"items":[1,2],"kind":"CASH","note":{"string":"hi"},"rate":1.5,"raw":"\u0000ÿ","tag":"ab"}`
	if v["type"] != "AVRO" || string(js) != want {
		t.Fatalf("read back %s %s, want %s", v["type"], js, want)
	}

	for name, data := range map[string]string{
		"union without a branch": `{"id":5,"note":"hi","raw":"","kind":"CASH","tag":"ab","items":[],"attrs":{}}`,
		"unknown symbol":         `{"id":5,"raw":"","kind":"GOLD","tag":"ab","items":[],"attrs":{}}`,
		"fixed of a wrong size":  `{"id":5,"raw":"","kind":"CASH","tag":"abc","items":[],"attrs":{}}`,
		"unknown field":          `{"id":5,"raw":"","kind":"CASH","tag":"ab","items":[],"attrs":{},"extra":1}`,
		"int out of range":       `{"id":5,"raw":"","kind":"CASH","tag":"ab","items":[4294967296],"attrs":{}}`,
	} {
		st, rep := f.call(t, "POST", "/topics/t/records", "", `{"value":{"schema_id":1,"data":`+data+`}}`)
		if st != 422 || rep["error_code"] != float64(42203) {
			t.Fatalf("%s: %d %v", name, st, rep)
		}
	}
}

// With an authorizer, the HTTP principal needs the ACLs a Kafka client would.
func TestAuthorizationWithACLs(t *testing.T) {
	allow := func(op kmsg.ACLOperation) acl.Binding {
		return acl.Binding{ResourceType: kmsg.ACLResourceTypeTopic, PatternType: kmsg.ACLResourcePatternTypeLiteral, ResourceName: "t",
			Principal: "User:alice", Host: "*", Operation: op, Permission: kmsg.ACLPermissionTypeAllow}
	}
	f := newFixture(t, acl.NewAuthorizer(nil, false), []acl.Binding{allow(kmsg.ACLOperationWrite), allow(kmsg.ACLOperationRead)})
	rec := `{"value":{"type":"STRING","data":"v"}}`
	if st, body := f.call(t, "POST", "/topics/t/records", "", rec); st != 403 || body["error_code"] != float64(40301) {
		t.Fatalf("anonymous produce: %d %v", st, body)
	}
	if st, body := f.call(t, "POST", "/topics/t/records", "bob", rec); st != 403 || body["error_code"] != float64(40301) {
		t.Fatalf("bob's produce: %d %v", st, body)
	}
	if st, body := f.call(t, "POST", "/topics/t/records", "alice", rec); st != 200 {
		t.Fatalf("alice's produce: %d %v", st, body)
	}
	// WRITE and READ imply DESCRIBE, as in Kafka.
	if st, body := f.call(t, "GET", "/topics", "alice", ""); st != 200 || len(body["data"].([]any)) != 1 {
		t.Fatalf("alice lists %d %v", st, body)
	}
	if st, body := f.call(t, "GET", "/topics", "bob", ""); st != 200 || len(body["data"].([]any)) != 0 {
		t.Fatalf("bob lists %d %v", st, body)
	}
	if st, body := f.call(t, "DELETE", "/topics/t", "alice", ""); st != 403 || body["error_code"] != float64(40301) {
		t.Fatalf("alice deletes: %d %v", st, body)
	}
	if st, body := f.call(t, "POST", "/topics", "alice", `{"topic_name":"u"}`); st != 403 || body["error_code"] != float64(40301) {
		t.Fatalf("alice creates: %d %v", st, body)
	}
	if st, _ := f.call(t, "GET", "/topics/t/partitions/0/records", "alice", ""); st != 200 {
		t.Fatalf("alice reads: %d", st)
	}
	if st, body := f.call(t, "GET", "/topics/t/partitions/0/records", "bob", ""); st != 403 || body["error_code"] != float64(40301) {
		t.Fatalf("bob reads: %d %v", st, body)
	}
}

func TestMetadataShapes(t *testing.T) {
	f := newFixture(t, nil, nil)
	st, c := f.call(t, "GET", "", "", "")
	if st != 200 || c["kind"] != "KafkaCluster" || c["cluster_id"] != "c1" || c["metadata"].(map[string]any)["resource_name"] != "crn:///kafka=c1" ||
		c["topics"].(map[string]any)["related"] != f.url+"/topics" || c["controller"].(map[string]any)["related"] != f.url+"/brokers/1" {
		t.Fatalf("cluster %d %v", st, c)
	}
	st, tp := f.call(t, "GET", "/topics/t", "", "")
	if st != 200 || tp["kind"] != "KafkaTopic" || tp["partitions_count"] != float64(3) || tp["replication_factor"] != float64(1) ||
		tp["is_internal"] != false || tp["partitions"].(map[string]any)["related"] != f.url+"/topics/t/partitions" {
		t.Fatalf("topic %d %v", st, tp)
	}
	st, p := f.call(t, "GET", "/topics/t/partitions/1", "", "")
	if st != 200 || p["kind"] != "KafkaPartition" || p["partition_id"] != float64(1) || p["leader"].(map[string]any)["related"] != f.url+"/topics/t/partitions/1/replicas/0" {
		t.Fatalf("partition %d %v", st, p)
	}
	if st, body := f.call(t, "GET", "/topics/t/partitions/x", "", ""); st != 404 || body["error_code"] != float64(40403) {
		t.Fatalf("partition x: %d %v", st, body)
	}
	resp, err := http.Get(strings.Replace(f.url, "/c1", "/c2", 1) + "/topics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Fatalf("another cluster: %d", resp.StatusCode)
	}
}

func TestKafkaErrorsMapToConfluentCodes(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code int
	}{
		{kerr.UnknownTopicOrPartition, 40403},
		{kerr.TopicAuthorizationFailed, 40301},
		{kerr.SaslAuthenticationFailed, 40101},
		{kerr.InvalidRecord, 40002},
		{kerr.TopicAlreadyExists, 40002},
		{kerr.PolicyViolation, 40002},
		{kerr.NotEnoughReplicas, 50003},
		{kerr.MessageTooLarge, 413},
		{kerr.ThrottlingQuotaExceeded, 42901},
		{fmt.Errorf("produce: %w", kerr.InvalidRecord), 40002},
		{context.DeadlineExceeded, 50003},
		{errors.New("boom"), 50002},
		{metadata.RegistryErrorf(40403, "Schema 9 not found"), 40403},
	} {
		if got := toAPIError(tc.err); got.code != tc.code {
			t.Errorf("%v mapped to %d, want %d", tc.err, got.code, tc.code)
		}
	}
}

// A BINARY key is base64 in and base64 out.
func TestBinaryRoundTrip(t *testing.T) {
	f := newFixture(t, nil, nil)
	key := []byte{1, 2, 3}
	body := fmt.Sprintf(`{"partition_id":2,"key":{"type":"BINARY","data":%q},"value":{"type":"JSON","data":[1, 2]},"timestamp":"2024-01-02T03:04:05.006Z"}`,
		base64.StdEncoding.EncodeToString(key))
	if st, rep := f.call(t, "POST", "/topics/t/records", "", body); st != 200 || rep["timestamp"] != "2024-01-02T03:04:05.006Z" {
		t.Fatalf("produce %d %v", st, rep)
	}
	st, list := f.call(t, "GET", "/topics/t/partitions/2/records?key_format=binary&value_format=json", "", "")
	if st != 200 {
		t.Fatalf("read %d %v", st, list)
	}
	r := list["data"].([]any)[0].(map[string]any)
	if r["key"].(map[string]any)["data"] != base64.StdEncoding.EncodeToString(key) || fmt.Sprint(r["value"].(map[string]any)["data"]) != "[1 2]" ||
		r["timestamp"] != "2024-01-02T03:04:05.006Z" {
		t.Fatalf("read back %v", r)
	}
}

// A chunked body is Confluent's streaming mode: each record's report comes while the
// client is still sending; a streamed record over the limit ends the stream with 413.
func TestStreamingProduce(t *testing.T) {
	f := newFixture(t, nil, nil, 1000)
	pr, pw := io.Pipe()
	req, _ := http.NewRequest("POST", f.url+"/topics/t/records", pr)
	type answer struct {
		resp *http.Response
		err  error
	}
	answered := make(chan answer, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		answered <- answer{resp, err}
	}()
	if _, err := pw.Write([]byte(`{"partition_id":0,"value":{"type":"STRING","data":"one"}}`)); err != nil {
		t.Fatal(err)
	}
	a := <-answered
	if a.err != nil || a.resp.StatusCode != 200 {
		t.Fatalf("stream answered %v, %v", a.resp, a.err)
	}
	defer a.resp.Body.Close()
	dec := json.NewDecoder(a.resp.Body)
	var first map[string]any
	// The first report, before the body is complete.
	if err := dec.Decode(&first); err != nil || first["error_code"] != float64(200) || first["offset"] != float64(0) {
		t.Fatalf("first report %v, %v", first, err)
	}
	pw.Write([]byte(`{"partition_id":0,"value":{"type":"STRING","data":"two"}}{"value":{"type":"STRING","data":"` + strings.Repeat("x", 600) + `"}}`))
	pw.Close()
	var second, third map[string]any
	if err := dec.Decode(&second); err != nil || second["error_code"] != float64(200) || second["offset"] != float64(1) {
		t.Fatalf("second report %v, %v", second, err)
	}
	if err := dec.Decode(&third); err != nil || third["error_code"] != float64(413) {
		t.Fatalf("oversized record's report %v, %v", third, err)
	}
	if st, body := f.call(t, "POST", "/topics/t/records", "", `{"value":{"type":"STRING","data":"`+strings.Repeat("x", 1000)+`"}}`); st != 413 || body["error_code"] != float64(413) {
		t.Fatalf("oversized body: %d %v", st, body)
	}
}

// A client that goes away mid-stream leaves nothing running once the server is closed.
func TestNoGoroutinesLeftAfterAbandonedStream(t *testing.T) {
	f := newFixture(t, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	req, _ := http.NewRequestWithContext(ctx, "POST", f.url+"/topics/t/records", pr)
	go func() {
		pw.Write([]byte(`{"partition_id":0,"value":{"type":"STRING","data":"one"}}`))
		// and never finish the body
	}()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var first map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&first); err != nil || first["error_code"] != float64(200) {
		t.Fatalf("first report %v, %v", first, err)
	}
	if st, _ := f.call(t, "GET", "/topics/t/partitions/0/records", "", ""); st != 200 {
		t.Fatalf("read %d", st)
	}
	cancel()
	resp.Body.Close()
	pw.CloseWithError(errors.New("client gone"))
	f.hs.Close()
	f.srv.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		var left []string
		for _, g := range strings.Split(stacks, "\n\n") {
			if strings.Contains(g, "restproxy.(*") || strings.Contains(g, "franz-go/pkg/kgo.") {
				left = append(left, g)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines left:\n%s", len(left), strings.Join(left, "\n\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
