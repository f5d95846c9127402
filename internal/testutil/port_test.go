package testutil

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// FreePort's ports are distinct, outside the kernel's ephemeral range, bindable, and
// locked against other test binaries.
func TestFreePortClaimsOutsideTheEphemeralRange(t *testing.T) {
	seen := map[int]bool{}
	for range 50 {
		p := FreePort(t)
		if seen[p] {
			t.Fatalf("port %d returned twice", p)
		}
		seen[p] = true
		if low := ephemeralLow(); low-lowestPort >= 1000 && (p < lowestPort || p >= low) {
			t.Fatalf("port %d is outside %d-%d", p, lowestPort, low-1)
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("port %d cannot be bound: %v", p, err)
		}
		ln.Close()
		// Another open file description is what another test binary would have.
		f, err := os.Open(filepath.Join(portLockDir(), strconv.Itoa(p)))
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
			t.Fatalf("port %d's lock could be taken again", p)
		}
		f.Close()
	}
}
