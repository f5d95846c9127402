package interop

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestGroupRebalances runs each non-Go client as a group of separate processes over a
// topic of several partitions (group_member.py / group_member.js): while the group is
// stable every record is consumed exactly once; a member joining, a member leaving
// (SIGTERM: the client closes and leaves) and a member killed with SIGKILL each trigger
// a rebalance, after which consumption resumes from the committed offsets: no record is
// missed, and no record committed before the rebalance is consumed again. The Go
// clients' versions of this are in protocol/consumer_group_test.go.
func TestGroupRebalances(t *testing.T) {
	t.Parallel()
	nodeDir, err := filepath.Abs("node")
	if err != nil {
		t.Fatal(err)
	}
	pyScript, err := filepath.Abs(filepath.Join("python", "group_member.py"))
	if err != nil {
		t.Fatal(err)
	}
	clients := []struct {
		name    string
		missing func() string
		argv    []string
	}{
		{"kafka-python", pythonModuleMissing("kafka"), []string{debianPython, "-u", "-B", pyScript}},
		{"confluent-kafka-python", pythonModuleMissing("confluent_kafka"), []string{debianPython, "-u", "-B", pyScript}},
		{"kafkajs", kafkajsMissing(nodeDir), []string{"node", filepath.Join(nodeDir, "group_member.js")}},
	}
	for _, c := range clients {
		t.Run(c.name, func(t *testing.T) {
			if why := c.missing(); why != "" {
				results.recordExtra(fmt.Sprintf("- group rebalances, %s: skipped (%s)", c.name, why))
				t.Skip(why)
			}
			s := newRebalanceScenario(t, c.name, c.argv)
			if err := s.run(); err != nil {
				results.recordExtra(fmt.Sprintf("- group rebalances, %s: FAIL: %s", c.name, firstLine(err.Error())))
				t.Fatal(err)
			}
			results.recordExtra(fmt.Sprintf("- group rebalances, %s: pass (3 members; join, leave, SIGKILL; %d records)", c.name, s.total()))
		})
	}
}

const (
	rebalancePartitions = 6
	// rebalanceSessionTimeout is Kafka's (and Shale's) group.min.session.timeout.ms, so a
	// killed member is noticed as soon as a broker with default settings allows.
	rebalanceSessionTimeout = 6 * time.Second
)

// memberSpec is what group_member.py / group_member.js read from the file named by their
// last argument.
type memberSpec struct {
	Client           string `json:"client"`
	Bootstrap        string `json:"bootstrap"`
	Topic            string `json:"topic"`
	Group            string `json:"group"`
	SessionTimeoutMs int64  `json:"session_timeout_ms"`
}

type rebalanceScenario struct {
	t        *testing.T
	client   string
	argv     []string
	spec     memberSpec
	specPath string
	prod     *kgo.Client

	mu       sync.Mutex
	counts   map[string]int // record value -> times consumed, over the whole group
	produced [][]string     // values, by phase
}

