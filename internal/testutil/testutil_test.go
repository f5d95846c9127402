package testutil

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestEventually(t *testing.T) {
	var n atomic.Int32
	Eventually(t, 10*time.Second, "three polls", func() bool { return n.Add(1) == 3 })
	if n.Load() != 3 {
		t.Fatalf("cond ran %d times", n.Load())
	}
}
