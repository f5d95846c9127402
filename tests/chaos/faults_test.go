package chaos

import (
	"errors"
	"fmt"
	"slices"
	"syscall"
	"time"
)

// hold is how long a fault lasts: past a session timeout, so that the controller fences
// the broker and moves its leaderships, and past replica.lag.time.max.ms.
const hold = 2*sessionTimeout + time.Second

// fault injects one failure, keeps it for a while and undoes it (restart, SIGCONT, heal
// the network). It returns what it hit and when it began undoing the failure; an error
// means a step could not be carried out.
type fault struct {
	name string
	run  func(r *runner, p int32) (target string, healAt time.Time, err error)
}

var (
	faultKillLeader = fault{"kill -9 leader, restart", func(r *runner, p int32) (string, time.Time, error) {
		l, err := r.c.leaderOf(r.topic, p, 30*time.Second)
		if err != nil {
			return "", time.Now(), err
		}
		target := fmt.Sprintf("%v (leads p%d)", l, p)
		if err := l.kill9(); err != nil {
			return target, time.Now(), err
		}
		time.Sleep(hold)
		healAt := time.Now()
		return target, healAt, r.restart(l)
	}}

	faultStopLeader = fault{"SIGSTOP leader > session, SIGCONT", func(r *runner, p int32) (string, time.Time, error) {
		l, err := r.c.leaderOf(r.topic, p, 30*time.Second)
		if err != nil {
			return "", time.Now(), err
		}
		target := fmt.Sprintf("%v (leads p%d)", l, p)
		if err := l.signal(syscall.SIGSTOP); err != nil {
			return target, time.Now(), err
		}
		time.Sleep(hold)
		return target, time.Now(), l.signal(syscall.SIGCONT)
	}}

	faultIsolateLeader = fault{"isolate leader from all", func(r *runner, p int32) (string, time.Time, error) {
		l, err := r.c.leaderOf(r.topic, p, 30*time.Second)
		if err != nil {
			return "", time.Now(), err
		}
		return r.partition(l, r.c.otherNodes(l), true, fmt.Sprintf("%v (leads p%d) | everyone", l, p))
	}}

	// In the combined layout every other node is a controller, so "from the controllers"
	// is from the other two nodes; the test client still reaches the leader, which is the
	// case where a leader that lost its quorum must stop acknowledging.
	faultIsolateLeaderFromControllers = fault{"isolate leader from controllers", func(r *runner, p int32) (string, time.Time, error) {
		l, err := r.c.leaderOf(r.topic, p, 30*time.Second)
		if err != nil {
			return "", time.Now(), err
		}
		peers := slices.DeleteFunc(slices.Clone(r.c.controllers), func(n *node) bool { return n == l })
		what := fmt.Sprintf("%v (leads p%d) | controllers", l, p)
		if r.c.layout == combined {
			what = fmt.Sprintf("%v (leads p%d) | other nodes, not client", l, p)
		}
		return r.partition(l, peers, false, what)
	}}

	// Every broker holds a replica of every partition, so the follower of p that leads the
	// fewest partitions stands in for "a follower".
	faultIsolateFollower = fault{"isolate follower from all", func(r *runner, p int32) (string, time.Time, error) {
		ps, err := r.c.topicNow(r.topic)
		if err != nil || int(p) >= len(ps) {
			return "", time.Now(), fmt.Errorf("describe topic: %w", err)
		}
		leads := map[int32]int{}
		for _, s := range ps {
			leads[s.leader]++
		}
		var f *node
		for _, id := range ps[p].replicas {
			n := r.c.byID(id)
			if id == ps[p].leader || n == nil || !n.running() {
				continue
			}
			if f == nil || leads[id] < leads[f.id] {
				f = n
			}
		}
		if f == nil {
			return "", time.Now(), fmt.Errorf("p%d has no running follower (replicas %v, leader %d)", p, ps[p].replicas, ps[p].leader)
		}
		return r.partition(f, r.c.otherNodes(f), true, fmt.Sprintf("%v (follows p%d, leads %d) | everyone", f, p, leads[f.id]))
	}}

	faultKillController = fault{"kill -9 active controller, restart", func(r *runner, _ int32) (string, time.Time, error) {
		a, err := r.c.activeController(30 * time.Second)
		if err != nil {
			return "", time.Now(), err
		}
		target := a.String()
		if err := a.kill9(); err != nil {
			return target, time.Now(), err
		}
		time.Sleep(hold)
		healAt := time.Now()
		return target, healAt, r.restart(a)
	}}

	faultRolling      = rollingRestart(0)
	faultSigtermOne   = rollingRestart(1)
	faultKillAllBroks = fault{"kill -9 every broker, restart all", func(r *runner, _ int32) (string, time.Time, error) {
		var errs []error
		for _, b := range r.c.brokers {
			if err := b.signal(syscall.SIGKILL); err != nil {
				errs = append(errs, err)
			}
		}
		for _, b := range r.c.brokers {
			select {
			case <-b.done:
			case <-time.After(10 * time.Second):
				errs = append(errs, fmt.Errorf("%v alive 10s after SIGKILL", b))
			}
		}
		time.Sleep(2 * time.Second)
		healAt := time.Now()
		for _, b := range r.c.brokers {
			if err := b.start(); err != nil {
				errs = append(errs, err)
			}
		}
		for _, b := range r.c.brokers {
			if err := r.c.waitBrokerReady(b, 60*time.Second); err != nil {
				errs = append(errs, err)
			}
		}
		return fmt.Sprintf("all %d brokers", len(r.c.brokers)), healAt, errors.Join(errs...)
	}}
)