func newRebalanceScenario(t *testing.T, client string, argv []string) *rebalanceScenario {
	name := fmt.Sprintf("rebalance-%s-%d", client, time.Now().UnixNano())
	s := &rebalanceScenario{
		t: t, client: client, argv: argv, counts: map[string]int{},
		spec: memberSpec{Client: client, Bootstrap: target.bootstrap, Topic: name, Group: name, SessionTimeoutMs: rebalanceSessionTimeout.Milliseconds()},
	}
	data, err := json.Marshal(s.spec)
	if err != nil {
		t.Fatal(err)
	}
	s.specPath = filepath.Join(t.TempDir(), "member.json")
	if err := os.WriteFile(s.specPath, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *rebalanceScenario) total() int {
	n := 0
	for _, p := range s.produced {
		n += len(p)
	}
	return n
}

func (s *rebalanceScenario) run() error {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if _, err := target.admin.CreateTopic(ctx, rebalancePartitions, 1, nil, s.spec.Topic); err != nil {
		return fmt.Errorf("create topic: %w", err)
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(target.seeds...), kgo.DefaultProduceTopic(s.spec.Topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		return err
	}
	defer prod.Close()
	s.prod = prod

	var members []*memberProcess
	defer func() {
		for _, m := range members {
			m.kill()
		}
	}()
	for i := 0; i < 3; i++ {
		m, err := s.start(fmt.Sprintf("m%d", i))
		if err != nil {
			return err
		}
		members = append(members, m)
	}
	if err := s.waitStable(ctx, 3); err != nil {
		return err
	}

	// Steady state: exactly once.
	vals, err := s.produce(ctx, 300, 0)
	if err != nil {
		return err
	}
	snap, err := s.settle(ctx, nil)
	if err != nil {
		return err
	}
	for _, v := range vals {
		if n := s.count(v); n != 1 {
			return fmt.Errorf("steady state: record %s consumed %d times", v, n)
		}
	}

	// A fourth member joins while records flow.
	joiner, err := s.start("joiner")
	if err != nil {
		return err
	}
	members = append(members, joiner)
	if _, err := s.produce(ctx, 300, 3*time.Second); err != nil {
		return err
	}
	if err := s.waitStable(ctx, 4); err != nil {
		return fmt.Errorf("after a member joined: %w", err)
	}
	if snap, err = s.settle(ctx, snap); err != nil {
		return fmt.Errorf("after a member joined: %w", err)
	}

	// One leaves cleanly.
	members[0].leave()
	if _, err := s.produce(ctx, 300, 3*time.Second); err != nil {
		return err
	}
	if err := s.waitStable(ctx, 3); err != nil {
		return fmt.Errorf("after a member left: %w", err)
	}
	if snap, err = s.settle(ctx, snap); err != nil {
		return fmt.Errorf("after a member left: %w", err)
	}

	// One is killed mid-stream: its session expires and the others take over.
	go func() {
		time.Sleep(500 * time.Millisecond)
		joiner.kill()
	}()
	if _, err := s.produce(ctx, 300, 3*time.Second); err != nil {
		return err
	}
	if err := s.waitStable(ctx, 2); err != nil {
		return fmt.Errorf("after a member was killed: %w", err)
	}
	if _, err := s.settle(ctx, snap); err != nil {
		return fmt.Errorf("after a member was killed: %w", err)
	}
	for _, m := range members[1:3] {
		m.leave()
	}
	return nil
}

func (s *rebalanceScenario) count(v string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[v]
}

// produce writes n records of a new phase, paced over roughly pace.
func (s *rebalanceScenario) produce(ctx context.Context, n int, pace time.Duration) ([]string, error) {
	phase := len(s.produced)
	vals := make([]string, n)
	const chunks = 10
	for c := 0; c < chunks; c++ {
		var recs []*kgo.Record
		for i := c * n / chunks; i < (c+1)*n/chunks; i++ {
			vals[i] = fmt.Sprintf("p%d-%d", phase, i)
			recs = append(recs, &kgo.Record{Value: []byte(vals[i])})
		}
		if err := s.prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return nil, fmt.Errorf("produce: %w", err)
		}
		time.Sleep(pace / chunks)
	}
	s.produced = append(s.produced, vals)
	return vals, nil
}

// waitStable waits for a Stable group of n members that owns every partition.
func (s *rebalanceScenario) waitStable(ctx context.Context, n int) error {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	var last string
	for {
		described, err := target.admin.DescribeGroups(ctx, s.spec.Group)
		if err == nil {
			d := described[s.spec.Group]
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
			last = fmt.Sprintf("%s, %d members owning %d partitions", d.State, len(d.Members), len(owned))
			if d.State == "Stable" && len(d.Members) == n && len(owned) == rebalancePartitions {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("group not stable with %d members: %s (%v)", n, last, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// settle waits until every record of the latest phase was consumed and the committed
// offsets reached the end of every partition, then checks no record of an earlier phase
// was consumed again. It returns the counts so far.
func (s *rebalanceScenario) settle(ctx context.Context, before map[string]int) (map[string]int, error) {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	vals := s.produced[len(s.produced)-1]
	for {
		missing := 0
		for _, v := range vals {
			if s.count(v) == 0 {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("phase %d: %d of %d records never consumed", len(s.produced)-1, missing, len(vals))
		case <-time.After(20 * time.Millisecond):
		}
	}
	for {
		lags, err := target.admin.Lag(ctx, s.spec.Group)
		if err == nil {
			l := lags[s.spec.Group]
			if l.Error() == nil && len(l.Lag[s.spec.Topic]) == rebalancePartitions && l.Lag.Total() == 0 {
				break
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("committed offsets never reached the end of the partitions (%v)", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	for v, n := range before {
		if got := s.count(v); got != n {
			return nil, fmt.Errorf("record %s, committed before the rebalance, consumed again (%d times, was %d)", v, got, n)
		}
	}
	snap := map[string]int{}
	for _, p := range s.produced {
		for _, v := range p {
			snap[v] = s.count(v)
		}
	}
	return snap, nil
}

// memberProcess is one client process of the group.
type memberProcess struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	once sync.Once
}

func (s *rebalanceScenario) start(name string) (*memberProcess, error) {
	argv := append(append([]string(nil), s.argv...), s.specPath)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1", "KAFKAJS_NO_PARTITIONER_WARNING=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr := &tailBuffer{max: 8 << 10}
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", argv[0], err)
	}
	m := &memberProcess{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		s.read(name, out)
		err := cmd.Wait()
		if os.Getenv(envTrace) != "" || (err != nil && !killed(err)) {
			s.t.Logf("member %s exited (%v); stderr:\n%s", name, err, stderr.String())
		}
	}()
	return m, nil
}

func killed(err error) bool {
	ee, ok := err.(*exec.ExitError)
	if !ok {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

func (s *rebalanceScenario) read(member string, out io.Reader) {
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var ev struct {
			Event string  `json:"event"`
			Value *string `json:"value"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Event != "consumed" || ev.Value == nil {
			continue
		}
		s.mu.Lock()
		s.counts[*ev.Value]++
		s.mu.Unlock()
	}
}

// leave asks the member to close (commit, LeaveGroup) and waits for it.
func (m *memberProcess) leave() {
	m.once.Do(func() {
		m.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-m.done:
		case <-time.After(30 * time.Second):
			syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
			<-m.done
		}
	})
}

// kill ends the member at once, without a word to the broker.
func (m *memberProcess) kill() {
	m.once.Do(func() {
		syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
		<-m.done
	})
}
