package txn

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/metadata"
)

// fakeStore is the controller as the coordinator sees it: transaction states fenced by
// the coordinator epoch of the image, as the FSM fences them.
type fakeStore struct {
	mu       sync.Mutex
	img      *metadata.Image
	watchers []chan *metadata.Image
	states   map[string]metadata.TxnState
	writes   []metadata.TxnState
	// failWrites, when set, fails every write with it.
	failWrites error
	// refuseEpoch, when not 0, is a coordinator epoch the controller has moved past
	// although the broker's image has not yet.
	refuseEpoch int32
	loads       int
}

func newFakeStore(im *metadata.Image) *fakeStore {
	return &fakeStore{img: im, states: map[string]metadata.TxnState{}}
}

func (s *fakeStore) Current() *metadata.Image {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.img
}

func (s *fakeStore) Watch(ctx context.Context) <-chan *metadata.Image {
	ch := make(chan *metadata.Image, 1)
	s.mu.Lock()
	ch <- s.img
	s.watchers = append(s.watchers, ch)
	s.mu.Unlock()
	out := make(chan *metadata.Image)
	go func() {
		defer close(out)
		for {
			select {
			case <-ctx.Done():
				return
			case im := <-ch:
				select {
				case out <- im:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out
}

func (s *fakeStore) setImage(im *metadata.Image) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.img = im
	for _, w := range s.watchers {
		select {
		case <-w:
		default:
		}
		w <- im
	}
}

func (s *fakeStore) LeaseValid() bool { return true }

// BrokerEpoch is the registration testImage gives every broker and coordinator.
func (s *fakeStore) BrokerEpoch() int64 { return 0 }

func (s *fakeStore) WriteTxnState(_ context.Context, fence metadata.GroupFence, st metadata.TxnState, remove bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failWrites != nil {
		return s.failWrites
	}
	_, co, _ := s.img.CoordinatorOf(st.TransactionalID)
	if co.Broker != fence.Broker || co.Epoch != fence.Epoch || fence.Epoch == s.refuseEpoch {
		return kerr.NotCoordinator
	}
	if remove {
		delete(s.states, st.TransactionalID)
		return nil
	}
	s.states[st.TransactionalID] = st
	s.writes = append(s.writes, st)
	return nil
}

func (s *fakeStore) TxnOffsetCommit(context.Context, metadata.GroupFence, string, int64, int16, string, []metadata.CommittedOffset) error {
	return errors.New("not used")
}

func (s *fakeStore) PendingTxnOffsets(context.Context, string) (map[string][]int32, error) {
	return nil, errors.New("not used")
}

func (s *fakeStore) LoadTxnStates(_ context.Context, partitions []int32) ([]metadata.TxnState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loads++
	var out []metadata.TxnState
	for _, id := range slices.Sorted(maps.Keys(s.states)) {
		if slices.Contains(partitions, metadata.OffsetsPartition(id, len(s.img.Coordinators))) {
			out = append(out, s.states[id])
		}
	}
	return out, nil
}

func (s *fakeStore) state(id string) metadata.TxnState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.states[id]
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

// testImage has one coordinator partition (so every id is coordinated by broker 1 at
// epoch coordEpoch) and topic t with partition 0 led by broker 1 and 1 by broker 2.
func testImage(coordBroker, coordEpoch int32) *metadata.Image {
	return &metadata.Image{
		Offset:       1,
		Brokers:      map[int32]metadata.Broker{1: {ID: 1, Host: "b1", Port: 1}, 2: {ID: 2, Host: "b2", Port: 2}},
		Coordinators: []metadata.Coordinator{{Broker: coordBroker, Epoch: coordEpoch}},
		Topics: map[string]*metadata.Topic{"t": {Name: "t", Partitions: []metadata.Partition{
			{Topic: "t", Index: 0, Leader: 1, Replicas: []int32{1}, ISR: []int32{1}},
			{Topic: "t", Index: 1, Leader: 2, Replicas: []int32{2}, ISR: []int32{2}},
		}}},
	}
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
	store   *fakeStore
	markers *fakeMarkers
	clock   *clock
	c       *Coordinator
}

func newHarness(t *testing.T, store *fakeStore) *harness {
	t.Helper()
	h := &harness{t: t, store: store, markers: &fakeMarkers{}, clock: &clock{t: time.UnixMilli(1_000_000)}}
	h.c = New(Config{NodeID: 1, MarkerRetryBackoff: time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: h.clock.now,
		// The tests call AbortTimedOut and RemoveExpired themselves.
		AbortTimedOutInterval: time.Hour, RemoveExpiredInterval: time.Hour,
		// Requests during a completion are answered CONCURRENT_TRANSACTIONS at once,
		// unless a test waits for them.
		CompletionWait: time.Nanosecond,
	}, store, &fakePIDs{}, h.markers)
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

func (h *harness) status(id string) metadata.TxnStatus { return h.store.state(id).Status }
