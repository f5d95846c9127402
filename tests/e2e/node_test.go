// Package e2e runs the shale binary as a real process and checks what a user would:
// data acknowledged before a kill -9 survives a restart, SIGTERM shuts down cleanly,
// and memory stays bounded under a long produce.
package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shalelog/shale/internal/testutil"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var shaleBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "shale-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	shaleBin = filepath.Join(dir, "shale")
	build := exec.Command("go", "build", "-o", shaleBin, "github.com/shalelog/shale/cmd/shale")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build shale:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// node is one `shale serve` process.
type node struct {
	t       *testing.T
	dir     string
	port    int
	ctlPort int
	cmd     *exec.Cmd
	logPath string
	extra   []string
}

func newNode(t *testing.T, extra ...string) *node {
	return &node{t: t, dir: t.TempDir(), port: testutil.FreePort(t), ctlPort: testutil.FreePort(t), extra: extra}
}

func (n *node) addr() string { return "127.0.0.1:" + strconv.Itoa(n.port) }

func (n *node) start() {
	n.t.Helper()
	args := append([]string{"serve",
		"--node.id=1",
		"--log.dirs=" + filepath.Join(n.dir, "data"),
		fmt.Sprintf("--listeners=PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", n.port, n.ctlPort),
		"--schema.registry.listener=", "--rest.proxy.listener=", "--http.listener=",
		"--num.partitions=3",
	}, n.extra...)
	n.cmd = exec.Command(shaleBin, args...)
	n.logPath = filepath.Join(n.dir, fmt.Sprintf("shale-%d.log", time.Now().UnixNano()))
	f, err := os.Create(n.logPath)
	if err != nil {
		n.t.Fatal(err)
	}
	n.cmd.Stdout, n.cmd.Stderr = f, f
	if err := n.cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	f.Close()
	n.t.Cleanup(func() {
		if n.cmd != nil && n.cmd.ProcessState == nil {
			n.cmd.Process.Kill()
			n.cmd.Wait()
		}
	})
	n.waitReady()
}

// waitReady waits until the broker answers Metadata with itself as a broker.
func (n *node) waitReady() {
	n.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr()), kgo.RequestRetries(0))
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
			cancel()
			cl.Close()
			if err == nil && len(resp.Brokers) > 0 {
				return
			}
		}
		if n.cmd.ProcessState != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	n.t.Fatalf("shale did not become ready; log:\n%s", n.log())
}

func (n *node) log() string {
	b, _ := os.ReadFile(n.logPath)
	return string(b)
}

func (n *node) kill9() {
	n.t.Helper()
	n.cmd.Process.Signal(syscall.SIGKILL)
	n.cmd.Wait()
}

func (n *node) terminate() error {
	n.t.Helper()
	n.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- n.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		n.cmd.Process.Kill()
		return fmt.Errorf("shale did not exit within 30s of SIGTERM")
	}
}

// rssAnon reads the process's anonymous resident memory (heap, stacks), leaving out
// the page cache that the mmap'd segments map into it.
func (n *node) rssAnon() int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", n.cmd.Process.Pid))
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "RssAnon:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return -1
}
