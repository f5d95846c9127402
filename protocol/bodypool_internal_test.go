package protocol

import (
	"testing"
)

// TestBodyPoolClasses checks that a recycled buffer is only handed out for a body it
// can hold, whatever its capacity.
func TestBodyPoolClasses(t *testing.T) {
	for _, c := range []int{minPooledBody, minPooledBody + 1, 100 << 10, 1 << 20, 3 << 20, maxPooledBody} {
		putBody(make([]byte, 7, c))
		for _, n := range []int{minPooledBody, c / 2, c - 1, c, c + 1, 2 * c} {
			b := getBody(n)
			if b == nil {
				continue
			}
			if len(b) != n || cap(b) < n {
				t.Fatalf("put cap %d, get(%d) = len %d cap %d", c, n, len(b), cap(b))
			}
			putBody(b)
		}
	}
	if b := getBody(minPooledBody - 1); b != nil {
		t.Fatalf("small body %d came from the pool", len(b))
	}
	if b := getBody(maxPooledBody + 1); b != nil {
		t.Fatalf("huge body %d came from the pool", len(b))
	}
}

// TestRecyclableKeys checks that only Produce bodies are recycled.
func TestRecyclableKeys(t *testing.T) {
	if !recyclable(0) {
		t.Fatal("Produce bodies should be recycled")
	}
	for _, key := range []int16{1, 11, 14, 36} { // Fetch, JoinGroup, SyncGroup, SaslAuthenticate keep slices
		if recyclable(key) {
			t.Fatalf("key %d must not be recycled: its handler may keep slices of the body", key)
		}
	}
}

// TestBodyCapReused checks that a buffer allocated for a body (when the pool had none)
// is handed out again for a body of the same size: without that, bodies whose size is
// not a power of two never came back from the pool. (The race detector makes sync.Pool
// drop some puts at random, hence several tries.)
func TestBodyCapReused(t *testing.T) {
	for _, n := range []int{minPooledBody + 1, 100_000, 1_000_100, maxPooledBody} {
		var got []byte
		for try := 0; try < 50 && got == nil; try++ {
			putBody(make([]byte, n, bodyCap(n)))
			got = getBody(n)
		}
		if got == nil {
			t.Fatalf("a body of %d bytes never got its buffer back", n)
		}
		if len(got) != n {
			t.Fatalf("got %d bytes, want %d", len(got), n)
		}
	}
}
