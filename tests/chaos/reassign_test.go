package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// faultReassign is scale-out under fire: every partition the leader of p holds moves to
// a broker that holds none of them (the spare, started the first time), with
// AlterPartitionReassignments. The target broker is down (killed with SIGKILL just
// before, unless it is a controller too) so that the reassignments are surely in
// progress while the old leader is killed with SIGKILL and restarted, and then the
// active controller; then it restarts, catches up, and the reassignments complete. The
// fault ends once none is in progress.
// (Not SIGSTOP: a client whose metadata request lands on a stopped broker waits until it
// resumes, which would show as unavailability that says nothing about Shale.)
var faultReassign = fault{"reassign leader's replicas to another broker; kill -9 it, then the active controller", func(r *runner, p int32) (string, time.Time, error) {
	return r.reassignOffLeader(p)
}}

func (r *runner) reassignOffLeader(p int32) (string, time.Time, error) {
	c := r.c
	if !slices.Contains(c.nodes, c.spare) {
		if err := c.spare.start(); err != nil {
			return "start spare broker", time.Now(), err
		}
		c.nodes = append(c.nodes, c.spare)
		c.brokers = append(c.brokers, c.spare)
		if err := c.waitBrokerReady(c.spare, 60*time.Second); err != nil {
			return "start spare broker", time.Now(), err
		}
	}
	x, err := c.leaderOf(r.topic, p, 30*time.Second)
	if err != nil {
		return "", time.Now(), err
	}
	ps, err := c.topicNow(r.topic)
	if err != nil || int(p) >= len(ps) {
		return "", time.Now(), fmt.Errorf("describe topic: %w", err)
	}
	var to *node
	for _, b := range c.brokers {
		if b != x && b.running() && !slices.Contains(ps[p].replicas, b.id) {
			to = b
			break
		}
	}
	if to == nil {
		return "", time.Now(), fmt.Errorf("no running broker outside p%d's replicas %v", p, ps[p].replicas)
	}
	var req kadm.AlterPartitionAssignmentsReq
	moved := 0
	for i, st := range ps {
		j := slices.Index(st.replicas, x.id)
		if j < 0 || slices.Contains(st.replicas, to.id) {
			continue
		}
		target := slices.Clone(st.replicas)
		target[j] = to.id
		req.Assign(r.topic, int32(i), target)
		moved++
	}
	what := fmt.Sprintf("%d partitions %v -> %v", moved, x, to)

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.DialTimeout(3*time.Second))
	if err != nil {
		return what, time.Now(), err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	// A target that is also a controller (the combined layout, once the spare is in use)
	// stays up: down with the old leader it would be two of three controllers, a lost
	// quorum rather than a reassignment fault. Its reassignments may then finish before
	// the kills.
	holdTarget := !to.controller
	if holdTarget {
		if err := to.kill9(); err != nil {
			return what, time.Now(), err
		}
	} else {
		what += " (target up)"
	}
	restarted := !holdTarget
	defer func() {
		if !restarted {
			_ = r.restart(to)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	resps, err := adm.AlterPartitionAssignments(ctx, req)
	cancel()
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		return what, time.Now(), fmt.Errorf("reassign: %w", err)
	}
	all := kadm.TopicsSet{}
	for i := range ps {
		all.Add(r.topic, int32(i))
	}
	inProgress := func() (int, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		list, err := adm.ListPartitionReassignments(ctx, all)
		if err != nil {
			return 0, err
		}
		return len(list[r.topic]), nil
	}
	var errs []error
	if n, err := inProgress(); holdTarget && (err != nil || n != moved) {
		errs = append(errs, fmt.Errorf("%d of %d reassignments in progress before the kills (%v)", n, moved, err))
	}

	// The old leader dies mid-reassignment and comes back; then the active controller.
	if err := x.kill9(); err != nil {
		return what, time.Now(), err
	}
	time.Sleep(hold)
	errs = append(errs, r.restart(x))
	a, err := c.activeController(30 * time.Second)
	if err != nil {
		return what, time.Now(), errors.Join(append(errs, err)...)
	}
	what += fmt.Sprintf("; kill -9 %v, then %v (active controller)", x, a)
	if err := a.kill9(); err != nil {
		return what, time.Now(), err
	}
	time.Sleep(hold)
	healAt := time.Now()
	errs = append(errs, r.restart(a))
	if !restarted {
		restarted = true
		errs = append(errs, r.restart(to))
	}

	deadline := time.Now().Add(r.waits.heal)
	for {
		n, err := inProgress()
		if err == nil && n == 0 {
			break
		}
		if time.Now().After(deadline) {
			errs = append(errs, fmt.Errorf("%d reassignments still in progress %v after healing (%v)", n, r.waits.heal, err))
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	return what, healAt, errors.Join(errs...)
}

// TestChaosReassign runs reassignments amid the other faults: moving replicas onto a new
// broker (twice: the second moves some back) with the old leader and the active
// controller killed mid-way, and a leader kill in between. It runs with
// SHALE_CHAOS=full or SHALE_CHAOS=reassign.
func TestChaosReassign(t *testing.T) {
	if !fullRun() && os.Getenv("SHALE_CHAOS") != "reassign" {
		t.Skip("the reassignment run is part of SHALE_CHAOS=full, or SHALE_CHAOS=reassign")
	}
	for _, l := range []layout{combined, dedicated} {
		t.Run(string(l), func(t *testing.T) {
			runLayout(t, l, []fault{faultReassign, faultKillLeader, faultReassign}, false, 600)
		})
	}
}
