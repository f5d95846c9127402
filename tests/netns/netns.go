// Package netns builds throwaway network namespaces for tests that run real processes: a
// bridge in the root namespace (the test's side), one namespace per process behind a veth
// on it, blackhole routes to cut links, and per-namespace /etc/hosts files so that
// processes inside resolve each other by name. It needs root and iproute2; New skips the
// test otherwise. Everything it creates carries the test process's pid, and a later run
// removes what a killed run left behind.
package netns

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// Names of everything the harness creates carry its pid, so that a later run can tell its
// own leftovers (from a run that was killed before its cleanup) from a live run's.
const (
	nsPrefix   = "shale-netns-" // namespaces: shale-netns-<pid>-<n>
	linkPrefix = "shc"          // links: shc<pid>b (bridge), shc<pid>v<n> (host end of a veth)
	subnetBase = "10.250."      // the /24 is 10.250.<x>.0/24
)

// Node is one network namespace with one address on the bridge.
type Node struct {
	N        int    // 1-based
	NS       string // the namespace's name, for ip netns exec
	IP       string
	hostVeth string
}

// Command runs name inside the namespace with `ip netns exec`, which execs the program:
// the child's pid is the program itself, so signals reach it directly.
func (nn *Node) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", nn.NS, name}, args...)...)
}

// Network is a bridge in the root namespace, the test client's side, and one namespace per
// process behind a veth on it. Partitions are blackhole routes: symmetric, because each cut
// is installed on both of its sides.
type Network struct {
	t        testing.TB
	prefix   string // "10.250.<x>."
	bridge   string
	BridgeIP string // the client's address, as the namespaces see it
	Nodes    []*Node

	mu     sync.Mutex
	routes []route // blackholes in force
}

// route is one blackhole route; ns "" is the root namespace.
type route struct{ ns, dst string }

func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func ipOut(args ...string) (string, error) {
	out, err := exec.Command("ip", args...).Output()
	if err != nil {
		return "", fmt.Errorf("ip %s: %w", strings.Join(args, " "), err)
	}
	return string(out), nil
}

// New builds count namespaces, or skips the test when this machine cannot (not root, no
// iproute2, no netns support). Cleanup removes them; register the processes' cleanup after
// calling New, so that they are stopped first.
func New(t testing.TB, count int) *Network {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("this test needs root to create network namespaces (ip netns add); skipping")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("this test needs iproute2's ip (tests/deps.sh installs it); skipping")
	}
	removeStale(t)
	pid := os.Getpid()
	nw := &Network{t: t, bridge: fmt.Sprintf("%s%db", linkPrefix, pid)}
	t.Cleanup(nw.teardown)

	x, err := freeSubnet(pid)
	if err != nil {
		t.Fatal(err)
	}
	nw.prefix = fmt.Sprintf("%s%d.", subnetBase, x)
	nw.BridgeIP = nw.prefix + "1"
	probe := fmt.Sprintf("%s%d-probe", nsPrefix, pid)
	if err := ipCmd("netns", "add", probe); err != nil {
		t.Skipf("cannot create network namespaces here (%v); skipping", err)
	}
	_ = ipCmd("netns", "del", probe)

	must := func(args ...string) {
		t.Helper()
		if err := ipCmd(args...); err != nil {
			t.Fatal(err)
		}
	}
	must("link", "add", nw.bridge, "type", "bridge")
	must("addr", "add", nw.BridgeIP+"/24", "dev", nw.bridge)
	must("link", "set", nw.bridge, "up")
	for n := 1; n <= count; n++ {
		nn := &Node{
			N:        n,
			NS:       fmt.Sprintf("%s%d-%d", nsPrefix, pid, n),
			IP:       fmt.Sprintf("%s%d", nw.prefix, 10+n),
			hostVeth: fmt.Sprintf("%s%dv%d", linkPrefix, pid, n),
		}
		nw.Nodes = append(nw.Nodes, nn)
		peer := fmt.Sprintf("%s%dp%d", linkPrefix, pid, n)
		must("netns", "add", nn.NS)
		must("link", "add", nn.hostVeth, "type", "veth", "peer", "name", peer)
		must("link", "set", peer, "netns", nn.NS)
		must("link", "set", nn.hostVeth, "master", nw.bridge)
		must("link", "set", nn.hostVeth, "up")
		must("-n", nn.NS, "link", "set", "lo", "up")
		must("-n", nn.NS, "addr", "add", nn.IP+"/24", "dev", peer)
		must("-n", nn.NS, "link", "set", peer, "up")
	}
	return nw
}

