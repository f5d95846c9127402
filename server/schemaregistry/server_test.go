package schemaregistry

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/shalelog/shale/controller/controllertest"
)

// registry starts the real controller in memory and this package's handlers over its
// broker client, as a broker runs them.
type registry struct {
	t   *testing.T
	url string
	// other is a second broker's registry on the same quorum.
	other string
}

func newRegistry(t *testing.T) *registry {
	n := controllertest.Start(t)
	srv := httptest.NewServer(New(Options{Images: n.Broker, Store: n.Broker}).Handler())
	t.Cleanup(srv.Close)
	b2 := n.AddBroker(2, "127.0.0.1", 9093)
	srv2 := httptest.NewServer(New(Options{Images: b2, Store: b2}).Handler())
	t.Cleanup(srv2.Close)
	return &registry{t: t, url: srv.URL, other: srv2.URL}
}

// do sends a request and decodes the answer; it checks the status.
func (r *registry) do(method, path string, body any, wantStatus int) any {
	r.t.Helper()
	return r.doAt(r.url, method, path, body, wantStatus)
}

func (r *registry) doAt(base, method, path string, body any, wantStatus int) any {
	r.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, base+path, rd)
	req.Header.Set("Content-Type", "application/vnd.schemaregistry.v1+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != wantStatus {
		r.t.Fatalf("%s %s: status %d (%s), want %d", method, path, resp.StatusCode, raw, wantStatus)
	}
	if ct := resp.Header.Get("Content-Type"); ct != contentType {
		r.t.Fatalf("%s %s: content type %q", method, path, ct)
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		return string(raw) // raw schemas
	}
	return out
}

// fail checks a Confluent error answer.
func (r *registry) fail(method, path string, body any, code int) {
	r.t.Helper()
	out := r.do(method, path, body, status(code))
	m, _ := out.(map[string]any)
	if got, _ := m["error_code"].(float64); int(got) != code || m["message"] == "" {
		r.t.Fatalf("%s %s: %v, want error_code %d", method, path, out, code)
	}
}

