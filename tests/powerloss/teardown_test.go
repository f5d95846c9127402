package powerloss

import (
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shalelog/shale/tests/powerloss/lazyfs"
	"github.com/shalelog/shale/tests/shaleproc"
)

// watchdogGrace is how long the test may take to end once its watchdog has pulled the
// plug: its waits (a node to be ready, a partition to be read) fail once the nodes are
// gone, the longest after readyTimeout.
const watchdogGrace = readyTimeout + 90*time.Second

// plug is everything a power-cut test started and mounted, so that it can all be torn
// down from any goroutine, whatever state the test is in.
type plug struct {
	mu     sync.Mutex
	procs  []*shaleproc.Proc
	mounts []*lazyfs.FS
	done   bool // the test ran to its end (finish)
}

// finish records that the test ran to its end: neither a panic nor a t.Fatal cut it short.
func (p *plug) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done = true
}

func (p *plug) finished() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

func (p *plug) addProc(pr *shaleproc.Proc) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.procs = append(p.procs, pr)
}

func (p *plug) addMount(fs *lazyfs.FS) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mounts = append(p.mounts, fs)
}

// release ends a run that went well: it kills the processes, then unmounts cleanly (an
// unmount that fails or hangs aborts the mount all the same: lazyfs.FS.Unmount).
func (p *plug) release() error {
	p.mu.Lock()
	procs, mounts := slices.Clone(p.procs), slices.Clone(p.mounts)
	p.mu.Unlock()
	var errs []error
	for _, pr := range procs {
		errs = append(errs, pr.Kill9())
	}
	for _, m := range mounts {
		errs = append(errs, m.Unmount())
	}
	return errors.Join(errs...)
}

// pull sends SIGKILL to every process, then aborts every FUSE connection and detaches its
// mount (lazyfs.FS.Abort), then waits (bounded) for the processes to be gone. The abort
// comes before the wait because a killed process stuck in a request the server does not
// answer dies only once the request fails. Nothing is mounted again after it.
func (p *plug) pull() error {
	p.mu.Lock()
	procs, mounts := slices.Clone(p.procs), slices.Clone(p.mounts)
	p.mu.Unlock()
	for _, pr := range procs {
		_ = pr.Signal(syscall.SIGKILL) // an error says it is not running
	}
	errs := make([]error, len(mounts))
	var wg sync.WaitGroup
	for i, m := range mounts {
		wg.Go(func() { errs[i] = m.Abort() })
	}
	wg.Wait()
	for _, pr := range procs {
		errs = append(errs, pr.Kill9())
	}
	return errors.Join(errs...)
}

// watchdog bounds the whole test, its cleanups included, well below go test's -timeout
// (25 minutes in `make test`), whose panic would leave the mounts behind. Past limit it
// fails the test and pulls the plug, after which every wait of the test fails soon; if
// the test has still not ended watchdogGrace later, it panics as go test would, with the
// nodes and mounts already gone. The limit is cut short to end before go test's own.
func watchdog(t *testing.T, limit time.Duration, p *plug) {
	if dl, ok := t.Deadline(); ok {
		limit = max(min(limit, time.Until(dl)-watchdogGrace-30*time.Second), 10*time.Second)
	}
	stop, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		select {
		case <-stop:
			return
		case <-time.After(limit):
		}
		t.Errorf("watchdog: still running after %v: killing the nodes, aborting their mounts", limit)
		if err := p.pull(); err != nil {
			t.Errorf("watchdog: %v", err)
		}
		select {
		case <-stop:
		case <-time.After(watchdogGrace):
			debug.SetTraceback("all")
			panic(fmt.Sprintf("powerloss: test still running %v after its watchdog killed the nodes and aborted the mounts", watchdogGrace))
		}
	}()
	// Registered before anything else of the test, so that it runs last.
	t.Cleanup(func() {
		close(stop)
		<-ended
	})
}
