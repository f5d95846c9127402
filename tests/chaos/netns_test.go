package chaos

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// Names of everything the harness creates carry its pid, so that a later run can tell its
// own leftovers (from a run that was killed before its cleanup) from a live run's.
const (
	nsPrefix   = "shale-chaos-" // namespaces: shale-chaos-<pid>-<n>
	linkPrefix = "shc"          // links: shc<pid>b (bridge), shc<pid>v<n> (host end of a veth)
	subnetBase = "10.250."      // the /24 is 10.250.<x>.0/24
)

// netNode is one network namespace with one address on the harness's bridge.
type netNode struct {
	n        int
	ns       string
	ip       string
	hostVeth string
}

// network is a bridge in the root namespace, the test client's side, and one namespace per
// process behind a veth on it. Partitions are blackhole routes: symmetric, because each cut
// is installed on both of its sides.
type network struct {
	t        *testing.T
	prefix   string // "10.250.<x>."
	bridge   string
	bridgeIP string // the client's address, as the namespaces see it
	nodes    []*netNode

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

// newNetwork builds count namespaces, or skips the test when this machine cannot (not
// root, no iproute2, no netns support).
func newNetwork(t *testing.T, count int) *network {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("chaos tests need root to create network namespaces (ip netns add); skipping")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("chaos tests need iproute2's ip (tests/deps.sh installs it); skipping")
	}
	removeStale(t)
	pid := os.Getpid()
	nw := &network{t: t, bridge: fmt.Sprintf("%s%db", linkPrefix, pid)}
	t.Cleanup(nw.teardown)

	x, err := freeSubnet(pid)
	if err != nil {
		t.Fatal(err)
	}
	nw.prefix = fmt.Sprintf("%s%d.", subnetBase, x)
	nw.bridgeIP = nw.prefix + "1"
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
	must("addr", "add", nw.bridgeIP+"/24", "dev", nw.bridge)
	must("link", "set", nw.bridge, "up")
	for n := 1; n <= count; n++ {
		nn := &netNode{
			n:        n,
			ns:       fmt.Sprintf("%s%d-%d", nsPrefix, pid, n),
			ip:       fmt.Sprintf("%s%d", nw.prefix, 10+n),
			hostVeth: fmt.Sprintf("%s%dv%d", linkPrefix, pid, n),
		}
		nw.nodes = append(nw.nodes, nn)
		peer := fmt.Sprintf("%s%dp%d", linkPrefix, pid, n)
		must("netns", "add", nn.ns)
		must("link", "add", nn.hostVeth, "type", "veth", "peer", "name", peer)
		must("link", "set", peer, "netns", nn.ns)
		must("link", "set", nn.hostVeth, "master", nw.bridge)
		must("link", "set", nn.hostVeth, "up")
		must("-n", nn.ns, "link", "set", "lo", "up")
		must("-n", nn.ns, "addr", "add", nn.ip+"/24", "dev", peer)
		must("-n", nn.ns, "link", "set", peer, "up")
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
func removeStale(t *testing.T) {
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

// cut makes a and b unreachable from each other. A nil side is the test client (the root
// namespace).
func (nw *network) cut(a, b *netNode) error {
	var rs []route
	switch {
	case a == nil && b == nil:
		return errors.New("cut: both sides are the client")
	case a == nil:
		rs = []route{{"", b.ip}, {b.ns, nw.bridgeIP}}
	case b == nil:
		rs = []route{{"", a.ip}, {a.ns, nw.bridgeIP}}
	default:
		rs = []route{{a.ns, b.ip}, {b.ns, a.ip}}
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

// heal removes every cut.
func (nw *network) heal() error {
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
func (nw *network) teardown() {
	if err := nw.heal(); err != nil {
		nw.t.Logf("heal at teardown: %v", err)
	}
	for _, nn := range nw.nodes {
		if pids, err := ipOut("netns", "pids", nn.ns); err == nil {
			for _, p := range strings.Fields(pids) {
				if n, err := strconv.Atoi(p); err == nil {
					nw.t.Logf("killing pid %d left in %s", n, nn.ns)
					_ = syscall.Kill(n, syscall.SIGKILL)
				}
			}
		}
		if err := ipCmd("netns", "del", nn.ns); err != nil {
			nw.t.Logf("teardown: %v", err)
		}
		_ = ipCmd("link", "del", nn.hostVeth) // normally gone with its peer's namespace
	}
	if err := ipCmd("link", "del", nw.bridge); err != nil {
		nw.t.Logf("teardown: %v", err)
	}
}
