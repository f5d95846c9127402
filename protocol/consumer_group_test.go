package protocol_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Consumer-group scenarios with real clients: a group over several partitions consumes
// every record exactly once while stable; a member joining, leaving, and being killed
// with SIGKILL each cause a rebalance after which consumption resumes from the committed
// offsets, with no record missed (at-least-once) and nothing committed consumed again.

const groupTestPartitions = 6

// seen counts how often each record value was consumed, across the whole group.
type seen struct {
	mu       sync.Mutex
	counts   map[string]int
	byMember map[string]int
}

func newSeen() *seen { return &seen{counts: map[string]int{}, byMember: map[string]int{}} }

func (s *seen) add(member, value string) {
	s.mu.Lock()
	s.counts[value]++
	s.byMember[member]++
	s.mu.Unlock()
}

func (s *seen) consumedBy(member string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byMember[member]
}

func (s *seen) count(v string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[v]
}

func (s *seen) missing(values []string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, v := range values {
		if s.counts[v] == 0 {
			n++
		}
	}
	return n
}

// groupMember is one consumer of the group under test.
type groupMember interface {
	name() string
	// leave closes the consumer cleanly (it commits and leaves the group).
	leave()
	// kill ends it without a word to the broker; only process members can.
	kill()
}

// groupScenario drives one client kind through the steady-state, join, leave and kill
// phases.
type groupScenario struct {
	t        *testing.T
	gb       *groupBroker
	topic    string
	group    string
	seen     *seen
	prod     *kgo.Client
	adm      *kadm.Client
	produced [][]string // values per phase
	// seeds, when set, makes every admin call use a new client of these brokers: kgo
	// keeps a group's coordinator cached through dial failures on sharded requests
	// (DescribeGroups, OffsetFetch), so a long-lived client never leaves a dead one.
	seeds []string
}

// admin returns the client for one admin call and its release.
func (s *groupScenario) admin() (*kadm.Client, func()) {
	if s.seeds == nil {
		return s.adm, func() {}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.seeds...))
	if err != nil {
		s.t.Fatal(err)
	}
	return kadm.NewClient(cl), cl.Close
}

func newGroupScenario(t *testing.T, topic string) *groupScenario {
	gb := startGroupBroker(t)
	gb.createTopic(topic, groupTestPartitions, nil)
	return &groupScenario{
		t: t, gb: gb, topic: topic, group: "group-" + topic, seen: newSeen(),
		prod: gb.client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner())),
		adm:  gb.admin(),
	}
}

