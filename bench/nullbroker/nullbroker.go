// Package nullbroker is a Kafka broker that does as little as a broker can:
// the ceiling `shale bench compare` sets every other target against (its
// target "null").
//
// It speaks just enough of the protocol for franz-go clients to produce and
// consume: ApiVersions, Metadata, CreateTopics, InitProducerID, Produce,
// ListOffsets and Fetch, plus an in-memory consumer-group coordinator
// (FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
// OffsetCommit, OffsetFetch; see groups.go). A Produce is acknowledged once
// its batches have offsets: nothing is validated, written to disk or
// replicated, and idempotence sequences are not checked. The batches stay
// in memory, in the buffers the requests were read into, so that Fetch can
// serve them, until the broker holds more than its retention bound; then
// the oldest go, across all partitions, and the partitions' log start
// offsets move past them. Those buffers are slabs faulted in when the
// broker starts and recycled once nothing in them is kept, so that the
// broker never pays for the kernel's zero-filling of fresh pages under
// load (that cost more than everything else it does).
//
// Fetch answers send the kept batches with writev, never copied, as
// Shale sends its segments. What is left is the cost any broker pays:
// reading and decoding requests, assigning offsets, encoding responses and
// writing them back. Against it,
// a client on the same machine shows how fast it can go when the broker
// costs nothing, which is the honest ceiling for a broker on a machine
// whose cores the client shares.
package nullbroker

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DefaultRetainBytes bounds the batches a broker keeps for Fetch unless
// told otherwise; the broker faults in this much memory when it starts.
const DefaultRetainBytes = 512 << 20

// maxRequestBytes refuses absurd frames (Kafka's socket.request.max.bytes).
const maxRequestBytes = 100 << 20

// nodeID is the broker's one node id.
const nodeID = 0

// versions is what the broker advertises: Shale's ranges for the keys both
// have, capped where a higher version would need topic ids (Fetch 13,
// Produce 13) or KIP-848, so clients use the same request shapes against
// both.
var versions = map[int16][2]int16{
	kmsg.Produce.Int16():         {3, 9},
	kmsg.Fetch.Int16():           {4, 12},
	kmsg.ListOffsets.Int16():     {1, 7},
	kmsg.Metadata.Int16():        {0, 12},
	kmsg.ApiVersions.Int16():     {0, 3},
	kmsg.CreateTopics.Int16():    {0, 5},
	kmsg.InitProducerID.Int16():  {0, 4},
	kmsg.OffsetCommit.Int16():    {2, 8},
	kmsg.OffsetFetch.Int16():     {1, 7},
	kmsg.FindCoordinator.Int16(): {0, 3},
	kmsg.JoinGroup.Int16():       {0, 7},
	kmsg.Heartbeat.Int16():       {0, 4},
	kmsg.LeaveGroup.Int16():      {0, 4},
	kmsg.SyncGroup.Int16():       {0, 5},
}

// Config configures a Broker.
type Config struct {
	// Addr is where to listen, host:port; port 0 picks a free one.
	Addr string
	// RetainBytes bounds the batches kept for Fetch, over all partitions;
	// 0 means DefaultRetainBytes.
	RetainBytes int64
	// Logger gets connection errors; nil discards them.
	Logger *slog.Logger
}

