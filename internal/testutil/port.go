package testutil

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// Ports for the processes a test starts are a race: the port is free when it is chosen
// and taken only when the process binds it, a moment later. Two things can take it in
// between, and both failed CI runs ("bind: address already in use"):
//   - the kernel hands ports of its ephemeral range (net.ipv4.ip_local_port_range) to
//     outgoing connections and to binds of port 0, in this process and in every other
//     test binary that `go test ./...` runs beside it, such as the Raft connections of the
//     controllers a cluster test starts before its brokers;
//   - another test binary choosing the same port at the same time.
//
// So ports are chosen below the ephemeral range, where the kernel never hands one out by
// itself, and each is claimed with a lock file that this process holds until it exits.

// portLockDir holds one lock file per claimed port, shared by the test binaries of a run
// (they share TMPDIR).
func portLockDir() string { return filepath.Join(os.TempDir(), "shale-test-ports") }

// The ports below the ephemeral range that are tried; ports from 20000 stay clear of
// the fixed ones Shale's defaults and common services use.
const lowestPort = 20000

// claimed are the ports this process holds, with their lock files: the files stay open
// (and locked) until the process exits. A test binary is one process; the set is only
// ever added to, and it is the one piece of shared state here for that reason.
var claimed struct {
	sync.Mutex
	locks map[int]*os.File
	next  int
}

// FreePort returns a loopback TCP port for a process the test starts to listen on. No
// earlier call in any test binary of the run returned it, and the kernel does not hand
// it to an outgoing connection in the meantime.
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := ReservePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// ReservePort is FreePort for a host address, for helpers that run outside a test.
func ReservePort(host string) (int, error) {
	claimed.Lock()
	defer claimed.Unlock()
	if claimed.locks == nil {
		claimed.locks = map[int]*os.File{}
		claimed.next = os.Getpid() // spread the binaries' first tries
	}
	if err := os.MkdirAll(portLockDir(), 0o777); err != nil {
		return 0, fmt.Errorf("port lock directory: %w", err)
	}
	low, high := lowestPort, ephemeralLow()
	if high-low < 1000 {
		// The ephemeral range starts low: take the kernel's choice, still claimed.
		for range 1000 {
			port, err := kernelPort(host)
			if err != nil {
				return 0, err
			}
			if claimPort(host, port) {
				return port, nil
			}
		}
		return 0, errors.New("no free port could be claimed")
	}
	span := high - low
	for range span {
		claimed.next++
		port := low + claimed.next%span
		if claimPort(host, port) {
			return port, nil
		}
	}
	return 0, fmt.Errorf("no free port in %d-%d", low, high-1)
}

// claimPort locks port's file and checks that the port can be bound now. The caller
// holds claimed.
func claimPort(host string, port int) bool {
	if claimed.locks[port] != nil {
		return false
	}
	f, err := os.OpenFile(filepath.Join(portLockDir(), strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return false
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return false
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		f.Close() // in use by something that does not claim ports
		return false
	}
	ln.Close()
	claimed.locks[port] = f
	return true
}

func kernelPort(host string) (int, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// ephemeralLow is the first port of the kernel's ephemeral range (32768 by default).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return 32768
	}
	n, err := strconv.Atoi(fields[0])
	if err != nil {
		return 32768
	}
	return n
}
