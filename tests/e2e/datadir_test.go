package e2e

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shalelog/shale/internal/testutil"
)

// TestSecondServeOnSameDirFailsFast: a second `shale serve` on a data directory in use
// exits at once with an error naming the process that holds it, instead of blocking on
// the Raft store's lock; once the first stops, the directory is free again.
func TestSecondServeOnSameDirFailsFast(t *testing.T) {
	first := newNode(t)
	first.start()

	var stderr bytes.Buffer
	second := exec.Command(shaleBin, "serve",
		"--node.id=1",
		"--log.dirs="+filepath.Join(first.dir, "data"),
		fmt.Sprintf("--listeners=PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", testutil.FreePort(t), testutil.FreePort(t)),
		"--schema.registry.listener=", "--rest.proxy.listener=", "--http.listener=",
	)
	second.Stderr = &stderr
	start := time.Now()
	if err := second.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- second.Wait() }()
	select {
	case err := <-done:
		took := time.Since(start)
		if err == nil {
			t.Fatalf("second serve exited 0; stderr:\n%s", stderr.String())
		}
		if took > time.Second {
			t.Errorf("second serve took %v to fail, want under 1s", took)
		}
	case <-time.After(time.Second):
		second.Process.Kill()
		<-done
		t.Fatalf("second serve still running 1s after start; stderr:\n%s", stderr.String())
	}
	msg := stderr.String()
	wantPID := "pid " + strconv.Itoa(first.cmd.Process.Pid) + ")"
	if !strings.Contains(msg, "is in use by another shale process") || !strings.Contains(msg, wantPID) {
		t.Fatalf("second serve's error does not name the holder (%s):\n%s", wantPID, msg)
	}

	if err := first.terminate(); err != nil {
		t.Fatalf("first serve: %v\n%s", err, first.log())
	}
	first.start() // the same directory, free again after a clean stop
}