// Broker is a running null broker.
type Broker struct {
	ln     net.Listener
	host   string
	port   int32
	retain int64
	log    *slog.Logger

	mu     sync.Mutex
	topics map[string]*topic
	order  []string // topic names in creation order, for Metadata
	// queue holds every retained batch's partition, oldest first: evicting
	// the front evicts that partition's oldest batch.
	queue    []*partition
	retained int64
	// appended is closed (and replaced) on every append, waking fetches
	// that wait for data.
	appended chan struct{}
	nextPID  int64

	// Requests are read into slabs, which go back to free once nothing in
	// them is kept or being sent: past its retention bound the broker
	// recycles its memory instead of faulting in fresh pages (the kernel
	// zero-fills each new page, which would cost a broker that only
	// acknowledges more than anything else it does), and the slabs for the
	// bound itself are faulted in when it starts.
	slab     *chunk
	slabOff  int
	free     []*chunk
	slabs    int // allocated
	maxSlabs int // faulted in at start

	groups *coordinator
	// done is closed by Close, ending fetches that wait for data.
	done chan struct{}

	wg     sync.WaitGroup
	connMu sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

type topic struct {
	name  string
	id    [16]byte
	parts []*partition
}

type partition struct {
	batches []batch // oldest first
	start   int64   // log start offset
	end     int64   // log end offset (next offset to assign)
}

type batch struct {
	base, next int64 // first offset, and one past the last
	maxTS      int64
	data       []byte
	chunk      *chunk // data lies in it
}

// chunk is a slab that requests are read into, one after another.
// Produce keeps its batches there; refs counts them, the fetches sending
// from it, the handlers of requests still running, and the broker while
// the slab is the one being filled. At zero it goes back to the free list.
type chunk struct {
	buf    []byte
	refs   int
	pooled bool
}

// slabSize is the size of a chunk; larger requests get buffers of their
// own.
const slabSize = 16 << 20

// newSlab allocates a slab and touches every page of it, so that the
// kernel's zero-filling happens now, not under load.
func newSlab() *chunk {
	c := &chunk{buf: make([]byte, slabSize), pooled: true}
	for i := 0; i < len(c.buf); i += 4096 {
		c.buf[i] = 0
	}
	return c
}

// alloc returns n bytes to read a request into, and the chunk they lie in,
// with one reference (the handler's) taken.
func (b *Broker) alloc(n int) (*chunk, []byte) {
	if n > slabSize {
		return &chunk{buf: make([]byte, n), refs: 1}, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.slab == nil || b.slabOff+n > slabSize {
		if b.slab != nil {
			b.unref(b.slab)
		}
		// Past the slabs faulted in at start, the oldest batches go to
		// free one rather than fault in another: how requests pack into
		// slabs, not only the bytes kept, bounds the memory.
		for len(b.free) == 0 && b.slabs >= b.maxSlabs && len(b.queue) > 0 {
			b.evictOldest()
		}
		if l := len(b.free); l > 0 {
			b.slab = b.free[l-1]
			b.free[l-1] = nil
			b.free = b.free[:l-1]
		} else {
			b.slab = newSlab() // every slab is held by a fetch
			b.slabs++
		}
		b.slab.refs, b.slabOff = 1, 0
	}
	c := b.slab
	buf := c.buf[b.slabOff : b.slabOff+n : b.slabOff+n]
	b.slabOff += n
	c.refs++
	return c, buf
}

// unref drops a reference to c. Called with b.mu held.
func (b *Broker) unref(c *chunk) {
	c.refs--
	if c.refs == 0 && c.pooled {
		b.free = append(b.free, c)
	}
}

// Start listens on cfg.Addr and serves until Close.
func Start(cfg Config) (*Broker, error) {
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("null broker: %w", err)
	}
	host, portStr, err := net.SplitHostPort(ln.Addr().String())
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("null broker: %w", err)
	}
	port, _ := strconv.Atoi(portStr)
	b := &Broker{
		ln:       ln,
		host:     host,
		port:     int32(port),
		retain:   cfg.RetainBytes,
		log:      cfg.Logger,
		topics:   map[string]*topic{},
		appended: make(chan struct{}),
		nextPID:  1,
		conns:    map[net.Conn]struct{}{},
		done:     make(chan struct{}),
	}
	if b.retain <= 0 {
		b.retain = DefaultRetainBytes
	}
	b.maxSlabs = int(b.retain/slabSize) + 2
	for range b.maxSlabs {
		b.free = append(b.free, newSlab())
	}
	b.slabs = b.maxSlabs
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	b.groups = newCoordinator()
	b.wg.Add(1)
	go b.accept()
	return b, nil
}

// Addr is the address the broker listens on.
func (b *Broker) Addr() string { return net.JoinHostPort(b.host, strconv.Itoa(int(b.port))) }