// waitStable waits until the group is Stable with n members owning every partition.
func (s *groupScenario) waitStable(n int) {
	s.t.Helper()
	ctx := ctxTimeout(s.t, 60*time.Second)
	var last string
	for {
		// Each attempt on its own short deadline: a client may need a retry to drop a
		// coordinator that died.
		actx, cancel := context.WithTimeout(ctx, 3*time.Second)
		adm, release := s.admin()
		described, err := adm.DescribeGroups(actx, s.group)
		release()
		cancel()
		if err == nil {
			d := described[s.group]
			owned := map[int32]bool{}
			for _, m := range d.Members {
				if ca, ok := m.Assigned.AsConsumer(); ok {
					for _, t := range ca.Topics {
						for _, p := range t.Partitions {
							owned[p] = true
						}
					}
				}
			}
			last = fmt.Sprintf("%s with %d members owning %d partitions", d.State, len(d.Members), len(owned))
			if d.State == "Stable" && len(d.Members) == n && len(owned) == groupTestPartitions {
				return
			}
		}
		if ctx.Err() != nil {
			s.t.Fatalf("group never became stable with %d members: %s (%v)", n, last, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// produce writes n records of a new phase, spread over all partitions, paced over
// roughly pace so that rebalances happen while they are being consumed.
func (s *groupScenario) produce(n int, pace time.Duration) []string {
	s.t.Helper()
	phase := len(s.produced)
	vals := make([]string, n)
	ctx := ctxTimeout(s.t, 30*time.Second)
	const chunks = 10
	for c := 0; c < chunks; c++ {
		var recs []*kgo.Record
		for i := c * n / chunks; i < (c+1)*n/chunks; i++ {
			vals[i] = fmt.Sprintf("p%d-%d", phase, i)
			recs = append(recs, &kgo.Record{Value: []byte(vals[i])})
		}
		if err := s.prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			s.t.Fatal(err)
		}
		time.Sleep(pace / chunks)
	}
	s.produced = append(s.produced, vals)
	return vals
}

// settle waits until every value of the latest phase was consumed and the group has
// committed up to the end of every partition; then it checks that no value of an earlier
// phase was consumed again (a rebalance that resumed before the committed offset).
func (s *groupScenario) settle(before map[string]int) map[string]int {
	s.t.Helper()
	vals := s.produced[len(s.produced)-1]
	ctx := ctxTimeout(s.t, 60*time.Second)
	for s.seen.missing(vals) > 0 {
		if ctx.Err() != nil {
			s.dump()
			s.t.Fatalf("phase %d: %d of %d records never consumed", len(s.produced)-1, s.seen.missing(vals), len(vals))
		}
		time.Sleep(10 * time.Millisecond)
	}
	for {
		actx, cancel := context.WithTimeout(ctx, 3*time.Second)
		adm, release := s.admin()
		lags, err := adm.Lag(actx, s.group)
		release()
		cancel()
		if err == nil {
			l := lags[s.group]
			if l.Error() == nil && l.Lag.Total() == 0 && len(l.Lag[s.topic]) == groupTestPartitions {
				break
			}
		}
		if ctx.Err() != nil {
			s.t.Fatalf("committed offsets never reached the end: %+v %v", lags, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for v, n := range before {
		if got := s.seen.count(v); got != n {
			s.t.Fatalf("record %s, committed in an earlier phase, consumed again (%d times, was %d)", v, got, n)
		}
	}
	snap := map[string]int{}
	for _, phase := range s.produced {
		for _, v := range phase {
			snap[v] = s.seen.count(v)
		}
	}
	return snap
}

func (s *groupScenario) dump() {
	ctx := ctxTimeout(s.t, 5*time.Second)
	d, _ := s.adm.DescribeGroups(ctx, s.group)
	s.t.Logf("group %s", d[s.group].State)
	for _, m := range d[s.group].Members {
		ca, _ := m.Assigned.AsConsumer()
		s.t.Logf("member %s (%s): %+v", m.MemberID, m.ClientID, ca)
	}
	l, _ := s.adm.Lag(ctx, s.group)
	for p, ml := range l[s.group].Lag[s.topic] {
		s.t.Logf("p%d: commit %d end %d", p, ml.Commit.At, ml.End.Offset)
	}
	s.seen.mu.Lock()
	s.t.Logf("by member: %v", s.seen.byMember)
	s.seen.mu.Unlock()
}

// run is the common scenario: three members, then a fourth (a separate process) joins,
// one leaves, and the process is killed.
func (s *groupScenario) run(start func(name string) groupMember, startProcess func(name string) groupMember) {
	t := s.t
	var members []groupMember
	for i := 0; i < 3; i++ {
		members = append(members, start(fmt.Sprintf("m%d", i)))
	}
	defer func() {
		for _, m := range members {
			m.leave()
		}
	}()
	s.waitStable(3)

	// Steady state: exactly once.
	vals := s.produce(600, 0)
	snap := s.settle(nil)
	for _, v := range vals {
		if n := s.seen.count(v); n != 1 {
			t.Fatalf("steady state: record %s consumed %d times", v, n)
		}
	}

	for _, m := range members {
		if s.seen.consumedBy(m.name()) == 0 {
			t.Fatalf("member %s consumed nothing in the steady state", m.name())
		}
	}

	// A member joins while records flow.
	proc := startProcess("proc")
	s.produce(600, 2*time.Second)
	s.waitStable(4)
	snap = s.settle(snap)
	// Make sure the new member owns partitions and consumes before it is killed.
	s.produce(120, 0)
	snap = s.settle(snap)
	if s.seen.consumedBy(proc.name()) == 0 {
		t.Fatal("the member that joined consumed nothing")
	}

	// A member leaves.
	members[2].leave()
	members = members[:2]
	s.produce(600, 2*time.Second)
	s.waitStable(3)
	snap = s.settle(snap)

	// The process member is killed mid-stream: its session expires and the others take
	// over its partitions from the committed offsets.
	done := make(chan struct{})
	go func() {
		time.Sleep(300 * time.Millisecond)
		proc.kill()
		close(done)
	}()
	s.produce(600, 2*time.Second)
	<-done
	s.waitStable(2)
	s.settle(snap)
}

// kgoMember is an in-process franz-go consumer that marks each record after processing
// it, so commits never get ahead of what was consumed.
type kgoMember struct {
	id     string
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

func kgoGroupOpts(addr, group, topic string, balancer kgo.GroupBalancer) []kgo.Opt {
	return []kgo.Opt{
		kgo.SeedBrokers(addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.Balancers(balancer), kgo.SessionTimeout(time.Second), kgo.HeartbeatInterval(100 * time.Millisecond),
		kgo.RebalanceTimeout(10 * time.Second), kgo.AutoCommitMarks(), kgo.AutoCommitInterval(100 * time.Millisecond),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200 * time.Millisecond),
	}
}

// consumeKgo polls until ctx ends, reporting each record before marking it.
func consumeKgo(ctx context.Context, cl *kgo.Client, report func(value string)) {
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		if fs.IsClientClosed() {
			return
		}
		var recs []*kgo.Record
		fs.EachRecord(func(r *kgo.Record) {
			report(string(r.Value))
			recs = append(recs, r)
		})
		cl.MarkCommitRecords(recs...)
	}
}

func startKgoMember(t *testing.T, s *groupScenario, id string, balancer kgo.GroupBalancer) groupMember {
	cl, err := kgo.NewClient(kgoGroupOpts(s.gb.addr, s.group, s.topic, balancer)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &kgoMember{id: id, cl: cl, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		consumeKgo(ctx, cl, func(v string) { s.seen.add(id, v) })
	}()
	t.Cleanup(m.leave)
	return m
}

func (m *kgoMember) name() string { return m.id }
func (m *kgoMember) kill()        { panic("an in-process member cannot be killed") }
func (m *kgoMember) leave() {
	m.once.Do(func() {
		m.cancel()
		<-m.done
		// Close commits the marked offsets and leaves the group.
		m.cl.Close()
	})
}

// saramaMember is an in-process sarama consumer-group member.
type saramaMember struct {
	id     string
	cg     sarama.ConsumerGroup
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

type saramaHandler struct{ report func(string) }

func (saramaHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h saramaHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for msg := range claim.Messages() {
		h.report(string(msg.Value))
		sess.MarkMessage(msg, "")
	}
	return nil
}

func saramaGroupConfig() *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_1_0_0
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Interval = 100 * time.Millisecond
	cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyRange()}
	cfg.Consumer.Group.Session.Timeout = time.Second
	cfg.Consumer.Group.Heartbeat.Interval = 100 * time.Millisecond
	cfg.Consumer.Group.Rebalance.Timeout = 10 * time.Second
	cfg.Consumer.MaxWaitTime = 200 * time.Millisecond
	cfg.Metadata.Retry.Backoff = 50 * time.Millisecond
	return cfg
}

// consumeSarama runs sessions until ctx ends.
func consumeSarama(ctx context.Context, cg sarama.ConsumerGroup, topic string, report func(string)) {
	for ctx.Err() == nil {
		if err := cg.Consume(ctx, []string{topic}, saramaHandler{report: report}); err != nil && ctx.Err() == nil {
			time.Sleep(50 * time.Millisecond)
		}
	}
}

func startSaramaMember(t *testing.T, s *groupScenario, id string) groupMember {
	cg, err := sarama.NewConsumerGroup([]string{s.gb.addr}, s.group, saramaGroupConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &saramaMember{id: id, cg: cg, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		consumeSarama(ctx, cg, s.topic, func(v string) { s.seen.add(id, v) })
	}()
	t.Cleanup(m.leave)
	return m
}

func (m *saramaMember) name() string { return m.id }
func (m *saramaMember) kill()        { panic("an in-process member cannot be killed") }
func (m *saramaMember) leave() {
	m.once.Do(func() {
		m.cancel()
		<-m.done
		m.cg.Close()
	})
}

// processMember is a consumer in a child process (this test binary, running
// TestGroupMemberProcess), so that it can be killed with SIGKILL.
type processMember struct {
	id   string
	cmd  *exec.Cmd
	done chan struct{}
	once sync.Once
}

const (
	envMemberAddr   = "SHALE_GROUP_MEMBER_ADDR"
	envMemberGroup  = "SHALE_GROUP_MEMBER_GROUP"
	envMemberTopic  = "SHALE_GROUP_MEMBER_TOPIC"
	envMemberClient = "SHALE_GROUP_MEMBER_CLIENT"
)

func startProcessMember(t *testing.T, s *groupScenario, id, client string) groupMember {
	cmd := exec.Command(os.Args[0], "-test.run=^TestGroupMemberProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), envMemberAddr+"="+s.gb.addr, envMemberGroup+"="+s.group, envMemberTopic+"="+s.topic, envMemberClient+"="+client)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	m := &processMember{id: id, cmd: cmd, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "consumed "); ok {
				s.seen.add(id, v)
			}
		}
		cmd.Wait()
	}()
	t.Cleanup(m.kill)
	return m
}

func (m *processMember) name() string { return m.id }
func (m *processMember) leave() {
	m.once.Do(func() {
		m.cmd.Process.Signal(os.Interrupt)
		<-m.done
	})
}
func (m *processMember) kill() {
	m.once.Do(func() {
		m.cmd.Process.Kill()
		<-m.done
	})
}

// TestGroupMemberProcess is the child of processMember; it does nothing in a normal run.
// It prints "consumed <value>" for each record before marking it for commit.
func TestGroupMemberProcess(t *testing.T) {
	addr := os.Getenv(envMemberAddr)
	if addr == "" {
		t.Skip("only runs as a child process of the consumer-group tests")
	}
	group, topic := os.Getenv(envMemberGroup), os.Getenv(envMemberTopic)
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	stdout := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex // sarama consumes each claim in its own goroutine
	report := func(v string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(stdout, "consumed %s\n", v)
		stdout.Flush() // before the mark: a kill must not lose a record that was committed
	}
	switch client := os.Getenv(envMemberClient); client {
	case "range", "cooperative-sticky":
		b := kgo.GroupBalancer(kgo.RangeBalancer())
		if client == "cooperative-sticky" {
			b = kgo.CooperativeStickyBalancer()
		}
		cl, err := kgo.NewClient(kgoGroupOpts(addr, group, topic, b)...)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		consumeKgo(ctx, cl, report)
	case "sarama":
		cg, err := sarama.NewConsumerGroup([]string{addr}, group, saramaGroupConfig())
		if err != nil {
			t.Fatal(err)
		}
		defer cg.Close()
		consumeSarama(ctx, cg, topic, report)
	default:
		t.Fatalf("unknown client %q", client)
	}
}

func TestConsumerGroupFranzRange(t *testing.T) {
	s := newGroupScenario(t, "franz-range")
	s.run(func(id string) groupMember { return startKgoMember(t, s, id, kgo.RangeBalancer()) },
		func(id string) groupMember { return startProcessMember(t, s, id, "range") })
}

func TestConsumerGroupFranzCooperativeSticky(t *testing.T) {
	s := newGroupScenario(t, "franz-coop")
	s.run(func(id string) groupMember { return startKgoMember(t, s, id, kgo.CooperativeStickyBalancer()) },
		func(id string) groupMember { return startProcessMember(t, s, id, "cooperative-sticky") })
}

func TestConsumerGroupSarama(t *testing.T) {
	s := newGroupScenario(t, "sarama")
	s.run(func(id string) groupMember { return startSaramaMember(t, s, id) },
		func(id string) groupMember { return startProcessMember(t, s, id, "sarama") })
}
