package txn

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/controller"
	"github.com/shalelog/shale/controller/controllertest"
	"github.com/shalelog/shale/metadata"
)

// cluster is the real controller (controllertest) with broker 1 registered, and broker 2
// when a test needs it, and topic t: partition 0 led by broker 1, partition 1 by broker
// 2 (by broker 1 without broker 2).
type cluster struct {
	t       *testing.T
	node    *controllertest.Node
	brokers []int32
}

func newCluster(t *testing.T, withBroker2 bool) *cluster {
	t.Helper()
	node := controllertest.Start(t)
	cl := &cluster{t: t, node: node, brokers: []int32{1}}
	second := int32(1)
	if withBroker2 {
		node.AddBroker(2, "127.0.0.1", 9093)
		cl.brokers, second = []int32{1, 2}, 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res := node.Store().CreateTopics(ctx, []metadata.TopicSpec{{Name: "t", NumPartitions: -1, ReplicationFactor: -1,
		Assignments: [][]int32{{1}, {second}}}}, false)
	if res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	controllertest.WaitFor(t, node.Store(), "topic t and the coordinators placed", func(im *metadata.Image) bool {
		tp := im.Topic("t")
		return tp != nil && len(tp.Partitions) == 2 && tp.Partitions[0].Leader == 1 && tp.Partitions[1].Leader == second &&
			slices.ContainsFunc(im.Coordinators, func(co metadata.Coordinator) bool { return co.Broker == second })
	})
	return cl
}

// id returns a transactional id named after name whose coordinator is broker: name
// itself when it is, otherwise name-1, name-2, ...
func (cl *cluster) id(name string, broker int32) string {
	cl.t.Helper()
	id, _ := cl.find(name, broker, false)
	return id
}

// movable returns an id coordinated by broker 1, as id does, and a broker that takes it
// over when it registers (and gives it back to broker 1 when it leaves: coordinators are
// placed by rendezvous hashing).
func (cl *cluster) movable(name string) (string, int32) {
	cl.t.Helper()
	return cl.find(name, 1, true)
}

func (cl *cluster) find(name string, broker int32, movable bool) (string, int32) {
	cl.t.Helper()
	im := cl.node.Store().Current()
	for i := range 10000 {
		id := name
		if i > 0 {
			id = name + "-" + strconv.Itoa(i)
		}
		if _, co, ok := im.CoordinatorOf(id); !ok || co.Broker != broker {
			continue
		}
		if !movable {
			return id, 0
		}
		p := metadata.OffsetsPartition(id, len(im.Coordinators))
		for next := int32(3); next < 100; next++ {
			if controller.PickCoordinator(p, append(slices.Clone(cl.brokers), next)) == next {
				return id, next
			}
		}
	}
	cl.t.Fatalf("no id coordinated by broker %d", broker)
	return "", 0
}

// epoch is id's coordinator epoch in the controller's latest image broker 1 has.
func (cl *cluster) epoch(id string) int32 {
	_, co, _ := cl.node.Store().Current().CoordinatorOf(id)
	return co.Epoch
}

// state is id's transaction state as the controller has it, ok false when it has none.
func (cl *cluster) state(id string) (metadata.TxnState, bool) {
	cl.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p := metadata.OffsetsPartition(id, len(cl.node.Store().Current().Coordinators))
	sts, err := cl.node.Broker.LoadTxnStates(ctx, []int32{p})
	if err != nil {
		cl.t.Fatalf("load transaction states: %v", err)
	}
	for _, st := range sts {
		if st.TransactionalID == id {
			return st, true
		}
	}
	return metadata.TxnState{}, false
}

// store is broker 1's store, recording the transaction states the controller accepted,
// and able to stop its metadata cache, as a broker cut off from the metadata stream.
type store struct {
	*controller.BrokerClient
	mu     sync.Mutex
	writes []metadata.TxnState
	// holdComplete, when set, holds every write of a Complete* state until it is
	// closed; completeHeld gets a value as each such write starts to wait.
	holdComplete chan struct{}
	completeHeld chan struct{}
	frozen       *metadata.Image // the image the cache is stuck at, nil when following
	thawed       chan struct{}   // closed when the cache follows again
}

func newStore(cl *cluster) *store { return &store{BrokerClient: cl.node.Broker} }

func (s *store) WriteTxnState(ctx context.Context, fence metadata.GroupFence, st metadata.TxnState, remove bool) error {
	s.mu.Lock()
	hold, held := s.holdComplete, s.completeHeld
	s.mu.Unlock()
	if hold != nil && (st.Status == metadata.TxnCompleteCommit || st.Status == metadata.TxnCompleteAbort) {
		held <- struct{}{}
		select {
		case <-hold:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	err := s.BrokerClient.WriteTxnState(ctx, fence, st, remove)
	if err == nil && !remove {
		s.mu.Lock()
		s.writes = append(s.writes, st)
		s.mu.Unlock()
	}
	return err
}

func (s *store) accepted() []metadata.TxnState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.writes)
}

func (s *store) Current() *metadata.Image {
	s.mu.Lock()
	frozen := s.frozen
	s.mu.Unlock()
	if frozen != nil {
		return frozen
	}
	return s.BrokerClient.Current()
}

// freeze stops the cache at the current image.
func (s *store) freeze() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.frozen, s.thawed = s.BrokerClient.Current(), make(chan struct{})
}