// Close stops listening, closes every connection and waits for their
// goroutines.
func (b *Broker) Close() error {
	b.connMu.Lock()
	if !b.closed {
		close(b.done)
	}
	b.closed = true
	for c := range b.conns {
		c.Close()
	}
	b.connMu.Unlock()
	err := b.ln.Close()
	b.groups.close()
	b.wg.Wait()
	return err
}

// Serve runs a broker until ctx ends: the hidden `shale bench null-serve`.
func Serve(ctx context.Context, cfg Config) error {
	b, err := Start(cfg)
	if err != nil {
		return err
	}
	b.log.Info("null broker listening", "addr", b.Addr(), "retain.bytes", b.retain)
	<-ctx.Done()
	return b.Close()
}

func (b *Broker) accept() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.connMu.Lock()
		if b.closed {
			b.connMu.Unlock()
			c.Close()
			return
		}
		b.conns[c] = struct{}{}
		b.wg.Add(1)
		b.connMu.Unlock()
		go func() {
			defer b.wg.Done()
			if err := b.serveConn(c); err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				b.log.Debug("null broker connection", "remote", c.RemoteAddr().String(), "err", err)
			}
			b.connMu.Lock()
			delete(b.conns, c)
			b.connMu.Unlock()
			c.Close()
		}()
	}
}

// serveConn answers one connection's requests in order. franz-go keeps
// produce, fetch and group traffic on connections of their own, so a fetch
// waiting for data holds up nothing else.
func (b *Broker) serveConn(conn net.Conn) error {
	r := bufio.NewReaderSize(conn, 64<<10)
	w := bufio.NewWriterSize(conn, 64<<10)
	var size [4]byte
	var out []byte
	for {
		if _, err := io.ReadFull(r, size[:]); err != nil {
			return err
		}
		n := int32(binary.BigEndian.Uint32(size[:]))
		if n < 8 || n > maxRequestBytes {
			return fmt.Errorf("request of %d bytes", n)
		}
		// A buffer of its own per request: Produce keeps its batches in it.
		c, body := b.alloc(int(n))
		if body == nil {
			body = c.buf
		}
		if _, err := io.ReadFull(r, body); err != nil {
			return err
		}
		resp, fr, corr, ok, err := b.handle(body, c)
		b.mu.Lock()
		b.unref(c)
		b.mu.Unlock()
		if err != nil {
			return err
		}
		if !ok {
			continue // acks=0: no response
		}
		out = append(out[:0], 0, 0, 0, 0)
		out = binary.BigEndian.AppendUint32(out, uint32(corr))
		if fr != nil {
			// Fetch: the header and the fields in out, the batches as they
			// are kept, all in one writev.
			version := int16(binary.BigEndian.Uint16(body[2:]))
			if version >= 12 {
				out = append(out, 0) // header tags
			}
			bufs, total := appendFetch(net.Buffers{out}, version, fr)
			binary.BigEndian.PutUint32(bufs[0], uint32(total-4))
			err := w.Flush()
			if err == nil {
				_, err = bufs.WriteTo(conn)
			}
			b.release(fr)
			if err != nil {
				return err
			}
			out = nil // bufs took it
			continue
		}
		// ApiVersions answers with header v0 whatever its version.
		if resp.IsFlexible() && resp.Key() != kmsg.ApiVersions.Int16() {
			out = append(out, 0)
		}
		out = resp.AppendTo(out)
		binary.BigEndian.PutUint32(out, uint32(len(out)-4))
		if _, err := w.Write(out); err != nil {
			return err
		}
		if r.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				return err
			}
		}
		if cap(out) > 4<<20 {
			out = nil // do not pin a large fetch's buffer
		}
	}
}

