package testutil

import (
	"net"
	"testing"
)

// FreePort returns a loopback TCP port that was free a moment ago, for a process the test
// starts to listen on.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
