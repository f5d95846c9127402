package controller

import (
	"context"
	"testing"
	"time"

	"github.com/shalelog/shale/internal/testutil"
)

// A session that gives up before it is ready (its barrier not enqueued within the
// timeout on a loaded machine: raft.ErrEnqueueTimeout) while Raft stays leader used to
// stay in place for good: IsActive false, every broker call NOT_CONTROLLER, and
// controllertest.Start failing with "the controller did not become active in 30s".
func TestSessionThatGaveUpIsRestartedWhileLeader(t *testing.T) {
	checkNoGoroutineLeak(t)
	q := newTestQuorum(t, 1, nil)
	s := q.servers[q.leader()]

	// Leave s as runSession's early return does: the session still installed, its run
	// over, never ready.
	gaveUp := &leaderSession{ready: make(chan struct{}), done: make(chan struct{})}
	gaveUp.ctx, gaveUp.cancel = context.WithCancel(context.Background())
	close(gaveUp.done)
	s.sessMu.Lock()
	old := s.sess
	s.sess = gaveUp
	s.sessMu.Unlock()
	if old != nil {
		old.cancel()
		<-old.done
	}
	if s.IsActive() {
		t.Fatal("active with a session that never became ready")
	}

	testutil.Eventually(t, 20*time.Second, "a new active session", s.IsActive)
	if s.session() == gaveUp {
		t.Fatal("the session that gave up is still installed")
	}
}