// freeSubnet picks x so that 10.250.x.0/24 appears in no address or route on the host.
func freeSubnet(pid int) (int, error) {
	addrs, err := ipOut("-o", "-4", "addr", "show")
	if err != nil {
		return 0, err
	}
	routes, err := ipOut("-4", "route", "show", "table", "all")
	if err != nil {
		return 0, err
	}
	start := 20 + pid%200
	for i := range 230 {
		x := 20 + (start-20+i)%230
		s := fmt.Sprintf("%s%d.", subnetBase, x)
		if !strings.Contains(addrs, s) && !strings.Contains(routes, s) {
			return x, nil
		}
	}
	return 0, errors.New("no free 10.250.x.0/24 subnet")
}

// removeStale deletes namespaces, links and root blackhole routes left by runs whose
// process is gone, killing any process still inside such a namespace.
func removeStale(t testing.TB) {
	t.Helper()
	alive := func(pid int) bool {
		if pid == os.Getpid() {
			return true
		}
		err := syscall.Kill(pid, 0)
		return err == nil || errors.Is(err, syscall.EPERM)
	}
	if out, err := ipOut("netns", "list"); err == nil {
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) == 0 || !strings.HasPrefix(f[0], nsPrefix) {
				continue
			}
			name := f[0]
			pidStr, _, _ := strings.Cut(strings.TrimPrefix(name, nsPrefix), "-")
			pid, err := strconv.Atoi(pidStr)
			if err != nil || alive(pid) {
				continue
			}
			if pids, err := ipOut("netns", "pids", name); err == nil {
				for _, p := range strings.Fields(pids) {
					if n, err := strconv.Atoi(p); err == nil {
						_ = syscall.Kill(n, syscall.SIGKILL)
					}
				}
			}
			t.Logf("removing stale namespace %s", name)
			_ = ipCmd("netns", "del", name)
		}
	}
	if out, err := ipOut("-o", "link", "show"); err == nil {
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
			if !strings.HasPrefix(name, linkPrefix) {
				continue
			}
			rest := strings.TrimPrefix(name, linkPrefix)
			end := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' })
			if end <= 0 || !strings.ContainsRune("bvp", rune(rest[end])) {
				continue
			}
			if pid, err := strconv.Atoi(rest[:end]); err == nil && !alive(pid) {
				t.Logf("removing stale link %s", name)
				_ = ipCmd("link", "del", name)
			}
		}
	}
	// A blackhole for 10.250.x.y whose /24 no interface holds any more is a leftover.
	if out, err := ipOut("-4", "route", "show", "type", "blackhole"); err == nil {
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) < 2 || f[0] != "blackhole" || !strings.HasPrefix(f[1], subnetBase) {
				continue
			}
			dst, _, _ := strings.Cut(f[1], "/")
			octets := strings.Split(dst, ".")
			if len(octets) != 4 {
				continue
			}
			held, err := ipOut("-o", "-4", "addr", "show", "to", strings.Join(octets[:3], ".")+".0/24")
			if err == nil && strings.TrimSpace(held) == "" {
				_ = ipCmd("route", "del", "blackhole", f[1])
			}
		}
	}
}

