package testutil

import (
	"net"
	"sync"
	"testing"
)

// handedOut are the ports FreePort has returned in this process. The kernel may give the
// same free port to two binds in a row once the first is closed, and a test that asks
// for two ports and gets one twice fails on its own listeners ("use the same port"), so
// FreePort never returns a port twice. A test binary is one process; the set is only
// ever added to, and it is the one piece of shared state here for that reason.
var handedOut struct {
	sync.Mutex
	ports map[int]bool
}

// FreePort returns a loopback TCP port that was free a moment ago and that no earlier
// call in this process returned, for a process the test starts to listen on.
func FreePort(t testing.TB) int {
	t.Helper()
	handedOut.Lock()
	defer handedOut.Unlock()
	if handedOut.ports == nil {
		handedOut.ports = map[int]bool{}
	}
	for {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		if !handedOut.ports[port] {
			handedOut.ports[port] = true
			return port
		}
	}
}
