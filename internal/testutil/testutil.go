// Package testutil holds helpers that tests across Shale's packages share.
package testutil

import (
	"testing"
	"time"
)

// pollInterval is how often Eventually checks: short beside any timeout a test gives,
// long enough not to starve the goroutines the condition waits on.
const pollInterval = 10 * time.Millisecond

// Eventually polls cond until it holds and fails the test if it does not within
// timeout; what names the awaited state in the failure.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(pollInterval)
	}
}