// readAt waits until a GET on base answers want. A broker's image follows the
// controller's log: a write made through another broker is committed there before this
// broker's image shows it, as a Confluent follower's store follows _schemas. Only the
// writer's own broker promises read-your-writes.
func (r *registry) readAt(base, path, want string) {
	r.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := js(r.doAt(base, "GET", path, nil, 200))
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("GET %s: %s, want %s", path, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func decoded(s string) any {
	var v any
	_ = json.Unmarshal([]byte(s), &v)
	return v
}

func js(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

const (
	userV1 = `{"type":"record","name":"User","fields":[{"name":"name","type":"string"}]}`
	// userV2 adds a field with a default: backward compatible.
	userV2 = `{"type":"record","name":"User","fields":[{"name":"name","type":"string"},{"name":"age","type":"int","default":0}]}`
	// userBad adds a field without one.
	userBad = `{"type":"record","name":"User","fields":[{"name":"name","type":"string"},{"name":"email","type":"string"}]}`
)

func TestRegisterAndRead(t *testing.T) {
	r := newRegistry(t)
	if got := js(r.do("GET", "/subjects", nil, 200)); got != `[]` {
		t.Fatalf("subjects %s", got)
	}
	if got := js(r.do("POST", "/subjects/users-value/versions", map[string]any{"schema": userV1}, 200)); got != `{"id":1}` {
		t.Fatalf("register %s", got)
	}
	// Whitespace does not make another schema; the same schema elsewhere keeps its id.
	if got := js(r.do("POST", "/subjects/users-value/versions", map[string]any{"schema": "  " + userV1 + "\n"}, 200)); got != `{"id":1}` {
		t.Fatalf("re-register %s", got)
	}
	if got := js(r.do("POST", "/subjects/other-value/versions", map[string]any{"schema": userV1}, 200)); got != `{"id":1}` {
		t.Fatalf("other subject %s", got)
	}
	if got := js(r.do("POST", "/subjects/users-value/versions", map[string]any{"schema": userV2}, 200)); got != `{"id":2}` {
		t.Fatalf("v2 %s", got)
	}
	r.fail("POST", "/subjects/users-value/versions", map[string]any{"schema": userBad}, 409)
	// Writes through one broker are read from another.
	r.readAt(r.other, "/subjects", `["other-value","users-value"]`)
	if got := js(r.do("GET", "/subjects/users-value/versions", nil, 200)); got != `[1,2]` {
		t.Fatalf("versions %s", got)
	}
	for _, v := range []string{"latest", "-1", "2"} {
		got := r.do("GET", "/subjects/users-value/versions/"+v, nil, 200).(map[string]any)
		if got["id"].(float64) != 2 || got["version"].(float64) != 2 || got["subject"] != "users-value" || got["schema"] != userV2 {
			t.Fatalf("version %s: %v", v, got)
		}
		if _, ok := got["schemaType"]; ok {
			t.Fatalf("Avro answered with a schemaType: %v", got)
		}
	}
	if got := r.do("GET", "/subjects/users-value/versions/1/schema", nil, 200); js(got) != js(decoded(userV1)) {
		t.Fatalf("raw schema %v", got)
	}
	if got := r.do("GET", "/schemas/ids/1", nil, 200).(map[string]any); got["schema"] != userV1 {
		t.Fatalf("by id %v", got)
	}
	if got := js(r.do("GET", "/schemas/ids/1/versions", nil, 200)); got != `[{"subject":"other-value","version":1},{"subject":"users-value","version":1}]` {
		t.Fatalf("id versions %s", got)
	}
	if got := js(r.do("GET", "/schemas/ids/1/subjects", nil, 200)); got != `["other-value","users-value"]` {
		t.Fatalf("id subjects %s", got)
	}
	if got := r.do("GET", "/schemas/ids/2/schema", nil, 200); js(got) != js(decoded(userV2)) {
		t.Fatalf("raw by id %v", got)
	}
	if got := js(r.do("GET", "/schemas/types", nil, 200)); got != `["JSON","PROTOBUF","AVRO"]` {
		t.Fatalf("types %s", got)
	}
	got := r.do("POST", "/subjects/users-value", map[string]any{"schema": userV1}, 200).(map[string]any)
	if got["id"].(float64) != 1 || got["version"].(float64) != 1 {
		t.Fatalf("lookup %v", got)
	}
	r.fail("POST", "/subjects/users-value", map[string]any{"schema": userBad}, 40403)
	r.fail("POST", "/subjects/nope", map[string]any{"schema": userV1}, 40401)
	r.fail("GET", "/subjects/nope/versions", nil, 40401)
	r.fail("GET", "/subjects/users-value/versions/7", nil, 40402)
	r.fail("GET", "/subjects/users-value/versions/abc", nil, 42202)
	r.fail("GET", "/subjects/users-value/versions/0", nil, 42202)
	r.fail("GET", "/schemas/ids/99", nil, 40403)
	r.fail("GET", "/schemas/ids/x", nil, 40403)
	r.fail("POST", "/subjects/s/versions", map[string]any{"schema": `{"type":"record"}`}, 42201)
	r.fail("POST", "/subjects/s/versions", map[string]any{"schema": `"int"`, "schemaType": "XML"}, 42201)
	r.fail("POST", "/subjects/s/versions", map[string]any{"schema": ""}, 42201)
	// Explicit ids belong to IMPORT mode.
	r.fail("POST", "/subjects/s/versions", map[string]any{"schema": `"int"`, "id": 50}, 42205)
}

func TestUnsupportedContentType(t *testing.T) {
	r := newRegistry(t)
	resp, err := http.Post(r.url+"/subjects/s/versions", "text/plain", strings.NewReader(`{"schema":"\"int\""}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 415 {
		t.Fatalf("status %d, want 415", resp.StatusCode)
	}
	// The other two media types Confluent accepts.
	for _, ct := range []string{"application/json", "application/vnd.schemaregistry+json"} {
		resp, err := http.Post(r.url+"/subjects/s/versions", ct, strings.NewReader(`{"schema":"\"int\""}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: status %d", ct, resp.StatusCode)
		}
	}
}

func TestConfigModeAndCompatibility(t *testing.T) {
	r := newRegistry(t)
	if got := js(r.do("GET", "/config", nil, 200)); got != `{"compatibilityLevel":"BACKWARD"}` {
		t.Fatalf("default config %s", got)
	}
	r.do("POST", "/subjects/u/versions", map[string]any{"schema": userV1}, 200)
	r.fail("GET", "/config/u", nil, 40408)
	if got := js(r.do("GET", "/config/u?defaultToGlobal=true", nil, 200)); got != `{"compatibilityLevel":"BACKWARD"}` {
		t.Fatalf("defaultToGlobal %s", got)
	}
	r.fail("PUT", "/config", map[string]any{"compatibility": "SIDEWAYS"}, 42203)
	if got := js(r.do("PUT", "/config/u", map[string]any{"compatibility": "forward"}, 200)); got != `{"compatibility":"FORWARD"}` {
		t.Fatalf("put config %s", got)
	}
	// FORWARD: old readers must read the new schema. Dropping a field without a default
	// in v1 breaks that; adding one does not.
	check := func(schema string) map[string]any {
		return r.do("POST", "/compatibility/subjects/u/versions/latest?verbose=true", map[string]any{"schema": schema}, 200).(map[string]any)
	}
	if got := check(userBad); got["is_compatible"] != true {
		t.Fatalf("forward check of an added field: %v", got)
	}
	dropped := `{"type":"record","name":"User","fields":[{"name":"age","type":"int","default":0}]}`
	if got := check(dropped); got["is_compatible"] != false || len(got["messages"].([]any)) == 0 {
		t.Fatalf("forward check of a dropped field: %v", got)
	}
	if got := r.do("POST", "/compatibility/subjects/u/versions", map[string]any{"schema": dropped}, 200).(map[string]any); got["is_compatible"] != false {
		t.Fatalf("check against all: %v", got)
	}
	if _, ok := r.do("POST", "/compatibility/subjects/u/versions/1", map[string]any{"schema": userBad}, 200).(map[string]any)["messages"]; ok {
		t.Fatal("messages without verbose")
	}
	r.fail("POST", "/compatibility/subjects/nope/versions/latest", map[string]any{"schema": userV1}, 40401)
	if got := js(r.do("DELETE", "/config/u", nil, 200)); got != `{"compatibilityLevel":"FORWARD"}` {
		t.Fatalf("delete config %s", got)
	}
	r.fail("GET", "/config/u", nil, 40408)

	// Modes.
	if got := js(r.do("GET", "/mode", nil, 200)); got != `{"mode":"READWRITE"}` {
		t.Fatalf("mode %s", got)
	}
	r.fail("PUT", "/mode", map[string]any{"mode": "SLEEPY"}, 42204)
	r.do("PUT", "/mode/u", map[string]any{"mode": "READONLY"}, 200)
	r.fail("POST", "/subjects/u/versions", map[string]any{"schema": userV2}, 42205)
	r.fail("DELETE", "/subjects/u", nil, 42205)
	r.fail("GET", "/mode/v", nil, 40409)
	if got := js(r.do("GET", "/mode/v?defaultToGlobal=true", nil, 200)); got != `{"mode":"READWRITE"}` {
		t.Fatalf("mode defaultToGlobal %s", got)
	}
	r.do("DELETE", "/mode/u", nil, 200)
	r.do("POST", "/subjects/u/versions", map[string]any{"schema": userV2}, 200)
	// IMPORT needs an empty registry unless forced.
	r.fail("PUT", "/mode", map[string]any{"mode": "IMPORT"}, 42205)
	r.do("PUT", "/mode?force=true", map[string]any{"mode": "IMPORT"}, 200)
	if got := js(r.do("POST", "/subjects/imported/versions", map[string]any{"schema": userBad, "id": 42, "version": 3}, 200)); got != `{"id":42}` {
		t.Fatalf("import %s", got)
	}
	got := r.do("GET", "/subjects/imported/versions/latest", nil, 200).(map[string]any)
	if got["id"].(float64) != 42 || got["version"].(float64) != 3 {
		t.Fatalf("imported %v", got)
	}
	r.fail("POST", "/subjects/imported2/versions", map[string]any{"schema": userV1, "id": 42}, 42205)
	r.do("PUT", "/mode", map[string]any{"mode": "READWRITE"}, 200)
	if got := js(r.do("POST", "/subjects/fresh/versions", map[string]any{"schema": `"string"`}, 200)); got != `{"id":43}` {
		t.Fatalf("id after import %s", got)
	}
}

func TestDeletes(t *testing.T) {
	r := newRegistry(t)
	r.do("POST", "/subjects/d/versions", map[string]any{"schema": userV1}, 200)
	r.do("POST", "/subjects/d/versions", map[string]any{"schema": userV2}, 200)
	r.fail("DELETE", "/subjects/d/versions/1?permanent=true", nil, 40407)
	if got := js(r.do("DELETE", "/subjects/d/versions/1", nil, 200)); got != `1` {
		t.Fatalf("delete version %s", got)
	}
	r.fail("DELETE", "/subjects/d/versions/1", nil, 40406)
	if got := js(r.do("GET", "/subjects/d/versions", nil, 200)); got != `[2]` {
		t.Fatalf("versions %s", got)
	}
	if got := js(r.do("GET", "/subjects/d/versions?deleted=true", nil, 200)); got != `[1,2]` {
		t.Fatalf("versions with deleted %s", got)
	}
	// A soft-deleted schema is still served by id: records carry it.
	r.do("GET", "/schemas/ids/1", nil, 200)
	r.do("GET", "/subjects/d/versions/1?deleted=true", nil, 200)
	r.fail("GET", "/subjects/d/versions/1", nil, 40402)
	r.fail("DELETE", "/subjects/d?permanent=true", nil, 40405)
	if got := js(r.do("DELETE", "/subjects/d", nil, 200)); got != `[2]` {
		t.Fatalf("delete subject %s", got)
	}
	if got := js(r.do("GET", "/subjects", nil, 200)); got != `[]` {
		t.Fatalf("subjects %s", got)
	}
	if got := js(r.do("GET", "/subjects?deleted=true", nil, 200)); got != `["d"]` {
		t.Fatalf("subjects with deleted %s", got)
	}
	r.fail("DELETE", "/subjects/d", nil, 40404)
	if got := js(r.do("DELETE", "/subjects/d?permanent=true", nil, 200)); got != `[1,2]` {
		t.Fatalf("permanent delete %s", got)
	}
	r.fail("GET", "/schemas/ids/1", nil, 40403)
	r.fail("DELETE", "/subjects/d", nil, 40401)
	// Ids are not reused: a new schema gets 3.
	if got := js(r.do("POST", "/subjects/d/versions", map[string]any{"schema": `"int"`}, 200)); got != `{"id":3}` {
		t.Fatalf("after delete %s", got)
	}
}

func TestReferences(t *testing.T) {
	r := newRegistry(t)
	r.do("POST", "/subjects/common.proto/versions", map[string]any{"schemaType": "PROTOBUF",
		"schema": "syntax = \"proto3\";\npackage common;\nmessage Money { int64 cents = 1; }\n"}, 200)
	order := "syntax = \"proto3\";\npackage shop;\nimport \"common.proto\";\nmessage Order { common.Money total = 1; }\n"
	refs := []map[string]any{{"name": "common.proto", "subject": "common.proto", "version": 1}}
	if got := js(r.do("POST", "/subjects/orders-value/versions", map[string]any{"schemaType": "PROTOBUF", "schema": order, "references": refs}, 200)); got != `{"id":2}` {
		t.Fatalf("register with reference %s", got)
	}
	got := r.do("GET", "/subjects/orders-value/versions/1", nil, 200).(map[string]any)
	if got["schemaType"] != "PROTOBUF" || js(got["references"]) != `[{"name":"common.proto","subject":"common.proto","version":1}]` {
		t.Fatalf("version with references %v", got)
	}
	if got := js(r.do("GET", "/subjects/common.proto/versions/1/referencedby", nil, 200)); got != `[2]` {
		t.Fatalf("referencedby %s", got)
	}
	// Without the reference the import does not resolve.
	r.fail("POST", "/subjects/x/versions", map[string]any{"schemaType": "PROTOBUF", "schema": order}, 42201)
	r.fail("DELETE", "/subjects/common.proto/versions/1", nil, 42206)
	// Avro and JSON Schema references.
	r.do("POST", "/subjects/addr/versions", map[string]any{"schema": `{"type":"record","name":"Address","namespace":"x","fields":[{"name":"city","type":"string"}]}`}, 200)
	r.do("POST", "/subjects/person/versions", map[string]any{
		"schema":     `{"type":"record","name":"Person","namespace":"x","fields":[{"name":"home","type":"x.Address"}]}`,
		"references": []map[string]any{{"name": "x.Address", "subject": "addr", "version": 1}}}, 200)
	r.do("POST", "/subjects/jaddr/versions", map[string]any{"schemaType": "JSON", "schema": `{"type":"object","properties":{"city":{"type":"string"}}}`}, 200)
	r.do("POST", "/subjects/jperson/versions", map[string]any{"schemaType": "JSON",
		"schema":     `{"type":"object","properties":{"home":{"$ref":"address.json"}}}`,
		"references": []map[string]any{{"name": "address.json", "subject": "jaddr", "version": 1}}}, 200)
}

// Registrations racing on two brokers each get their own version: a write whose check
// saw an outdated subject is refused by the controller and checked again, never lost
// or given a version twice.
func TestConcurrentRegistrations(t *testing.T) {
	r := newRegistry(t)
	const n = 8
	errs := make(chan error, n)
	for i := range n {
		base := r.url
		if i%2 == 1 {
			base = r.other
		}
		go func() {
			// Each adds a different optional field: compatible with every other version.
			schema := fmt.Sprintf(`{"type":"record","name":"C","fields":[{"name":"f%d","type":"int","default":0}]}`, i)
			b, _ := json.Marshal(map[string]any{"schema": schema})
			resp, err := http.Post(base+"/subjects/c/versions", "application/json", bytes.NewReader(b))
			if err == nil {
				if resp.StatusCode != 200 {
					raw, _ := io.ReadAll(resp.Body)
					err = fmt.Errorf("status %d: %s", resp.StatusCode, raw)
				}
				resp.Body.Close()
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	r.readAt(r.url, "/subjects/c/versions", `[1,2,3,4,5,6,7,8]`)
	ids := map[float64]bool{}
	for v := 1; v <= n; v++ {
		ids[r.do("GET", fmt.Sprintf("/subjects/c/versions/%d", v), nil, 200).(map[string]any)["id"].(float64)] = true
	}
	if len(ids) != n {
		t.Fatalf("%d distinct ids for %d schemas", len(ids), n)
	}
}

// Malformed requests get Confluent error codes, never a 500.
func TestBadRequests(t *testing.T) {
	r := newRegistry(t)
	for _, body := range []string{`{"schema": 5}`, `[]`, `not json`, `{"schema":"\"int\"","references":[{"name":"x","subject":"nope","version":1}]}`,
		`{"schema":"\"int\"","references":[{"name":"x","subject":"nope","version":-7}]}`, `{"schema":"{\"type\":\"array\"}"}`} {
		resp, err := http.Post(r.url+"/subjects/s/versions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct {
			Code int `json:"error_code"`
		}
		if resp.StatusCode < 400 || resp.StatusCode >= 500 || json.Unmarshal(raw, &e) != nil || e.Code == 0 {
			t.Errorf("%s: %d %s", body, resp.StatusCode, raw)
		}
	}
	r.fail("PUT", "/config", map[string]any{}, 42203)
	r.fail("PUT", "/mode", map[string]any{}, 42204)
	r.fail("DELETE", "/subjects/s/versions/latest", nil, 40401)
	r.fail("DELETE", "/config/nope", nil, 40401)
	r.fail("DELETE", "/mode/nope", nil, 40409)
}
