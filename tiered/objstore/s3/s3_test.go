package s3

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/shalelog/shale/tiered/objstore"
	"github.com/shalelog/shale/tiered/objstore/objstoretest"
)

// fakeServer starts gofakes3, in memory, on a loopback httptest server.
func fakeServer(t *testing.T) string {
	t.Helper()
	faker := gofakes3.New(s3mem.New())
	srv := httptest.NewServer(faker.Server())
	t.Cleanup(srv.Close)
	return srv.URL
}

func testEnv(k string) string {
	return map[string]string{"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "secret"}[k]
}

func TestConformanceAgainstGofakes3(t *testing.T) {
	url := fakeServer(t)
	s, err := New(Config{Endpoint: url, Bucket: "shale", PathStyle: true, Prefix: "cluster-a", Getenv: testEnv})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateBucket(context.Background()); err != nil {
		t.Fatal(err)
	}
	objstoretest.Run(t, func(*testing.T) objstore.Store { return s }, objstoretest.Options{})
}

// The prefix keeps two stores on one bucket apart.
func TestPrefixSeparatesStores(t *testing.T) {
	ctx := context.Background()
	url := fakeServer(t)
	a, err := New(Config{Endpoint: url, Bucket: "bkt", PathStyle: true, Prefix: "a/", Getenv: testEnv})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(Config{Endpoint: url, Bucket: "bkt", PathStyle: true, Prefix: "b", Getenv: testEnv})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.CreateBucket(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Put(ctx, "k", strings.NewReader("a"), 1); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Head(ctx, "k"); err == nil {
		t.Fatal("store b sees store a's key")
	}
	objs, err := a.List(ctx, "")
	if err != nil || len(objs) != 1 || objs[0].Key != "k" {
		t.Fatalf("store a lists %+v, %v", objs, err)
	}
}

func TestConfigChecks(t *testing.T) {
	dir := t.TempDir()
	creds := filepath.Join(dir, "credentials")
	if err := os.WriteFile(creds, []byte("[default]\naws_access_key_id = A\naws_secret_access_key = S\n\n[other]\naws_access_key_id=B\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	noEnv := func(string) string { return "" }
	for _, tc := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"loopback http", Config{Endpoint: "http://127.0.0.1:9000", Bucket: "b", Getenv: testEnv}, true},
		{"localhost http", Config{Endpoint: "http://localhost:9000", Bucket: "b", Getenv: testEnv}, true},
		{"remote http", Config{Endpoint: "http://s3.example.com", Bucket: "b", Getenv: testEnv}, false},
		{"remote http allowed", Config{Endpoint: "http://s3.example.com", Bucket: "b", AllowHTTP: true, Getenv: testEnv}, true},
		{"https", Config{Endpoint: "https://s3.example.com", Bucket: "b", Getenv: testEnv}, true},
		{"no bucket", Config{Endpoint: "https://s3.example.com", Getenv: testEnv}, false},
		{"bad scheme", Config{Endpoint: "ftp://s3.example.com", Bucket: "b", Getenv: testEnv}, false},
		{"no credentials", Config{Endpoint: "https://s3.example.com", Bucket: "b", Getenv: noEnv}, false},
		{"credentials file", Config{Endpoint: "https://s3.example.com", Bucket: "b", CredentialsFile: creds, Getenv: noEnv}, true},
		{"incomplete profile", Config{Endpoint: "https://s3.example.com", Bucket: "b", CredentialsFile: creds, Profile: "other", Getenv: noEnv}, false},
		{"missing profile", Config{Endpoint: "https://s3.example.com", Bucket: "b", CredentialsFile: creds, Profile: "none", Getenv: noEnv}, false},
		{"missing file", Config{Endpoint: "https://s3.example.com", Bucket: "b", CredentialsFile: creds + ".x", Getenv: noEnv}, false},
		{"bad CA file", Config{Endpoint: "https://s3.example.com", Bucket: "b", CAFile: creds, Getenv: testEnv}, false},
	} {
		_, err := New(tc.cfg)
		if (err == nil) != tc.ok {
			t.Errorf("%s: New: %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
	c, err := readCredentialsFile(creds, "default")
	if err != nil || c.AccessKeyID != "A" || c.SecretAccessKey != "S" {
		t.Fatalf("credentials file read as %+v, %v", c, err)
	}
}
