package interop

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bufbuild/protocompile"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"
)

// Schema registry clients against the target's built-in registry (README "Schema
// registry"). Each script registers a schema per type (Avro, JSON Schema, Protobuf),
// evolves it once compatibly and once incompatibly, produces a record with each accepted
// version and consumes and deserializes them; see python/confluent_sr.py and
// node/schema_registry.js. The test then checks what the script reports against the
// registry's REST API and the raw records.

// registryTypes are the schema types every registry client runs, in Confluent's names.
var registryTypes = []string{"AVRO", "JSON", "PROTOBUF"}

// registryScriptSpec is what a registry script reads from the file named by its last
// argument.
type registryScriptSpec struct {
	Bootstrap   string   `json:"bootstrap"`
	RegistryURL string   `json:"registry_url"`
	TopicPrefix string   `json:"topic_prefix"`
	TimeoutMs   int64    `json:"timeout_ms"`
	Types       []string `json:"types"`
}

// registryTypeDone is the line a script prints when it has finished one type.
type registryTypeDone struct {
	Event   string  `json:"event"`
	Type    string  `json:"type"`
	Topic   string  `json:"topic"`
	Subject string  `json:"subject"`
	IDs     []int   `json:"ids"`
	Values  []any   `json:"values"`
	Bad     badInfo `json:"incompatible"`
}

type badInfo struct {
	Status int `json:"status"`
	// Code is Confluent's error_code, where the client exposes it.
	Code    int    `json:"code"`
	Message string `json:"message"`
	// Producer, where the script also tried the incompatible schema through its
	// serializer, says what happened ("refused: ..." or "produced").
	Producer string `json:"producer"`
}

// TestSchemaRegistryConfluentKafkaPython: confluent-kafka-python 1.7 (Debian's
// python3-confluent-kafka). Avro uses the legacy confluent_kafka.avro AvroProducer and
// AvroConsumer with Apache's python3-avro, because the current AvroSerializer needs
// fastavro, which Debian does not package; JSON and Protobuf use the current
// JSONSerializer and ProtobufSerializer with SerializingProducer and DeserializingConsumer.
func TestSchemaRegistryConfluentKafkaPython(t *testing.T) {
	t.Parallel()
	missing := ""
	for _, m := range []string{"confluent_kafka", "requests", "avro", "jsonschema", "google.protobuf"} {
		if why := pythonModuleMissing(m)(); why != "" {
			missing = why
			break
		}
	}
	script, err := filepath.Abs(filepath.Join("python", "confluent_sr.py"))
	if err != nil {
		t.Fatal(err)
	}
	runRegistryClient(t, "confluent-kafka-python", missing, true,
		[]string{"PYTHONDONTWRITEBYTECODE=1"}, debianPython, "-u", "-B", script)
}

// TestSchemaRegistryKafkaJS: npm's @kafkajs/confluent-schema-registry encodes and
// decodes; kafkajs produces and consumes.
func TestSchemaRegistryKafkaJS(t *testing.T) {
	t.Parallel()
	nodeDir, err := filepath.Abs("node")
	if err != nil {
		t.Fatal(err)
	}
	missing := kafkajsMissing(nodeDir)()
	if missing == "" {
		if _, err := os.Stat(filepath.Join(nodeDir, "node_modules", "@kafkajs", "confluent-schema-registry", "package.json")); err != nil {
			missing = "@kafkajs/confluent-schema-registry not installed in tests/interop/node/node_modules"
		}
	}
	runRegistryClient(t, "@kafkajs/confluent-schema-registry", missing, false,
		[]string{"KAFKAJS_NO_PARTITIONER_WARNING=1"}, "node", filepath.Join(nodeDir, "schema_registry.js"))
}

