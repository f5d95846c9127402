package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/shalelog/shale/internal/testutil"
)

// proxyCall sends a request to the REST proxy and decodes the JSON answer.
func proxyCall(t *testing.T, method, url string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		js, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(js)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	out := map[string]any{}
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("%s %s answered %d with %q: %v", method, url, resp.StatusCode, raw, err)
		}
	}
	return resp.StatusCode, out
}

func wantError(t *testing.T, what string, status int, body map[string]any, wantStatus, wantCode int) {
	t.Helper()
	if status != wantStatus || body["error_code"] != float64(wantCode) {
		t.Fatalf("%s: answered %d %v, want %d with error_code %d", what, status, body, wantStatus, wantCode)
	}
}

// The REST proxy of a node started as `shale serve` starts one: topics created, listed
// and deleted through it; JSON, STRING, BINARY, AVRO, PROTOBUF and JSONSCHEMA records
// produced through it (one per request and streamed) that a franz-go consumer reads
// back byte for byte (the Avro ones decode with franz-go's sr serde); keys partitioned
// as a Kafka producer partitions them; records read back through Shale's own GET; and
// Confluent's error codes for what goes wrong.
func TestRESTProxyEndToEnd(t *testing.T) {
	kafka := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	registry := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	proxy := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	var logs testutil.Buffer
	runNode(t, &logs, "--log.dirs="+filepath.Join(t.TempDir(), "data"), "--http.listener=",
		"--schema.registry.listener="+registry, "--rest.proxy.listener="+proxy, "--listeners=PLAINTEXT://"+kafka)
	waitBroker(t, kafka)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := "http://" + proxy + "/v3/clusters"

	// Clusters.
	var clusterID string
	testutil.Eventually(t, 20*time.Second, "the proxy lists the cluster", func() bool {
		resp, err := http.Get(base)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var l struct {
			Data []struct {
				ClusterID string `json:"cluster_id"`
			} `json:"data"`
		}
		if json.NewDecoder(resp.Body).Decode(&l) != nil || len(l.Data) != 1 || l.Data[0].ClusterID == "" {
			return false
		}
		clusterID = l.Data[0].ClusterID
		return true
	})
	cluster := base + "/" + clusterID
	if st, body := proxyCall(t, "GET", cluster, nil); st != 200 || body["kind"] != "KafkaCluster" || body["cluster_id"] != clusterID ||
		body["metadata"].(map[string]any)["self"] != cluster {
		t.Fatalf("GET cluster: %d %v", st, body)
	}
	st, body := proxyCall(t, "GET", base+"/no-such-cluster/topics", nil)
	wantError(t, "unknown cluster", st, body, 404, 404)

	// Topics.
	st, body = proxyCall(t, "POST", cluster+"/topics", map[string]any{"topic_name": "events", "partitions_count": 3, "replication_factor": 1,
		"configs": []map[string]any{{"name": "retention.ms", "value": "3600000"}}})
	if st != 201 || body["kind"] != "KafkaTopic" || body["partitions_count"] != float64(3) || body["replication_factor"] != float64(1) {
		t.Fatalf("create topic: %d %v\n%s", st, body, logs.String())
	}
	st, body = proxyCall(t, "POST", cluster+"/topics", map[string]any{"topic_name": "events", "partitions_count": 1})
	wantError(t, "topic created twice", st, body, 400, 40002)
	st, body = proxyCall(t, "POST", cluster+"/topics", `{"topic_name": `)
	wantError(t, "truncated create body", st, body, 400, 400)
	st, body = proxyCall(t, "GET", cluster+"/topics", nil)
	if st != 200 || body["kind"] != "KafkaTopicList" || !strings.Contains(fmt.Sprint(body["data"]), "topic_name:events") {
		t.Fatalf("list topics: %d %v", st, body)
	}
	st, body = proxyCall(t, "GET", cluster+"/topics/events/partitions", nil)
	if st != 200 || len(body["data"].([]any)) != 3 {
		t.Fatalf("list partitions: %d %v", st, body)
	}
	st, body = proxyCall(t, "GET", cluster+"/topics/events/partitions/2", nil)
	if st != 200 || body["partition_id"] != float64(2) || body["leader"] == nil {
		t.Fatalf("get partition: %d %v", st, body)
	}
	st, body = proxyCall(t, "GET", cluster+"/topics/events/partitions/3", nil)
	wantError(t, "partition out of range", st, body, 404, 40403)
	st, body = proxyCall(t, "GET", cluster+"/topics/events/configs", nil)
	if st != 200 || !strings.Contains(fmt.Sprint(body["data"]), "name:retention.ms") || !strings.Contains(fmt.Sprint(body["data"]), "value:3600000") {
		t.Fatalf("topic configs: %d %v", st, body)
	}
	st, body = proxyCall(t, "GET", cluster+"/topics/nope", nil)
	wantError(t, "unknown topic", st, body, 404, 40403)

	// Schemas for the typed records.
	srCl, err := sr.NewClient(sr.URLs("http://" + registry))
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, "the registry answers", func() bool {
		_, err := srCl.Subjects(ctx)
		return err == nil
	})
	avroSchema, err := srCl.CreateSchema(ctx, "events-value", sr.Schema{Schema: schemaOrderAvro, Type: sr.TypeAvro})
	if err != nil {
		t.Fatal(err)
	}
	protoSchema, err := srCl.CreateSchema(ctx, "proto-value", sr.Schema{Type: sr.TypeProtobuf,
		Schema: "syntax = \"proto3\";\npackage shop;\nmessage Order { int64 id = 1; string note = 2; }\n"})
	if err != nil {
		t.Fatal(err)
	}
	jsonSchema, err := srCl.CreateSchema(ctx, "json-value", sr.Schema{Type: sr.TypeJSON,
		Schema: `{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"]}`})
	if err != nil {
		t.Fatal(err)
	}

	// Produce, one record per request.
	records := cluster + "/topics/events/records"
	type sent struct {
		partition, offset float64
		key, value        []byte
		headers           map[string]string
	}
	var all []sent
	produce := func(what string, req map[string]any, key, value []byte) map[string]any {
		t.Helper()
		st, body := proxyCall(t, "POST", records, req)
		if st != 200 || body["error_code"] != float64(200) || body["topic_name"] != "events" || body["cluster_id"] != clusterID {
			t.Fatalf("%s: %d %v\n%s", what, st, body, logs.String())
		}
		s := sent{partition: body["partition_id"].(float64), offset: body["offset"].(float64), key: key, value: value, headers: map[string]string{}}
		if hs, ok := req["headers"].([]map[string]any); ok {
			for _, h := range hs {
				b, _ := base64.StdEncoding.DecodeString(h["value"].(string))
				s.headers[h["name"].(string)] = string(b)
			}
		}
		all = append(all, s)
		return body
	}
	body = produce("JSON", map[string]any{"partition_id": 0, "key": map[string]any{"type": "STRING", "data": "k-json"},
		"value": map[string]any{"type": "JSON", "data": map[string]any{"a": 1, "b": []any{true, nil}}}},
		[]byte("k-json"), []byte(`{"a":1,"b":[true,null]}`))
	if body["partition_id"] != float64(0) || body["value"].(map[string]any)["type"] != "JSON" || body["value"].(map[string]any)["size"] != float64(23) {
		t.Fatalf("JSON delivery report %v", body)
	}
	produce("BINARY", map[string]any{"partition_id": 1,
		"headers": []map[string]any{{"name": "trace", "value": base64.StdEncoding.EncodeToString([]byte("abc"))}},
		"value":   map[string]any{"type": "BINARY", "data": base64.StdEncoding.EncodeToString([]byte{0, 1, 2, 255})}},
		nil, []byte{0, 1, 2, 255})
	order := schemaOrder{ID: 7, Note: "two spoons"}
	schema := avro.MustParse(schemaOrderAvro)
	avroBytes, err := avro.Marshal(schema, order)
	if err != nil {
		t.Fatal(err)
	}
	wire := func(id int, payload []byte, extra ...byte) []byte {
		return append(append([]byte{0, byte(id >> 24), byte(id >> 16), byte(id >> 8), byte(id)}, extra...), payload...)
	}
	// AVRO by the topic's subject (TopicNameStrategy, latest version).
	body = produce("AVRO latest", map[string]any{"partition_id": 2, "value": map[string]any{"type": "AVRO", "data": map[string]any{"id": 7, "note": "two spoons"}}},
		nil, wire(avroSchema.ID, avroBytes))
	if v := body["value"].(map[string]any); v["type"] != "AVRO" || v["schema_id"] != float64(avroSchema.ID) || v["subject"] != "events-value" || v["schema_version"] != float64(1) {
		t.Fatalf("AVRO delivery report %v", body)
	}
	// AVRO by schema_id, without a type.
	produce("AVRO by id", map[string]any{"partition_id": 2, "value": map[string]any{"schema_id": avroSchema.ID, "data": map[string]any{"id": 7, "note": "two spoons"}}},
		nil, wire(avroSchema.ID, avroBytes))

	// PROTOBUF and JSONSCHEMA by subject and version.
	protoBytes := []byte{0x08, 0x07, 0x12, 0x03, 'p', 'b', '!'} // id=7, note="pb!"
	produce("PROTOBUF", map[string]any{"partition_id": 2, "value": map[string]any{"type": "PROTOBUF", "subject": "proto-value", "schema_version": 1,
		"data": map[string]any{"id": "7", "note": "pb!"}}}, nil, wire(protoSchema.ID, protoBytes, 0))
	produce("JSONSCHEMA", map[string]any{"partition_id": 2, "value": map[string]any{"type": "JSONSCHEMA", "subject": "json-value",
		"data": map[string]any{"id": 3}}}, nil, wire(jsonSchema.ID, []byte(`{"id":3}`)))

	// A key goes where a Kafka producer sends it (murmur2, as kgo's and Java's).
	keyed := produce("keyed", map[string]any{"key": map[string]any{"type": "STRING", "data": "customer-42"},
		"value": map[string]any{"type": "STRING", "data": "hello"}}, []byte("customer-42"), []byte("hello"))
	want := kgo.StickyKeyPartitioner(nil).ForTopic("events").Partition(&kgo.Record{Key: []byte("customer-42")}, 3)
	if keyed["partition_id"] != float64(want) {
		t.Fatalf("key customer-42 went to partition %v, a Kafka producer sends it to %d", keyed["partition_id"], want)
	}

	// Streamed: a chunked body of concatenated records, a report per record in order,
	// the bad one in the middle answered in its place.
	pr, pw := io.Pipe()
	go func() {
		for _, rec := range []string{
			`{"partition_id":1,"value":{"type":"STRING","data":"s1"}}`,
			`{"partition_id":1,"value":{"type":"AVRO","data":{"id":"not a number"}}}`,
			`{"partition_id":1,"value":{"type":"STRING","data":"s2"}}`,
		} {
			pw.Write([]byte(rec + "\n"))
		}
		pw.Close()
	}()
	req, _ := http.NewRequestWithContext(ctx, "POST", records, pr)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(resp.Body)
	var reports []map[string]any
	for {
		var m map[string]any
		if err := dec.Decode(&m); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		reports = append(reports, m)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || len(reports) != 3 || reports[0]["error_code"] != float64(200) || reports[1]["error_code"] != float64(42203) ||
		reports[2]["error_code"] != float64(200) || reports[2]["offset"].(float64) != reports[0]["offset"].(float64)+1 {
		t.Fatalf("streamed produce: %d %v", resp.StatusCode, reports)
	}
	for i, v := range []string{"s1", "s2"} {
		all = append(all, sent{partition: 1, offset: reports[2*i]["offset"].(float64), value: []byte(v), headers: map[string]string{}})
	}

	// Errors.
	st, body = proxyCall(t, "POST", cluster+"/topics/nope/records", map[string]any{"value": map[string]any{"type": "STRING", "data": "x"}})
	wantError(t, "produce to an unknown topic", st, body, 404, 40403)
	st, body = proxyCall(t, "POST", records, `{"value": {"type": "STRING", "data": `)
	wantError(t, "truncated record", st, body, 400, 400)
	st, body = proxyCall(t, "POST", records, map[string]any{"value": map[string]any{"type": "BINARY", "data": "not base64!"}})
	wantError(t, "BINARY data not base64", st, body, 400, 400)
	st, body = proxyCall(t, "POST", records, map[string]any{"value": map[string]any{"type": "AVRO", "data": map[string]any{"id": 1}}})
	wantError(t, "Avro data without a required field", st, body, 422, 42203)
	st, body = proxyCall(t, "POST", records, map[string]any{"value": map[string]any{"schema_id": 999, "data": 1}})
	wantError(t, "unknown schema id", st, body, 404, 40403)
	st, body = proxyCall(t, "POST", records, map[string]any{"partition_id": 9, "value": map[string]any{"type": "STRING", "data": "x"}})
	wantError(t, "unknown partition", st, body, 404, 40403)
	// A record the broker refuses: schema ID validation on the topic.
	if st, body = proxyCall(t, "POST", cluster+"/topics", map[string]any{"topic_name": "validated", "partitions_count": 1,
		"configs": []map[string]any{{"name": "confluent.value.schema.validation", "value": "true"}}}); st != 201 {
		t.Fatalf("create validated topic: %d %v", st, body)
	}
	st, body = proxyCall(t, "POST", cluster+"/topics/validated/records", map[string]any{"value": map[string]any{"type": "STRING", "data": "no schema id"}})
	if wantError(t, "unregistered payload", st, body, 400, 40002); !strings.Contains(body["message"].(string), "INVALID_RECORD") {
		t.Fatalf("unregistered payload: %v", body)
	}

	// A franz-go consumer reads the very bytes.
	cons := newClient(t, kgo.SeedBrokers(kafka), kgo.ConsumeTopics("events"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []*kgo.Record
	for len(got) < len(all) {
		fs := cons.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("consume: %v (have %d of %d)", err, len(got), len(all))
		}
		got = append(got, fs.Records()...)
	}
	for _, s := range all {
		var rec *kgo.Record
		for _, r := range got {
			if float64(r.Partition) == s.partition && float64(r.Offset) == s.offset {
				rec = r
			}
		}
		if rec == nil || !bytes.Equal(rec.Key, s.key) || !bytes.Equal(rec.Value, s.value) {
			t.Fatalf("record at %v/%v: consumed %+v, want key %q value %q", s.partition, s.offset, rec, s.key, s.value)
		}
		for k, v := range s.headers {
			if len(rec.Headers) != 1 || rec.Headers[0].Key != k || string(rec.Headers[0].Value) != v {
				t.Fatalf("headers %v, want %s=%s", rec.Headers, k, v)
			}
		}
		if bytes.Equal(s.value[:min(5, len(s.value))], wire(avroSchema.ID, nil)) {
			var serde sr.Serde
			serde.Register(avroSchema.ID, schemaOrder{},
				sr.EncodeFn(func(v any) ([]byte, error) { return avro.Marshal(schema, v) }),
				sr.DecodeFn(func(b []byte, v any) error { return avro.Unmarshal(schema, b, v) }))
			var o schemaOrder
			if err := serde.Decode(rec.Value, &o); err != nil || o != order {
				t.Fatalf("franz-go's serde decoded %+v, %v", o, err)
			}
		}
	}

	// Shale's own read: partition 2 holds the typed records, decoded by the registry.
	st, body = proxyCall(t, "GET", cluster+"/topics/events/partitions/2/records?offset=0&max_records=10&value_format=schema", nil)
	if st != 200 || body["kind"] != "KafkaRecordList" {
		t.Fatalf("read: %d %v", st, body)
	}
	data := body["data"].([]any)
	var types []string
	for _, d := range data {
		types = append(types, d.(map[string]any)["value"].(map[string]any)["type"].(string))
	}
	if strings.Join(types, ",") != "AVRO,AVRO,PROTOBUF,JSONSCHEMA" && !strings.HasPrefix(strings.Join(types, ","), "AVRO,AVRO,PROTOBUF,JSONSCHEMA") {
		t.Fatalf("read back types %v from %v", types, body)
	}
	first := data[0].(map[string]any)["value"].(map[string]any)
	if fmt.Sprint(first["data"]) != "map[id:7 note:two spoons]" || first["schema_id"] != float64(avroSchema.ID) {
		t.Fatalf("Avro read back as %v", first)
	}
	if pb := data[2].(map[string]any)["value"].(map[string]any); fmt.Sprint(pb["data"]) != "map[id:7 note:pb!]" {
		t.Fatalf("Protobuf read back as %v", pb)
	}
	// Partition 1: BINARY by default, headers, and max_records with next_offset.
	st, body = proxyCall(t, "GET", cluster+"/topics/events/partitions/1/records?max_records=1", nil)
	if st != 200 || len(body["data"].([]any)) != 1 || body["next_offset"] != float64(1) {
		t.Fatalf("read one: %d %v", st, body)
	}
	rec := body["data"].([]any)[0].(map[string]any)
	if v := rec["value"].(map[string]any); v["type"] != "BINARY" || v["data"] != base64.StdEncoding.EncodeToString([]byte{0, 1, 2, 255}) ||
		fmt.Sprint(rec["headers"]) != "[map[name:trace value:"+base64.StdEncoding.EncodeToString([]byte("abc"))+"]]" {
		t.Fatalf("read record %v", rec)
	}
	st, body = proxyCall(t, "GET", cluster+"/topics/events/partitions/1/records?offset=1&value_format=string", nil)
	if st != 200 || fmt.Sprint(body["data"]) == "" || len(body["data"].([]any)) != 2 || body["next_offset"] != float64(3) {
		t.Fatalf("read rest: %d %v", st, body)
	}
	if v := body["data"].([]any)[1].(map[string]any)["value"].(map[string]any); v["type"] != "STRING" || v["data"] != "s2" {
		t.Fatalf("read STRING %v", v)
	}
	st, body = proxyCall(t, "GET", cluster+"/topics/events/partitions/1/records?offset=3", nil)
	if st != 200 || len(body["data"].([]any)) != 0 || body["next_offset"] != float64(3) {
		t.Fatalf("read at the end: %d %v", st, body)
	}

	// Delete.
	if st, body = proxyCall(t, "DELETE", cluster+"/topics/events", nil); st != 204 {
		t.Fatalf("delete topic: %d %v", st, body)
	}
	st, body = proxyCall(t, "GET", cluster+"/topics/events", nil)
	wantError(t, "deleted topic", st, body, 404, 40403)
}

// On a node whose only Kafka listeners are SASL_SSL and mTLS, with an authorizer: the
// proxy reaches the broker with the inter-broker login, and authorizes the HTTP caller
// (ANONYMOUS here: the listener has no authentication of its own yet) with the ACLs.
func TestRESTProxyOnSecuredNodeWithACLs(t *testing.T) {
	proxy := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	n := startSecureNode(t, "--rest.proxy.listener="+proxy,
		"--authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer", "--super.users=User:admin")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n.addAlice(t, ctx, "secured")
	admin := n.saslClient(t, scram512("admin", "admin-secret"))

	st, body := proxyCall(t, "GET", "http://"+proxy+"/v3/clusters", nil)
	if st != 200 {
		t.Fatalf("clusters: %d %v", st, body)
	}
	cluster := "http://" + proxy + "/v3/clusters/" + body["data"].([]any)[0].(map[string]any)["cluster_id"].(string)
	if st, body := proxyCall(t, "GET", cluster+"/topics", nil); st != 200 || len(body["data"].([]any)) != 0 {
		t.Fatalf("ANONYMOUS lists topics it may not describe: %d %v", st, body)
	}
	rec := map[string]any{"value": map[string]any{"type": "STRING", "data": "through TLS and SASL"}}
	st, body = proxyCall(t, "POST", cluster+"/topics/secured/records", rec)
	wantError(t, "ANONYMOUS without an ACL", st, body, 403, 40301)

	if _, err := kadm.NewClient(admin).CreateACLs(ctx, kadm.NewACLs().Allow("User:ANONYMOUS").Topics("secured").Operations(kadm.OpWrite)); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, "the ACL lets ANONYMOUS write through the proxy", func() bool {
		st, _ := proxyCall(t, "POST", cluster+"/topics/secured/records", rec)
		return st == 200
	})
	cons := n.saslClient(t, scram512("admin", "admin-secret"), kgo.ConsumeTopics("secured"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fs := cons.PollRecords(ctx, 1)
	if err := fs.Err(); err != nil || len(fs.Records()) != 1 || string(fs.Records()[0].Value) != "through TLS and SASL" {
		t.Fatalf("consumed %v, %v", fs.Records(), err)
	}
	// WRITE does not give READ.
	st, body = proxyCall(t, "GET", cluster+"/topics/secured/partitions/0/records", nil)
	wantError(t, "ANONYMOUS reading without READ", st, body, 403, 40301)
}

// Reads return committed records only: nothing of an open transaction, and after it
// commits its records but not its marker.
func TestRESTProxyReadsCommittedRecords(t *testing.T) {
	kafka := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	proxy := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	var logs testutil.Buffer
	runNode(t, &logs, "--log.dirs="+filepath.Join(t.TempDir(), "data"), "--http.listener=", "--schema.registry.listener=",
		"--rest.proxy.listener="+proxy, "--listeners=PLAINTEXT://"+kafka)
	waitBroker(t, kafka)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(newClient(t, kgo.SeedBrokers(kafka))).CreateTopic(ctx, 1, 1, nil, "tx"); err != nil {
		t.Fatal(err)
	}
	var records string
	testutil.Eventually(t, 20*time.Second, "the proxy serves the topic", func() bool {
		st, body := proxyCall(t, "GET", "http://"+proxy+"/v3/clusters", nil)
		if st != 200 {
			return false
		}
		records = "http://" + proxy + "/v3/clusters/" + body["data"].([]any)[0].(map[string]any)["cluster_id"].(string) + "/topics/tx"
		st, _ = proxyCall(t, "GET", records, nil)
		return st == 200
	})
	if st, body := proxyCall(t, "POST", records+"/records", map[string]any{"value": map[string]any{"type": "STRING", "data": "plain"}}); st != 200 {
		t.Fatalf("produce: %d %v", st, body)
	}
	txp := newClient(t, kgo.SeedBrokers(kafka), kgo.TransactionalID("rest-proxy-test"), kgo.DefaultProduceTopic("tx"))
	if err := txp.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txp.ProduceSync(ctx, &kgo.Record{Value: []byte("in a transaction")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	read := func() []string {
		st, body := proxyCall(t, "GET", records+"/partitions/0/records?value_format=string", nil)
		if st != 200 {
			t.Fatalf("read: %d %v", st, body)
		}
		var out []string
		for _, d := range body["data"].([]any) {
			out = append(out, d.(map[string]any)["value"].(map[string]any)["data"].(string))
		}
		return out
	}
	if got := read(); fmt.Sprint(got) != "[plain]" {
		t.Fatalf("with a transaction open, read %q", got)
	}
	if err := txp.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "the committed transaction is read", func() bool {
		return fmt.Sprint(read()) == "[plain in a transaction]"
	})
}

// The proxy takes the registry's listener security under rest.proxy.*: over HTTPS with
// BASIC, a request without credentials or with a wrong password is refused with 401
// before any Kafka work, and a SCRAM user is authorized by the ACLs as its own principal
// (alice may write the topic once granted, ANONYMOUS is never seen).
func TestRESTProxyHTTPSBasicAuth(t *testing.T) {
	proxy := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	n := startSecureNode(t, "--rest.proxy.listener="+proxy, "--rest.proxy.ssl.enable=true",
		"--rest.proxy.authentication.method=BASIC",
		"--authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer", "--super.users=User:admin")
	ctx := ctxFor(t, 90*time.Second)
	n.addAlice(t, ctx, "basic")
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: n.clientTLS()}}
	call := func(method, url, user, password string, body any) (int, map[string]any) {
		t.Helper()
		var rd io.Reader
		if body != nil {
			js, _ := json.Marshal(body)
			rd = bytes.NewReader(js)
		}
		req, err := http.NewRequest(method, url, rd)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if user != "" {
			req.SetBasicAuth(user, password)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, nil
		}
		defer resp.Body.Close()
		out := map[string]any{}
		json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	base := "https://" + proxy + "/v3/clusters"
	var cluster string
	testutil.Eventually(t, 30*time.Second, "the proxy answers the super user over HTTPS", func() bool {
		st, body := call("GET", base, "admin", "admin-secret", nil)
		if st != 200 {
			return false
		}
		cluster = base + "/" + body["data"].([]any)[0].(map[string]any)["cluster_id"].(string)
		return true
	})
	for what, creds := range map[string][2]string{"no credentials": {}, "wrong password": {"alice", "bob-secret"}, "unknown user": {"mallory", "x"}} {
		if st, body := call("GET", cluster+"/topics", creds[0], creds[1], nil); st != 401 || body["error_code"] != float64(401) {
			t.Errorf("%s: answered %d %v, want 401", what, st, body)
		}
	}
	if resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + proxy + "/v3/clusters"); err == nil {
		if resp.StatusCode < 400 {
			t.Errorf("plain HTTP answered %d", resp.StatusCode)
		}
		resp.Body.Close()
	}
	rec := map[string]any{"value": map[string]any{"type": "STRING", "data": "as alice"}}
	st, body := call("POST", cluster+"/topics/basic/records", "alice", "alice-secret", rec)
	wantError(t, "alice without an ACL", st, body, 403, 40301)
	admin := n.saslClient(t, scram512("admin", "admin-secret"))
	if _, err := kadm.NewClient(admin).CreateACLs(ctx, kadm.NewACLs().Allow("User:alice").Topics("basic").Operations(kadm.OpWrite)); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, "the ACL lets alice write through the proxy", func() bool {
		st, _ := call("POST", cluster+"/topics/basic/records", "alice", "alice-secret", rec)
		return st == 200
	})
	if st, body := call("POST", cluster+"/topics/basic/records", "carol", "carol-secret", rec); st != 403 {
		t.Fatalf("carol (PLAIN, no ACL): answered %d %v, want 403", st, body)
	}
}