// handle decodes one request and answers it; ok is false when no response
// is due.
func (b *Broker) handle(body []byte, c *chunk) (resp kmsg.Response, fr *fetchResult, corr int32, ok bool, err error) {
	key := int16(binary.BigEndian.Uint16(body))
	version := int16(binary.BigEndian.Uint16(body[2:]))
	corr = int32(binary.BigEndian.Uint32(body[4:]))
	rd := kbin.Reader{Src: body[8:]}
	rd.NullableString() // client id
	if !rd.Ok() {
		return nil, nil, corr, false, errors.New("short request header")
	}
	req := kmsg.RequestForKey(key)
	vr, known := versions[key]
	if req == nil || !known {
		return nil, nil, corr, false, fmt.Errorf("unsupported request key %d", key)
	}
	if key == kmsg.ApiVersions.Int16() && (version < vr[0] || version > vr[1]) {
		// KIP-511: a v0 answer naming our range, so the client retries
		// with a version we speak.
		av := kmsg.NewPtrApiVersionsResponse()
		av.ErrorCode = kerr.UnsupportedVersion.Code
		av.ApiKeys = apiKeys()
		return av, nil, corr, true, nil
	}
	if version < vr[0] || version > vr[1] {
		return nil, nil, corr, false, fmt.Errorf("request key %d version %d outside %d-%d", key, version, vr[0], vr[1])
	}
	req.SetVersion(version)
	if req.IsFlexible() {
		kmsg.SkipTags(&rd)
	}
	if err := req.ReadFrom(rd.Src); err != nil {
		return nil, nil, corr, false, fmt.Errorf("decode request key %d v%d: %w", key, version, err)
	}
	resp = req.ResponseKind()
	resp.SetVersion(version)
	switch req := req.(type) {
	case *kmsg.ApiVersionsRequest:
		r := resp.(*kmsg.ApiVersionsResponse)
		r.ApiKeys = apiKeys()
	case *kmsg.MetadataRequest:
		b.metadata(req, resp.(*kmsg.MetadataResponse))
	case *kmsg.CreateTopicsRequest:
		b.createTopics(req, resp.(*kmsg.CreateTopicsResponse))
	case *kmsg.InitProducerIDRequest:
		b.mu.Lock()
		r := resp.(*kmsg.InitProducerIDResponse)
		r.ProducerID, r.ProducerEpoch = b.nextPID, 0
		b.nextPID++
		b.mu.Unlock()
	case *kmsg.ProduceRequest:
		b.produce(req, resp.(*kmsg.ProduceResponse), c)
		if req.Acks == 0 {
			return nil, nil, corr, false, nil
		}
	case *kmsg.ListOffsetsRequest:
		b.listOffsets(req, resp.(*kmsg.ListOffsetsResponse))
	case *kmsg.FetchRequest:
		return nil, b.fetch(req), corr, true, nil
	default:
		if !b.groups.handle(b, req, resp) {
			return nil, nil, corr, false, fmt.Errorf("unhandled request key %d", key)
		}
	}
	return resp, nil, corr, true, nil
}

func apiKeys() []kmsg.ApiVersionsResponseApiKey {
	var out []kmsg.ApiVersionsResponseApiKey
	for k := range int16(100) {
		if vr, ok := versions[k]; ok {
			out = append(out, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: vr[0], MaxVersion: vr[1]})
		}
	}
	return out
}