// Cut makes a and b unreachable from each other. A nil side is the test client (the root
// namespace).
func (nw *Network) Cut(a, b *Node) error {
	var rs []route
	switch {
	case a == nil && b == nil:
		return errors.New("cut: both sides are the client")
	case a == nil:
		rs = []route{{"", b.IP}, {b.NS, nw.BridgeIP}}
	case b == nil:
		rs = []route{{"", a.IP}, {a.NS, nw.BridgeIP}}
	default:
		rs = []route{{a.NS, b.IP}, {b.NS, a.IP}}
	}
	for _, r := range rs {
		args := []string{"route", "add", "blackhole", r.dst + "/32"}
		if r.ns != "" {
			args = append([]string{"-n", r.ns}, args...)
		}
		if err := ipCmd(args...); err != nil {
			return err
		}
		nw.mu.Lock()
		nw.routes = append(nw.routes, r)
		nw.mu.Unlock()
	}
	return nil
}

// Heal removes every cut.
func (nw *Network) Heal() error {
	nw.mu.Lock()
	rs := nw.routes
	nw.routes = nil
	nw.mu.Unlock()
	var errs []error
	for _, r := range rs {
		args := []string{"route", "del", "blackhole", r.dst + "/32"}
		if r.ns != "" {
			args = append([]string{"-n", r.ns}, args...)
		}
		if err := ipCmd(args...); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// teardown removes the routes, namespaces (which takes their veths along) and the bridge.
// Processes are killed before this runs (cleanups run last-registered first, and the
// cluster registers after the network); any still inside a namespace is killed here.
func (nw *Network) teardown() {
	if err := nw.Heal(); err != nil {
		nw.t.Logf("heal at teardown: %v", err)
	}
	for _, nn := range nw.Nodes {
		if pids, err := ipOut("netns", "pids", nn.NS); err == nil {
			for _, p := range strings.Fields(pids) {
				if n, err := strconv.Atoi(p); err == nil {
					nw.t.Logf("killing pid %d left in %s", n, nn.NS)
					_ = syscall.Kill(n, syscall.SIGKILL)
				}
			}
		}
		_ = os.RemoveAll(filepath.Join("/etc/netns", nn.NS))
		if err := ipCmd("netns", "del", nn.NS); err != nil {
			nw.t.Logf("teardown: %v", err)
		}
		_ = ipCmd("link", "del", nn.hostVeth) // normally gone with its peer's namespace
	}
	if err := ipCmd("link", "del", nw.bridge); err != nil {
		nw.t.Logf("teardown: %v", err)
	}
}

// SetHosts gives every namespace an /etc/hosts with these name -> address entries (and
// localhost): `ip netns exec` bind-mounts /etc/netns/NAME/hosts over /etc/hosts for the
// program it runs, which is how the processes resolve each other by name.
func (nw *Network) SetHosts(hosts map[string]string) error {
	var b strings.Builder
	b.WriteString("127.0.0.1\tlocalhost\n::1\tlocalhost\n")
	names := make([]string, 0, len(hosts))
	for name := range hosts {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		fmt.Fprintf(&b, "%s\t%s\n", hosts[name], name)
	}
	for _, nn := range nw.Nodes {
		dir := filepath.Join("/etc/netns", nn.NS)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("hosts for %s: %w", nn.NS, err)
		}
		if err := os.WriteFile(filepath.Join(dir, "hosts"), []byte(b.String()), 0o644); err != nil {
			return fmt.Errorf("hosts for %s: %w", nn.NS, err)
		}
	}
	return nil
}

var (
	spawnOnce sync.Once
	spawnReqs chan spawnReq
)

type spawnReq struct {
	cmd  *exec.Cmd
	done chan error
}

// Spawn starts cmd with SIGKILL as its parent-death signal, from a goroutine locked to its
// OS thread for good: the death signal follows the thread that forked, and Go ends a
// thread only when a goroutine locked to it exits, so that thread, and with it every
// child's parent-death signal, lasts exactly as long as the test binary. A test binary
// that dies before its cleanups leaves no process behind.
func Spawn(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	spawnOnce.Do(func() {
		spawnReqs = make(chan spawnReq)
		go func() {
			runtime.LockOSThread()
			for r := range spawnReqs {
				r.done <- r.cmd.Start()
			}
		}()
	})
	done := make(chan error, 1)
	spawnReqs <- spawnReq{cmd, done}
	return <-done
}