// allFaults is the cycle `make chaos` goes through; shortFaults is the run in `go test`.
var (
	allFaults = []fault{faultKillLeader, faultStopLeader, faultIsolateLeader, faultIsolateLeaderFromControllers,
		faultIsolateFollower, faultKillController, faultRolling, faultKillAllBroks, faultReassign}
	shortFaults = []fault{faultKillLeader, faultIsolateLeader, faultSigtermOne}
)

// rollingRestart stops brokers with SIGTERM one after the other (count of them, 0 for
// all, starting with p's leader), restarting each and waiting for it to rejoin and for the
// ISR to fill again before the next, as an operator would.
func rollingRestart(count int) fault {
	name := "rolling SIGTERM restart"
	if count == 1 {
		name = "SIGTERM leader, restart"
	}
	return fault{name, func(r *runner, p int32) (string, time.Time, error) {
		order := slices.Clone(r.c.brokers)
		if l, err := r.c.leaderOf(r.topic, p, 30*time.Second); err == nil {
			i := slices.Index(order, l)
			order = append(order[i:], order[:i]...)
		}
		if count > 0 {
			order = order[:count]
		}
		var errs []error
		var names []string
		healAt := time.Now()
		for _, b := range order {
			names = append(names, fmt.Sprint(b.id))
			if err := b.terminate(); err != nil {
				errs = append(errs, err)
			}
			healAt = time.Now()
			if err := r.restart(b); err != nil {
				errs = append(errs, err)
				continue
			}
			if d, ok, why := r.c.waitHealed(r.topic, r.waits.heal/2); !ok {
				r.t.Logf("not healed %v after restarting %v in a rolling restart: %s", d.Round(time.Second), b, why)
			}
		}
		what := "brokers " + fmt.Sprint(names)
		if count == 1 {
			what = fmt.Sprintf("%v (leads p%d)", order[0], p)
		}
		return what, healAt, errors.Join(errs...)
	}}
}

// restart starts a node again and, for a broker, waits for it to register.
func (r *runner) restart(n *node) error {
	if err := n.start(); err != nil {
		return err
	}
	if n.broker {
		return r.c.waitBrokerReady(n, 60*time.Second)
	}
	return nil
}

// partition cuts n from peers (and the client), holds, and heals.
func (r *runner) partition(n *node, peers []*node, client bool, what string) (string, time.Time, error) {
	err := r.c.isolate(n, peers, client)
	if err == nil {
		time.Sleep(hold)
	}
	healAt := time.Now()
	return what, healAt, errors.Join(err, r.c.net.Heal())
}