func (b *Broker) metadata(req *kmsg.MetadataRequest, resp *kmsg.MetadataResponse) {
	resp.Brokers = []kmsg.MetadataResponseBroker{{NodeID: nodeID, Host: b.host, Port: b.port}}
	resp.ClusterID = kmsg.StringPtr("null")
	resp.ControllerID = nodeID
	b.mu.Lock()
	defer b.mu.Unlock()
	var names []string
	// v0 asks for every topic with an empty list, later versions with null.
	if req.Topics == nil || (req.GetVersion() == 0 && len(req.Topics) == 0) {
		names = b.order
	} else {
		for _, t := range req.Topics {
			if t.Topic != nil {
				names = append(names, *t.Topic)
			}
		}
	}
	for _, name := range names {
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic = kmsg.StringPtr(name)
		t := b.topics[name]
		if t == nil {
			mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		mt.TopicID = t.id
		for i := range t.parts {
			mp := kmsg.NewMetadataResponseTopicPartition()
			mp.Partition = int32(i)
			mp.Leader = nodeID
			mp.LeaderEpoch = 0
			mp.Replicas = []int32{nodeID}
			mp.ISR = []int32{nodeID}
			mt.Partitions = append(mt.Partitions, mp)
		}
		resp.Topics = append(resp.Topics, mt)
	}
}

func (b *Broker) createTopics(req *kmsg.CreateTopicsRequest, resp *kmsg.CreateTopicsResponse) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, rt := range req.Topics {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		n := rt.NumPartitions
		if n == -1 {
			n = 1
		}
		switch {
		case b.topics[rt.Topic] != nil:
			st.ErrorCode = kerr.TopicAlreadyExists.Code
		case rt.Topic == "" || len(rt.ReplicaAssignment) > 0:
			st.ErrorCode = kerr.InvalidRequest.Code
		case n < 1:
			st.ErrorCode = kerr.InvalidPartitions.Code
		case rt.ReplicationFactor != -1 && rt.ReplicationFactor != 1:
			// One broker: more replicas than brokers, as Kafka says.
			st.ErrorCode = kerr.InvalidReplicationFactor.Code
		default:
			st.NumPartitions, st.ReplicationFactor = n, 1
			if !req.ValidateOnly {
				t := &topic{name: rt.Topic}
				_, _ = rand.Read(t.id[:])
				for range n {
					t.parts = append(t.parts, &partition{})
				}
				b.topics[rt.Topic] = t
				b.order = append(b.order, rt.Topic)
				st.TopicID = t.id
			}
		}
		resp.Topics = append(resp.Topics, st)
	}
}

func (b *Broker) lookup(topic string, p int32) *partition {
	t := b.topics[topic]
	if t == nil || p < 0 || int(p) >= len(t.parts) {
		return nil
	}
	return t.parts[p]
}

// RecordBatch v2 header offsets.
const (
	batchHeaderLen     = 61
	offLength          = 8
	offMagic           = 16
	offLastOffsetDelta = 23
	offMaxTimestamp    = 35
)

