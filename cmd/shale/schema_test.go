package main

import (
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shalelog/shale/internal/testutil"
)

const (
	avroUserV1 = `{"type":"record","name":"User","fields":[{"name":"name","type":"string"}]}`
	// avroUserV2 adds a field with a default: backward compatible.
	avroUserV2 = `{"type":"record","name":"User","fields":[{"name":"name","type":"string"},{"name":"age","type":"int","default":0}]}`
	// avroUserBad adds a field without one: not backward compatible.
	avroUserBad = `{"type":"record","name":"User","fields":[{"name":"name","type":"string"},{"name":"email","type":"string"}]}`
)

// Every shale schema subcommand against the registry of a real node, and the node's
// /metrics counting the requests they made.
func TestSchemaCommands(t *testing.T) {
	regPort, httpPort := testutil.FreePort(t), testutil.FreePort(t)
	startServe(t, fmt.Sprintf("--schema.registry.listener=127.0.0.1:%d", regPort), fmt.Sprintf("--http.listener=127.0.0.1:%d", httpPort))
	ru := fmt.Sprintf("--registry-url=http://127.0.0.1:%d", regPort)
	dir := t.TempDir()
	file := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// fails runs a command that must exit with code and print want on stderr.
	fails := func(code int, want, stdin string, args ...string) result {
		t.Helper()
		r := shale(t, stdin, args...)
		if r.code != code || !strings.Contains(r.stderr, want) {
			t.Errorf("shale %s: exit %d, stderr %q; want exit %d and %q", strings.Join(args, " "), r.code, r.stderr, code, want)
		}
		return r
	}

	if got := must(t, "", "schema", "list", ru); got != "" {
		t.Fatalf("list of an empty registry: %q", got)
	}
	if got := must(t, avroUserV1, "schema", "register", ru, "--subject", "users-value"); got != "Subject users-value version 1: schema id 1.\n" {
		t.Errorf("register printed %q", got)
	}
	if got := must(t, avroUserV1, "schema", "register", ru, "users-value"); got != "Subject users-value version 1: schema id 1.\n" {
		t.Errorf("registering the same schema again printed %q", got)
	}
	if got := must(t, "", "schema", "register", ru, "--subject", "users-value", "--file", file("v2.avsc", avroUserV2)); got != "Subject users-value version 2: schema id 2.\n" {
		t.Errorf("register --file printed %q", got)
	}

	// check: exit 3 and the reasons when incompatible.
	r := shale(t, avroUserBad, "schema", "check", ru, "--subject", "users-value")
	if r.code != exitIncompatible || !strings.HasPrefix(r.stdout, "incompatible\n  ") || !strings.Contains(r.stdout, "email") {
		t.Errorf("check of an incompatible schema: %+v", r)
	}
	if got := must(t, avroUserV1, "schema", "check", ru, "--subject", "users-value", "--version", "1"); got != "compatible\n" {
		t.Errorf("check against version 1: %q", got)
	}
	if got := must(t, "", "schema", "check", ru, "--subject", "users-value", "--all", "--file", file("v2b.avsc", avroUserV2)); got != "compatible\n" {
		t.Errorf("check --all: %q", got)
	}
	fails(exitFailed, "SUBJECT_NOT_FOUND (40401): Subject 'nope' not found.", avroUserV1, "schema", "check", ru, "--subject", "nope")
	// register: the registry's refusals, named.
	fails(exitIncompatible, "INCOMPATIBLE_SCHEMA (409)", avroUserBad, "schema", "register", ru, "--subject", "users-value")
	fails(exitFailed, "INVALID_SCHEMA (42201)", `{"type":"record"`, "schema", "register", ru, "--subject", "broken")

	// References, Avro and Protobuf; latest resolves to a version number.
	must(t, `{"type":"record","name":"Address","namespace":"x","fields":[{"name":"city","type":"string"}]}`,
		"schema", "register", ru, "--subject", "addr")
	must(t, `{"type":"record","name":"Person","namespace":"x","fields":[{"name":"home","type":"x.Address"}]}`,
		"schema", "register", ru, "--subject", "person-value", "--reference", "x.Address=addr:latest")
	must(t, "syntax = \"proto3\";\npackage common;\nmessage Money { int64 cents = 1; }\n", "schema", "register", ru,
		"--subject", "common.proto", "--type", "protobuf")
	must(t, "syntax = \"proto3\";\npackage shop;\nimport \"common.proto\";\nmessage Order { common.Money total = 1; }\n",
		"schema", "register", ru, "--subject", "orders-value", "--type", "PROTOBUF", "--reference", "common.proto=common.proto:1")
	if got := lines(must(t, "", "schema", "get", ru, "--subject", "orders-value")); len(got) < 3 ||
		got[0] != "Subject: orders-value\tVersion: 1\tID: 6\tType: PROTOBUF" || got[1] != "Reference: common.proto=common.proto:1" {
		t.Errorf("get orders-value: %q", got)
	}
	if got := must(t, "", "schema", "list", ru, "--subject", "person-value"); !strings.Contains(got, "x.Address=addr:1") {
		t.Errorf("list --subject person-value: %q", got)
	}
	fails(exitUsage, "not name=subject:version", avroUserV1, "schema", "register", ru, "--subject", "s", "--reference", "x.Address")
	fails(exitUsage, "is not AVRO, PROTOBUF or JSON", avroUserV1, "schema", "register", ru, "--subject", "s", "--type", "xml")

	// get and list.
	if got := must(t, "", "schema", "get", ru, "--subject", "users-value"); got != "Subject: users-value\tVersion: 2\tID: 2\tType: AVRO\n"+avroUserV2+"\n" {
		t.Errorf("get latest: %q", got)
	}
	if got := must(t, "", "schema", "get", ru, "users-value", "--version", "1", "--schema-only"); got != avroUserV1+"\n" {
		t.Errorf("get --version 1 --schema-only: %q", got)
	}
	if got := must(t, "", "schema", "get", ru, "--id", "1"); got != "ID: 1\tType: AVRO\tVersions: users-value/1\n"+avroUserV1+"\n" {
		t.Errorf("get --id 1: %q", got)
	}
	fails(exitFailed, "SUBJECT_NOT_FOUND (40401)", "", "schema", "get", ru, "--subject", "nope")
	fails(exitFailed, "VERSION_NOT_FOUND (40402)", "", "schema", "get", ru, "--subject", "users-value", "--version", "9")
	fails(exitFailed, "SCHEMA_NOT_FOUND (40403)", "", "schema", "get", ru, "--id", "99")
	fails(exitUsage, "not both", "", "schema", "get", ru)
	fails(exitUsage, "is not a version", "", "schema", "get", ru, "--subject", "users-value", "--version", "0")
	if got := must(t, "", "schema", "list", ru); got != "addr\ncommon.proto\norders-value\nperson-value\nusers-value\n" {
		t.Errorf("list: %q", got)
	}
	if got := must(t, "", "schema", "list", ru, "--prefix", "user"); got != "users-value\n" {
		t.Errorf("list --prefix user: %q", got)
	}
	if got := lines(must(t, "", "schema", "list", ru, "--subject", "users-value")); len(got) != 3 || !strings.HasPrefix(got[2], "2        2   AVRO") {
		t.Errorf("list --subject users-value: %q", got)
	}

	// config: global, then a subject's own level and mode.
	if got := must(t, "", "schema", "config", ru); got != "Compatibility: BACKWARD\nMode: READWRITE\n" {
		t.Errorf("config: %q", got)
	}
	if got := must(t, "", "schema", "config", ru, "--subject", "users-value"); got != "Subject: users-value\nCompatibility: BACKWARD (global)\nMode: READWRITE (global)\n" {
		t.Errorf("config --subject: %q", got)
	}
	if got := must(t, "", "schema", "config", ru, "--subject", "users-value", "--compatibility", "none"); got != "Subject: users-value\nCompatibility: NONE\nMode: READWRITE (global)\n" {
		t.Errorf("config --compatibility none: %q", got)
	}
	if got := must(t, avroUserBad, "schema", "register", ru, "--subject", "users-value"); got != "Subject users-value version 3: schema id 7.\n" {
		t.Errorf("register under NONE: %q", got)
	}
	if got := must(t, "", "schema", "config", ru, "users-value", "--reset"); !strings.Contains(got, "Compatibility: BACKWARD (global)") {
		t.Errorf("config --reset: %q", got)
	}
	fails(exitFailed, "(42203)", "", "schema", "config", ru, "--compatibility", "sideways")
	must(t, "", "schema", "config", ru, "--mode", "READONLY")
	fails(exitFailed, "(42205)", avroUserV1, "schema", "register", ru, "--subject", "other")
	if got := must(t, "", "schema", "config", ru, "--mode", "readwrite"); got != "Compatibility: BACKWARD\nMode: READWRITE\n" {
		t.Errorf("config --mode readwrite: %q", got)
	}
	fails(exitFailed, "(42205)", "", "schema", "config", ru, "--mode", "IMPORT") // the registry has schemas
	fails(exitUsage, "--force goes with --mode IMPORT", "", "schema", "config", ru, "--force")

	// delete: a version, then the subject for good (soft first, by the CLI).
	if got := must(t, "", "schema", "delete", ru, "--subject", "users-value", "--version", "1"); got != "Soft-deleted version 1 of users-value.\n" {
		t.Errorf("delete --version 1: %q", got)
	}
	if got := lines(must(t, "", "schema", "list", ru, "--subject", "users-value", "--deleted")); len(got) != 4 {
		t.Errorf("list --deleted after deleting version 1: %q", got)
	}
	if got := must(t, "", "schema", "delete", ru, "users-value", "--permanent"); got != "Permanently deleted users-value: versions 1, 2, 3.\n" {
		t.Errorf("delete --permanent: %q", got)
	}
	if got := must(t, "", "schema", "list", ru, "--deleted", "--prefix", "users"); got != "" {
		t.Errorf("users-value is still listed after a permanent delete: %q", got)
	}
	fails(exitFailed, "REFERENCE_EXISTS (42206)", "", "schema", "delete", ru, "--subject", "addr", "--version", "1")
	fails(exitUsage, "name the subject", "", "schema", "delete", ru)

	// The node's /metrics counted these requests by route pattern.
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", httpPort))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`shale_schema_registry_requests_total{code="200",endpoint="/subjects/{subject}/versions",method="POST"}`,
		`shale_schema_registry_requests_total{code="409",endpoint="/subjects/{subject}/versions",method="POST"}`,
		`shale_schema_registry_requests_total{code="404",endpoint="/subjects/{subject}/versions/{version}",method="GET"}`,
		`shale_schema_registry_request_duration_seconds_count{endpoint="/config",method="GET"}`,
		"shale_schema_registry_subjects 4",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// The connection flags: basic authentication and a CA for https, and how errors that
// are not Confluent's JSON are printed.
func TestSchemaRegistryConnection(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "alice" || p != "secret" {
			w.Header().Set("WWW-Authenticate", `Basic realm="Schema Registry"`)
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
		fmt.Fprint(w, `["orders-value"]`)
	}))
	t.Cleanup(srv.Close)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	ru := "--registry-url=" + srv.URL
	if got := must(t, "", "schema", "list", ru, "--ca-file", ca, "--user", "alice", "--password", "secret"); got != "orders-value\n" {
		t.Errorf("list over https with basic auth: %q", got)
	}
	r := shale(t, "", "schema", "list", ru, "--ca-file", ca, "--user", "alice", "--password", "wrong")
	if r.code != exitFailed || !strings.Contains(r.stderr, "HTTP 401 Unauthorized from GET") {
		t.Errorf("wrong password: %+v", r)
	}
	r = shale(t, "", "schema", "list", ru) // the system's CAs do not know the test server's
	if r.code != exitFailed || !strings.Contains(r.stderr, "certificate") {
		t.Errorf("without --ca-file: %+v", r)
	}
	if r := shale(t, "", "schema", "list", "--registry-url=ftp://x"); r.code != exitUsage {
		t.Errorf("an ftp URL: %+v", r)
	}
	if r := shale(t, "", "schema", "list", ru, "--password", "p"); r.code != exitUsage || !strings.Contains(r.stderr, "--password needs --user") {
		t.Errorf("--password without --user: %+v", r)
	}
	// Nothing listening: exit 1 with the reason.
	r = shale(t, "", "schema", "list", fmt.Sprintf("--registry-url=http://127.0.0.1:%d", testutil.FreePort(t)))
	if r.code != exitFailed || !strings.Contains(r.stderr, "connection refused") {
		t.Errorf("no registry: %+v", r)
	}
}