func runRegistryClient(t *testing.T, name, missing string, hasErrorCode bool, env []string, argv ...string) {
	if target.registryURL == "" {
		t.Skipf("target %s has no schema registry (set %s with %s)", target.name, envRegistryURL, envBootstrap)
	}
	if missing != "" {
		// tests/deps.sh installs every client, as for the client matrix.
		t.Fatalf("%s is not installed: %s (run `bash tests/deps.sh`)", name, missing)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	prefix := fmt.Sprintf("sr-%s-%d", strings.NewReplacer("@", "", "/", "-").Replace(name), time.Now().UnixNano())
	spec := registryScriptSpec{
		Bootstrap:   target.bootstrap,
		RegistryURL: target.registryURL,
		TopicPrefix: prefix,
		TimeoutMs:   scriptTimeout(ctx).Milliseconds(),
		Types:       registryTypes,
	}
	data, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	specPath := filepath.Join(t.TempDir(), "spec.json")
	if err := os.WriteFile(specPath, data, 0o644); err != nil {
		t.Fatal(err)
	}
	done := map[string]registryTypeDone{}
	stderr, err := runLines(ctx, env, append(argv, specPath), nil, func(line []byte) error {
		var ev registryTypeDone
		if err := json.Unmarshal(line, &ev); err != nil {
			return fmt.Errorf("unparseable line %q: %w", line, err)
		}
		if ev.Event != "type_done" {
			return fmt.Errorf("unknown event in %q", line)
		}
		done[ev.Type] = ev
		return nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv(envTrace) != "" {
		t.Logf("stderr:\n%s", stderr)
	}
	for _, typ := range registryTypes {
		t.Run(typ, func(t *testing.T) {
			ev, ok := done[typ]
			if !ok {
				t.Fatalf("the script reported nothing for %s", typ)
			}
			checkRegistryType(ctx, t, ev, hasErrorCode)
		})
	}
}

// registryUser is the record every script writes: v1 has name only, v2 adds age (read as
// 0 where absent).
type registryUser struct {
	Name string `json:"name"`
	Age  int    `json:"age"`
}

func checkRegistryType(ctx context.Context, t *testing.T, ev registryTypeDone, hasErrorCode bool) {
	if len(ev.IDs) != 2 || ev.IDs[0] <= 0 || ev.IDs[1] <= 0 || ev.IDs[0] == ev.IDs[1] {
		t.Fatalf("ids %v: want two different positive ids for v1 and v2", ev.IDs)
	}
	// The incompatible change: 409 with Confluent's error code 409, and no version 3.
	if ev.Bad.Status != http.StatusConflict {
		t.Errorf("incompatible schema: status %d (%s), want 409", ev.Bad.Status, ev.Bad.Message)
	}
	if hasErrorCode && ev.Bad.Code != 409 {
		t.Errorf("incompatible schema: error_code %d, want 409", ev.Bad.Code)
	}
	if ev.Bad.Producer != "" && !strings.HasPrefix(ev.Bad.Producer, "refused") {
		t.Errorf("serializer with the incompatible schema: %s, want refused", ev.Bad.Producer)
	}
	var versions []int
	registryGet(ctx, t, "/subjects/"+url.PathEscape(ev.Subject)+"/versions", &versions)
	if !slices.Equal(versions, []int{1, 2}) {
		t.Errorf("versions of %s: %v, want [1 2]", ev.Subject, versions)
	}
	for i, id := range ev.IDs {
		var v struct {
			ID         int    `json:"id"`
			Version    int    `json:"version"`
			SchemaType string `json:"schemaType"`
			Schema     string `json:"schema"`
		}
		registryGet(ctx, t, fmt.Sprintf("/subjects/%s/versions/%d", url.PathEscape(ev.Subject), i+1), &v)
		if v.ID != id {
			t.Errorf("%s version %d has id %d, the client was given %d", ev.Subject, i+1, v.ID, id)
		}
		// Confluent leaves schemaType out for Avro.
		if want := strings.TrimPrefix(ev.Type, "AVRO"); v.SchemaType != want {
			t.Errorf("%s version %d: schemaType %q, want %q", ev.Subject, i+1, v.SchemaType, want)
		}
		var byID struct {
			Schema string `json:"schema"`
		}
		registryGet(ctx, t, fmt.Sprintf("/schemas/ids/%d", id), &byID)
		if byID.Schema != v.Schema {
			t.Errorf("/schemas/ids/%d differs from %s version %d", id, ev.Subject, i+1)
		}
		if ev.Type == "PROTOBUF" {
			checkProtobufForms(ctx, t, id, v.Schema)
		}
	}

	// What the client decoded: both records, whatever partitions they landed on.
	var got []registryUser
	for _, raw := range ev.Values {
		b, _ := json.Marshal(raw)
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.DisallowUnknownFields()
		var u registryUser
		if err := dec.Decode(&u); err != nil {
			t.Fatalf("decoded value %s: %v", b, err)
		}
		got = append(got, u)
	}
	slices.SortFunc(got, func(a, b registryUser) int { return strings.Compare(a.Name, b.Name) })
	if want := []registryUser{{"ada", 0}, {"bob", 7}}; !slices.Equal(got, want) {
		t.Errorf("decoded %v, want %v", got, want)
	}

	// The records on the wire: Confluent's framing, magic byte 0 and the big-endian id of
	// the version each was written with.
	cl, err := kgo.NewClient(kgo.SeedBrokers(target.seeds...), kgo.ConsumeTopics(ev.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	seen := map[int]bool{}
	deadline := time.Now().Add(20 * time.Second)
	n := 0
	for n < 2 && time.Now().Before(deadline) {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		fetches := cl.PollFetches(pctx)
		cancel()
		fetches.EachRecord(func(r *kgo.Record) {
			n++
			if len(r.Value) < 5 || r.Value[0] != 0 {
				t.Errorf("record %s/%d@%d: %x does not start with magic byte 0 and an id", r.Topic, r.Partition, r.Offset, r.Value)
				return
			}
			seen[int(binary.BigEndian.Uint32(r.Value[1:5]))] = true
		})
	}
	if n != 2 {
		t.Fatalf("read %d records from %s, want 2", n, ev.Topic)
	}
	if !seen[ev.IDs[0]] || !seen[ev.IDs[1]] || len(seen) != 2 {
		t.Errorf("records carry ids %v, want %v", seen, ev.IDs)
	}
}

// registryGet GETs path from the target's registry into out, failing the test on any
// status but 200.
func registryGet(ctx context.Context, t *testing.T, path string, out any) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target.registryURL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", path, resp.Status, body)
	}
	if err := json.Unmarshal(body, out); err != nil {
		t.Fatalf("GET %s: %s: %v", path, body, err)
	}
}

// checkProtobufForms: whatever form the client registered a Protobuf schema in (the
// Python serializer sends a base64 FileDescriptorProto, kafkajs .proto source), the
// registry serves .proto source that protocompile compiles, and the descriptor form on
// ?format=serialized, as Confluent's registry does.
func checkProtobufForms(ctx context.Context, t *testing.T, id int, text string) {
	t.Helper()
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
		Accessor: protocompile.SourceAccessorFromMap(map[string]string{"user.proto": text})})}
	files, err := c.Compile(ctx, "user.proto")
	if err != nil {
		t.Errorf("schema %d is served as %q, which does not compile as .proto source: %v", id, text, err)
		return
	}
	var ser struct {
		Schema string `json:"schema"`
	}
	registryGet(ctx, t, fmt.Sprintf("/schemas/ids/%d?format=serialized", id), &ser)
	raw, err := base64.StdEncoding.DecodeString(ser.Schema)
	var fd descriptorpb.FileDescriptorProto
	if err == nil {
		err = proto.Unmarshal(raw, &fd)
	}
	if err != nil {
		t.Errorf("schema %d with format=serialized: %q: %v", id, ser.Schema, err)
		return
	}
	want := files[0].Messages().Get(0)
	if len(fd.MessageType) != 1 || fd.MessageType[0].GetName() != string(want.Name()) || len(fd.MessageType[0].Field) != want.Fields().Len() {
		t.Errorf("schema %d with format=serialized is %v, the text defines %s with %d fields", id, &fd, want.FullName(), want.Fields().Len())
	}
}
