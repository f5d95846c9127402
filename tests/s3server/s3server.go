// Package s3server runs a real S3 server, versitygw with its POSIX backend, as a process
// of its own for the tiered-storage tests: on a free loopback port, over a temporary
// directory, with a bucket created, stopped (killed and waited for) when the test ends.
//
// The binary is built from the Go module proxy into ~/.cache/shale by
// build-versitygw.sh, which tests/deps.sh (make test) runs. Without it a test is
// skipped, except under CI=true, where a missing binary means deps.sh did not do its
// job and the test fails.
package s3server

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/shalelog/shale/internal/testutil"

	"github.com/shalelog/shale/tiered/objstore/s3"
)

// Version is the versitygw release the tests run; build-versitygw.sh's default.
const Version = "v1.8.0"

const (
	accessKey = "shale-test"
	secretKey = "shale-test-secret"
)

// Binary returns the path of versitygw: $SHALE_VERSITYGW, else what
// build-versitygw.sh cached ($SHALE_CACHE, else the user cache directory's shale/).
func Binary() string {
	if p := os.Getenv("SHALE_VERSITYGW"); p != "" {
		return p
	}
	cache := os.Getenv("SHALE_CACHE")
	if cache == "" {
		if d, err := os.UserCacheDir(); err == nil {
			cache = filepath.Join(d, "shale")
		}
	}
	return filepath.Join(cache, "versitygw-"+Version)
}

// Server is a running versitygw.
type Server struct {
	// Endpoint is its URL, http://HOST:PORT (HOST 127.0.0.1 unless StartOn says).
	Endpoint string
	// Bucket exists on it.
	Bucket string
	// Dir is the POSIX backend's root: a bucket is a directory in it.
	Dir string

	cmd    *exec.Cmd
	exited chan struct{}
	output *syncBuffer
	stop   sync.Once
}

// Start starts versitygw for t and creates Bucket ("shale"). It is stopped when t ends.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartOn(t, "127.0.0.1")
}

// StartOn is Start listening on host, an IP address of this machine: one that processes
// in other network namespaces reach (tests/netns's BridgeIP), say.
func StartOn(t testing.TB, host string) *Server {
	t.Helper()
	bin := Binary()
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("versitygw is not at %s: tests/deps.sh should have built it (tests/s3server/build-versitygw.sh)", bin)
		}
		t.Skipf("versitygw is not built (run tests/s3server/build-versitygw.sh, as make test does): %v", err)
	}
	var lastErr error
	// A port found free may be taken before versitygw binds it: try a few.
	for range 5 {
		s, err := start(t, bin, host)
		if err == nil {
			return s
		}
		lastErr = err
	}
	t.Fatalf("starting versitygw: %v", lastErr)
	return nil
}

func start(t testing.TB, bin, host string) (*Server, error) {
	port, err := freePort(host)
	if err != nil {
		return nil, err
	}
	root := t.TempDir()
	dir := filepath.Join(root, "data")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	s := &Server{Endpoint: "http://" + addr, Bucket: "shale", Dir: dir, exited: make(chan struct{}), output: &syncBuffer{}}
	// Metadata (etags, content types) goes to a sidecar directory rather than to
	// extended attributes, which tmpfs may not take.
	sidecar := filepath.Join(root, "meta")
	s.cmd = exec.Command(bin, "--port", addr, "--access", accessKey, "--secret", secretKey,
		"--quiet", "--health", "/health", "posix", "--sidecar", sidecar, dir)
	s.cmd.Stdout, s.cmd.Stderr = s.output, s.output
	if err := os.Mkdir(sidecar, 0o755); err != nil {
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	go func() {
		s.cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(s.Stop)
	if err := s.waitReady(); err != nil {
		s.Stop()
		return nil, fmt.Errorf("%w; its output:\n%s", err, s.output.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.NewStore(t, "").CreateBucket(ctx); err != nil {
		s.Stop()
		return nil, fmt.Errorf("%w; its output:\n%s", err, s.output.String())
	}
	return s, nil
}

// waitReady waits until the health endpoint answers, the process exits, or a generous
// time passes on a loaded machine.
func (s *Server) waitReady() error {
	client := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		resp, err := client.Get(s.Endpoint + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("health check: %s", resp.Status)
		}
		select {
		case <-s.exited:
			return fmt.Errorf("versitygw exited: %v", s.cmd.ProcessState)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("versitygw not ready after 2 minutes: %w", err)
		}
	}
}

// NewStore returns an S3 store on the server's bucket with keys under prefix.
func (s *Server) NewStore(t testing.TB, prefix string) *s3.Store {
	t.Helper()
	st, err := s3.New(s3.Config{
		Endpoint: s.Endpoint, Bucket: s.Bucket, Prefix: prefix, PathStyle: true,
		// The server speaks plain http, on the bridge address too (StartOn).
		AllowHTTP: true,
		Getenv: func(k string) string {
			return map[string]string{"AWS_ACCESS_KEY_ID": accessKey, "AWS_SECRET_ACCESS_KEY": secretKey}[k]
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// CredentialsFile writes the server's keys as an AWS shared-credentials file ([default]
// profile) in a temporary directory of t, for a process configured with
// remote.storage.s3.credentials.file, and returns its path.
func (s *Server) CredentialsFile(t testing.TB) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "credentials")
	body := "[default]\naws_access_key_id = " + accessKey + "\naws_secret_access_key = " + secretKey + "\n"
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Signal sends sig to the server process (SIGSTOP and SIGCONT make the store stall).
func (s *Server) Signal(sig os.Signal) error { return s.cmd.Process.Signal(sig) }

// Stop kills the server and waits for it to exit. Stopping twice is harmless.
func (s *Server) Stop() {
	s.stop.Do(func() {
		s.cmd.Process.Kill()
		<-s.exited
	})
}

// Exited is closed when the process has exited.
func (s *Server) Exited() <-chan struct{} { return s.exited }

func freePort(host string) (int, error) {
	return testutil.ReservePort(host)
}

// syncBuffer collects the process's output for failure messages.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Len() > 1<<20 {
		return len(p), nil
	}
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