// thaw makes the cache follow the controller again, from its latest image.
func (s *store) thaw() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.frozen = nil
	close(s.thawed)
}

// Watch passes the images on, holding them back while the cache is frozen.
func (s *store) Watch(ctx context.Context) <-chan *metadata.Image {
	in := s.BrokerClient.Watch(ctx)
	out := make(chan *metadata.Image)
	go func() {
		defer close(out)
		var latest *metadata.Image
		for {
			s.mu.Lock()
			frozen, thawed := s.frozen != nil, s.thawed
			s.mu.Unlock()
			var send chan *metadata.Image
			if latest != nil && !frozen {
				send = out
			}
			if !frozen {
				thawed = nil
			}
			select {
			case send <- latest:
				latest = nil
			case im, ok := <-in:
				if !ok {
					return
				}
				latest = im
			case <-thawed:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// fakePIDs counts up from 1000.
type fakePIDs struct {
	mu   sync.Mutex
	next int64
}

func (p *fakePIDs) Next(context.Context) (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.next++
	return 1000 + p.next, nil
}

// fakeMarkers records markers; fail, when set, answers a partition's marker with an error
// (consulted on every attempt), and hold blocks every request until released.
type fakeMarkers struct {
	mu      sync.Mutex
	sent    []sentMarker
	fail    func(to int32, topic string, partition int32) error
	hold    chan struct{}
	written map[string]int // topic-partition markers acknowledged
}

type sentMarker struct {
	to               int32
	producerID       int64
	producerEpoch    int16
	commit           bool
	coordinatorEpoch int32
	topic            string
	partition        int32
}

func (m *fakeMarkers) WriteTxnMarkers(ctx context.Context, to metadata.Broker, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
	m.mu.Lock()
	hold := m.hold
	m.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	resp := kmsg.NewPtrWriteTxnMarkersResponse()
	for _, mk := range req.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = mk.ProducerID
		for _, t := range mk.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition = p
				var err error
				if m.fail != nil {
					err = m.fail(to.ID, t.Topic, p)
				}
				if ke := (*kerr.Error)(nil); errors.As(err, &ke) {
					rp.ErrorCode = ke.Code
				} else {
					m.sent = append(m.sent, sentMarker{to.ID, mk.ProducerID, mk.ProducerEpoch, mk.Committed, mk.CoordinatorEpoch, t.Topic, p})
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	return resp, nil
}

func (m *fakeMarkers) markers() []sentMarker {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.sent)
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type harness struct {
	t       *testing.T
	cl      *cluster
	store   *store
	markers *fakeMarkers
	clock   *clock
	c       *Coordinator
}

// newHarness starts broker 1's transaction coordinator on a new cluster of broker 1.
func newHarness(t *testing.T) *harness {
	t.Helper()
	return newHarnessOn(t, newCluster(t, false))
}

// newHarness2 is newHarness on a cluster of brokers 1 and 2.
func newHarness2(t *testing.T) *harness {
	t.Helper()
	return newHarnessOn(t, newCluster(t, true))
}

func newHarnessOn(t *testing.T, cl *cluster) *harness {
	t.Helper()
	h := &harness{t: t, cl: cl, store: newStore(cl), markers: &fakeMarkers{}, clock: &clock{t: time.UnixMilli(1_000_000)}}
	h.c = New(Config{NodeID: 1, MarkerRetryBackoff: time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: h.clock.now,
		// The tests call AbortTimedOut and RemoveExpired themselves.
		AbortTimedOutInterval: time.Hour, RemoveExpiredInterval: time.Hour,
		// Requests during a completion are answered CONCURRENT_TRANSACTIONS at once,
		// unless a test waits for them.
		CompletionWait: time.Nanosecond,
	}, h.store, &fakePIDs{}, h.markers)
	t.Cleanup(func() { h.c.Close() })
	return h
}

// eventually waits for cond, failing after a generous deadline: the coordinator's
// loads and completions run in the background.
func (h *harness) eventually(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// init runs InitProducerID, retrying while the partition loads or a previous
// transaction completes, as clients do.
func (h *harness) init(id string, expectedPID int64, expectedEpoch int16) (int64, int16, error) {
	h.t.Helper()
	var (
		pid   int64
		epoch int16
		err   error
	)
	h.eventually("InitProducerId "+id, func() bool {
		pid, epoch, err = h.c.InitProducerID(context.Background(), id, 60000, expectedPID, expectedEpoch)
		return !errors.Is(err, kerr.CoordinatorLoadInProgress) && !errors.Is(err, kerr.ConcurrentTransactions)
	})
	return pid, epoch, err
}

func (h *harness) status(id string) metadata.TxnStatus {
	st, _ := h.cl.state(id)
	return st.Status
}