func (b *Broker) produce(req *kmsg.ProduceRequest, resp *kmsg.ProduceResponse, c *chunk) {
	b.mu.Lock()
	defer b.mu.Unlock()
	grew := false
	for _, rt := range req.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LogAppendTime = -1
			p := b.lookup(rt.Topic, rp.Partition)
			if p == nil {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			base, code := b.append(p, rp.Records, c)
			sp.BaseOffset, sp.ErrorCode, sp.LogStartOffset = base, code, p.start
			grew = grew || code == 0
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if grew {
		close(b.appended)
		b.appended = make(chan struct{})
	}
}

// append gives the batches in recs their offsets, in place, and keeps
// them. Called with b.mu held.
func (b *Broker) append(p *partition, recs []byte, c *chunk) (base int64, code int16) {
	// Check the whole set first: a partition takes all of a request's
	// batches or none.
	for rest := recs; len(rest) > 0; {
		if len(rest) < batchHeaderLen || rest[offMagic] != 2 {
			return -1, kerr.CorruptMessage.Code
		}
		n := 12 + int(int32(binary.BigEndian.Uint32(rest[offLength:])))
		if n < batchHeaderLen || n > len(rest) {
			return -1, kerr.CorruptMessage.Code
		}
		rest = rest[n:]
	}
	if len(recs) == 0 {
		return -1, kerr.CorruptMessage.Code
	}
	base = p.end
	for len(recs) > 0 {
		n := 12 + int(binary.BigEndian.Uint32(recs[offLength:]))
		bt := batch{data: recs[:n:n], base: p.end, chunk: c}
		c.refs++
		binary.BigEndian.PutUint64(bt.data, uint64(p.end))
		bt.next = p.end + int64(int32(binary.BigEndian.Uint32(bt.data[offLastOffsetDelta:]))) + 1
		bt.maxTS = int64(binary.BigEndian.Uint64(bt.data[offMaxTimestamp:]))
		p.end = bt.next
		p.batches = append(p.batches, bt)
		b.queue = append(b.queue, p)
		b.retained += int64(n)
		recs = recs[n:]
	}
	for b.retained > b.retain && len(b.queue) > 1 {
		b.evictOldest()
	}
	return base, 0
}

// evictOldest drops the oldest batch kept, of whichever partition, and
// moves that partition's log start past it. Called with b.mu held.
func (b *Broker) evictOldest() {
	old := b.queue[0]
	b.queue[0] = nil
	b.queue = b.queue[1:]
	first := old.batches[0]
	old.batches[0] = batch{}
	old.batches = old.batches[1:]
	old.start = first.next
	b.retained -= int64(len(first.data))
	b.unref(first.chunk)
}

func (b *Broker) listOffsets(req *kmsg.ListOffsetsRequest, resp *kmsg.ListOffsetsResponse) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LeaderEpoch = 0
			p := b.lookup(rt.Topic, rp.Partition)
			switch {
			case p == nil:
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case rp.Timestamp == -1: // latest
				sp.Offset, sp.Timestamp = p.end, -1
			case rp.Timestamp == -2: // earliest
				sp.Offset, sp.Timestamp = p.start, -1
			case rp.Timestamp == -3: // max timestamp (KIP-734)
				sp.Offset, sp.Timestamp = -1, -1
				for _, bt := range p.batches {
					if bt.maxTS >= sp.Timestamp {
						sp.Offset, sp.Timestamp = bt.next-1, bt.maxTS
					}
				}
			default: // the first batch that reaches the timestamp
				sp.Offset, sp.Timestamp = -1, -1
				for _, bt := range p.batches {
					if bt.maxTS >= rp.Timestamp {
						sp.Offset, sp.Timestamp = bt.base, bt.maxTS
						break
					}
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
}

// fetchResult is a Fetch's answer before encoding: the partitions' data
// stay the kept batches, written to the socket as they are.
type fetchResult struct {
	topics []fetchTopic
	bytes  int
	failed bool     // a partition has an error: answer at once
	chunks []*chunk // holding the batches until they are sent
}

// release lets go of the buffers fr sends from.
func (b *Broker) release(fr *fetchResult) {
	b.mu.Lock()
	for _, c := range fr.chunks {
		b.unref(c)
	}
	b.mu.Unlock()
	fr.chunks = nil
}

type fetchTopic struct {
	name  string
	parts []fetchPart
}

type fetchPart struct {
	partition            int32
	code                 int16
	hw, lso, start, size int64
	batches              [][]byte
}

// fetch answers at once when there is MinBytes of data, else waits for
// appends until there is or MaxWaitMillis has passed.
func (b *Broker) fetch(req *kmsg.FetchRequest) *fetchResult {
	deadline := time.Now().Add(time.Duration(req.MaxWaitMillis) * time.Millisecond)
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		fr, wake := b.fill(req)
		if fr.failed || fr.bytes >= int(req.MinBytes) {
			return fr
		}
		d := time.Until(deadline)
		if d <= 0 {
			return fr
		}
		b.release(fr)
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		select {
		case <-wake:
		case <-b.done:
			return &fetchResult{}
		case <-timer.C:
			fr, _ = b.fill(req)
			return fr
		}
	}
}

// fill gathers the batches req asks for, and returns the channel the next
// append closes.
func (b *Broker) fill(req *kmsg.FetchRequest) (*fetchResult, <-chan struct{}) {
	fr := &fetchResult{}
	maxBytes := int(req.MaxBytes)
	if maxBytes <= 0 {
		maxBytes = 50 << 20
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, rt := range req.Topics {
		ft := fetchTopic{name: rt.Topic}
		for _, rp := range rt.Partitions {
			fp := fetchPart{partition: rp.Partition, hw: -1, lso: -1, start: -1}
			p := b.lookup(rt.Topic, rp.Partition)
			switch {
			case p == nil:
				fp.code, fr.failed = kerr.UnknownTopicOrPartition.Code, true
			case rp.FetchOffset < p.start || rp.FetchOffset > p.end:
				fp.hw, fp.lso, fp.start = p.end, p.end, p.start
				fp.code, fr.failed = kerr.OffsetOutOfRange.Code, true
			default:
				fp.hw, fp.lso, fp.start = p.end, p.end, p.start
				// The batch holding FetchOffset, then whole batches up to
				// the partition's and the request's byte limits; the
				// response's first batch goes whatever its size, so that a
				// large one cannot stall the consumer.
				for i := searchBatches(p.batches, rp.FetchOffset); i < len(p.batches); i++ {
					d := p.batches[i].data
					n := int(fp.size) + len(d)
					if fr.bytes+int(fp.size) > 0 && (n > int(rp.PartitionMaxBytes) || fr.bytes+n > maxBytes) {
						break
					}
					fp.batches = append(fp.batches, d)
					fp.size += int64(len(d))
					p.batches[i].chunk.refs++
					fr.chunks = append(fr.chunks, p.batches[i].chunk)
				}
				fr.bytes += int(fp.size)
			}
			ft.parts = append(ft.parts, fp)
		}
		fr.topics = append(fr.topics, ft)
	}
	return fr, b.appended
}

// copyBelow is the batch size under which appendFetch copies a batch
// rather than give it an iovec of its own: thousands of small batches
// (100-byte records) cost more in writev's iovecs than in copying.
const copyBelow = 16 << 10

// appendFetch encodes a Fetch response (v4 to v12) after the 4-byte size
// and the header already in bufs[0], leaving every batch of copyBelow
// bytes or more a buffer of its own so that writev sends it from where it
// is kept. It returns the total
// length.
func appendFetch(bufs net.Buffers, version int16, fr *fetchResult) (net.Buffers, int) {
	flexible := version >= 12
	cur := bufs[len(bufs)-1]
	bufs = bufs[:len(bufs)-1]
	arrayLen := func(n int) {
		if flexible {
			cur = kbin.AppendCompactArrayLen(cur, n)
		} else {
			cur = kbin.AppendArrayLen(cur, n)
		}
	}
	cur = kbin.AppendInt32(cur, 0) // throttle
	if version >= 7 {
		cur = kbin.AppendInt16(cur, 0) // error code
		cur = kbin.AppendInt32(cur, 0) // session id: no sessions
	}
	arrayLen(len(fr.topics))
	for _, t := range fr.topics {
		if flexible {
			cur = kbin.AppendCompactString(cur, t.name)
		} else {
			cur = kbin.AppendString(cur, t.name)
		}
		arrayLen(len(t.parts))
		for _, p := range t.parts {
			cur = kbin.AppendInt32(cur, p.partition)
			cur = kbin.AppendInt16(cur, p.code)
			cur = kbin.AppendInt64(cur, p.hw)
			cur = kbin.AppendInt64(cur, p.lso) // v4+
			if version >= 5 {
				cur = kbin.AppendInt64(cur, p.start)
			}
			arrayLen(0) // aborted transactions, v4+
			if version >= 11 {
				cur = kbin.AppendInt32(cur, -1) // preferred read replica
			}
			if flexible {
				cur = kbin.AppendUvarint(cur, uint32(p.size)+1)
			} else {
				cur = kbin.AppendInt32(cur, int32(p.size))
			}
			for _, d := range p.batches {
				if len(d) < copyBelow {
					cur = append(cur, d...)
					continue
				}
				bufs = append(bufs, cur, d)
				cur = nil
			}
			if flexible {
				cur = append(cur, 0) // partition tags
			}
		}
		if flexible {
			cur = append(cur, 0) // topic tags
		}
	}
	if flexible {
		cur = append(cur, 0) // response tags
	}
	bufs = append(bufs, cur)
	total := 0
	for _, b := range bufs {
		total += len(b)
	}
	return bufs, total
}

// searchBatches returns the index of the batch holding offset, or
// len(bs) when offset is at the end.
func searchBatches(bs []batch, offset int64) int {
	lo, hi := 0, len(bs)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if bs[m].next <= offset {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}
