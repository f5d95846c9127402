package protocol

import (
	"context"
	"reflect"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/replication"
)

// defaultFetchMaxBytes is fetch.max.bytes' default, for Fetch v0-v2 that carry no limit.
const defaultFetchMaxBytes = 50 << 20

func (s *Server) handleFetch(ctx context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.FetchRequest)
	who := fetchReader(req, r)
	fc := s.newFetchContext(req, r.Version, who.IsFollower())
	if fc.errCode != 0 {
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		resp.ErrorCode = fc.errCode
		return Result{Resp: resp}
	}

	// Consumers need READ on each topic; followers (replication) CLUSTER_ACTION on the
	// cluster, without which every partition is refused, as in Kafka.
	mayRead := s.topicCheck(r, opRead)
	if who.IsFollower() && s.authorizing() {
		ok := s.allowedCluster(r, opClusterAction)
		mayRead = func(string) bool { return ok }
	}
	build := func() ([]fetchRead, int, bool, fetchWait) {
		return s.readFetch(fc.items, req, r.Version, who, mayRead)
	}
	finish := func(reads []fetchRead) Result {
		return s.fetchResult(req, fc, reads, who.IsFollower())
	}
	reads, n, stop, fw := build()
	maxWait := time.Duration(req.MaxWaitMillis) * time.Millisecond
	if stop || n >= int(req.MinBytes) || maxWait <= 0 || len(fw.watches) == 0 {
		return finish(reads)
	}
	releaseReads(reads)
	deadline := r.Received.Add(maxWait)
	m := s.cfg.Metrics
	return Result{Wait: func(ctx context.Context) Result {
		m.FetchPollWaiting.Inc()
		defer m.FetchPollWaiting.Dec()
		timer := time.NewTimer(time.Until(deadline))
		defer timer.Stop()
		for {
			woke := waitAny(ctx, fw.chans(), timer.C)
			if woke {
				m.FetchPollWakes.Inc()
				// Every append wakes every fetch parked on the partition: read again only
				// when that could answer, so that many consumers with a large
				// fetch.min.bytes do not each read the log at every append.
				if time.Now().Before(deadline) && !s.worthReading(&fw, int64(req.MinBytes)-int64(n)) {
					continue
				}
				m.FetchPollRereads.Inc()
			}
			reads, n, stop, fw = build()
			if !woke || stop || n >= int(req.MinBytes) || len(fw.watches) == 0 || !time.Now().Before(deadline) {
				return finish(reads)
			}
			releaseReads(reads)
		}
	}}
}

// fetchWait is what a parked fetch waits on: one watch per partition it may get data
// from, and the metadata image its reads resolved names and brokers in.
type fetchWait struct {
	im      *metadata.Image
	watches []fetchWatch
	buf     []<-chan struct{}
	// unbounded: the read holds data of a partition no count follows (committed
	// offsets served from the controller), which may grow without a wake-up of its own.
	unbounded bool
}

// fetchWatch is one partition's waiter and, when the read can be bounded without
// reading, its Progress.
type fetchWatch struct {
	ch   <-chan struct{}
	prog replication.Progress
}

func (fw *fetchWait) chans() []<-chan struct{} {
	fw.buf = fw.buf[:0]
	for _, w := range fw.watches {
		fw.buf = append(fw.buf, w.ch)
	}
	return fw.buf
}

// worthReading reports whether a woken fetch that still needs need bytes should read its
// partitions again: when the bytes that became readable since its last read could make
// up need, or when something else changed that its answer depends on (then it reads
// again at once, as it did at every wake-up before). Otherwise it re-arms the waiters
// and the fetch parks again with its answer unchanged: a read now would find less than
// MinBytes, and a new read on a later wake-up finds everything this one would have.
func (s *Server) worthReading(fw *fetchWait, need int64) bool {
	if fw.unbounded || s.image() != fw.im {
		// A new image can fence the fetching broker, delete a topic or move leaders.
		return true
	}
	for _, w := range fw.watches {
		if w.prog.Valid() {
			continue
		}
		select {
		case <-w.ch:
			return true // a partition without a byte count (__consumer_offsets, a throttled follower)
		default:
		}
	}
	var more int64
	for i := range fw.watches {
		w := &fw.watches[i]
		if !w.prog.Valid() {
			continue
		}
		w.ch = w.prog.Waiter() // re-arm first: what NewBytes misses closes it
		n, reread := w.prog.NewBytes()
		if reread {
			return true
		}
		more += n
	}
	return more >= need
}

// fetchResult shapes the final answer: the session decides which partitions it carries.
func (s *Server) fetchResult(req *kmsg.FetchRequest, fc *fetchContext, reads []fetchRead, privileged bool) Result {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	sessionID, keep := s.finishFetchContext(fc, reads, privileged)
	resp.SessionID = sessionID
	parts := assembleFetch(resp, fc.items, reads, keep)
	var total int
	for _, fp := range parts {
		total += fp.view.Size
	}
	s.cfg.Metrics.BytesFetched.Add(float64(total))
	bufs, sections := encodeFetch(resp, parts, s.sentinel)
	return Result{Encoded: bufs, Sections: sections, Flexible: resp.IsFlexible(), Release: func() { releaseReads(reads) }}
}

// fetchRead is one partition's answer before the response is assembled.
type fetchRead struct {
	rp   kmsg.FetchResponseTopicPartition
	view *shalelog.View
}

func (r *fetchRead) size() int {
	if r.view == nil {
		return len(r.rp.RecordBatches) // __consumer_offsets answers with its records inline
	}
	return r.view.Size
}

func releaseReads(reads []fetchRead) {
	for _, r := range reads {
		if r.view != nil {
			r.view.Release()
		}
	}
}

// assembleFetch fills resp.Topics with the kept reads, grouping consecutive partitions
// of one topic as Kafka does, and returns the views to splice in, in response order.
func assembleFetch(resp *kmsg.FetchResponse, items []fetchItem, reads []fetchRead, keep []bool) []fetchPart {
	type at struct{ t, p, read int }
	var spliced []at
	prev := -1
	for i := range reads {
		if !keep[i] {
			continue
		}
		if prev < 0 || !sameTopic(items[prev].key, items[i].key) {
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic, rt.TopicID = items[i].key.topic, items[i].key.topicID
			resp.Topics = append(resp.Topics, rt)
		}
		prev = i
		rt := &resp.Topics[len(resp.Topics)-1]
		if reads[i].view != nil {
			spliced = append(spliced, at{len(resp.Topics) - 1, len(rt.Partitions), i})
		}
		rt.Partitions = append(rt.Partitions, reads[i].rp)
	}
	parts := make([]fetchPart, len(spliced))
	for i, a := range spliced {
		parts[i] = fetchPart{rp: &resp.Topics[a.t].Partitions[a.p], view: reads[a.read].view}
	}
	return parts
}

func sameTopic(a, b fetchKey) bool { return a.topic == b.topic && a.topicID == b.topicID }

// waitAny blocks until one of chans is closed (true), the timer fires or ctx ends (false).
func waitAny(ctx context.Context, chans []<-chan struct{}, timer <-chan time.Time) bool {
	if len(chans) == 1 {
		select {
		case <-chans[0]:
			return true
		case <-timer:
		case <-ctx.Done():
		}
		return false
	}
	cases := make([]reflect.SelectCase, 0, len(chans)+2)
	cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timer)},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())})
	for _, c := range chans {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(c)})
	}
	i, _, _ := reflect.Select(cases)
	return i >= 2
}

// readFetch reads every partition of a fetch once. It returns each partition's answer,
// the bytes gathered, whether to answer at once regardless of MinBytes (an error, as
// Kafka does), and what to park on otherwise.
func (s *Server) readFetch(items []fetchItem, req *kmsg.FetchRequest, version int16, who replication.Reader, mayRead func(string) bool) ([]fetchRead, int, bool, fetchWait) {
	im := s.image()
	fw := fetchWait{im: im}
	remaining := int(req.MaxBytes)
	if version < 3 || remaining <= 0 {
		remaining = defaultFetchMaxBytes
	}
	var (
		total int
		stop  bool
	)
	reads := make([]fetchRead, len(items))
	// One bound on the remote reads of this pass, however many partitions are remote.
	remoteWait := new(replication.RemoteWait)
	for i, it := range items {
		rp := &reads[i].rp
		*rp = kmsg.NewFetchResponseTopicPartition()
		// Empty, not null, records when there are none (an error, a redirect), as Kafka
		// sends: librdkafka refuses a whole response with a null (-1) record set in it
		// ("invalid MessageSetSize -1").
		rp.RecordBatches = []byte{}
		rp.Partition = it.key.partition
		rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
		name := it.key.topic
		if version >= 13 {
			// Fetch v13+ names topics by id only.
			var unknownID bool
			if name, unknownID = topicNameByID(im, it.key.topicID); unknownID {
				rp.ErrorCode = kerr.UnknownTopicID.Code
				stop = true
				continue
			}
		}
		if !mayRead(name) {
			// Like Kafka, a refused partition does not cut the long poll of the others.
			rp.ErrorCode = errTopicDenied.Code
			continue
		}
		if who.IsFollower() && version < 15 {
			// Only Fetch v15+ carries the broker epoch that proves a replica is current.
			rp.ErrorCode = kerr.NotLeaderForPartition.Code
			stop = true
			continue
		}
		maxBytes := min(it.part.MaxBytes, remaining)
		if maxBytes <= 0 && total > 0 {
			maxBytes = 0
		}
		if name == metadata.OffsetsTopic { // consumer_offsets.go
			n, waiter, err := s.fetchOffsetsTopic(im, it, max(maxBytes, 0), rp)
			if err != nil {
				rp.ErrorCode, stop = errorCode(err), true
			} else if n > 0 {
				total, remaining = total+n, remaining-n
				fw.unbounded = true
			} else {
				fw.watches = append(fw.watches, fetchWatch{ch: waiter})
			}
			continue
		}
		f := it.part
		f.Topic, f.TopicID, f.MaxBytes, f.MinOne = name, fetchTopicID(version, it.key.topicID), max(maxBytes, 0), total == 0
		f.ReadCommitted = req.IsolationLevel == 1 && version >= 4
		f.RemoteWait = remoteWait
		res := s.deps.Replicas.Fetch(who, f)
		rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = res.HighWatermark, res.LastStableOffset, res.LogStartOffset
		for _, a := range res.AbortedTxns {
			at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
			at.ProducerID, at.FirstOffset = a.ProducerID, a.FirstOffset
			rp.AbortedTransactions = append(rp.AbortedTransactions, at)
		}
		if res.Err != nil {
			rp.ErrorCode = errorCode(res.Err)
			stop = true
			continue
		}
		if res.PreferredReadReplica >= 0 {
			// KIP-392: read from that follower instead; answered at once, as Kafka does.
			rp.PreferredReadReplica = res.PreferredReadReplica
			stop = true
			continue
		}
		if res.DivergingEpoch >= 0 || res.DivergingEndOffset >= 0 {
			// The fetcher's log diverged from ours: tell it where to truncate.
			rp.DivergingEpoch.Epoch, rp.DivergingEpoch.EndOffset = res.DivergingEpoch, res.DivergingEndOffset
			stop = true
			continue
		}
		fw.watches = append(fw.watches, fetchWatch{ch: res.Waiter, prog: res.Progress})
		if res.View == nil {
			continue
		}
		reads[i].view = res.View
		total += res.View.Size
		remaining -= res.View.Size
	}
	return reads, total, stop, fw
}

// fetchReader says who sends a fetch: a follower names itself in ReplicaState (v15+) or
// ReplicaID (earlier versions, which cannot prove their broker epoch). A consumer's
// Fetch v11+ carries its rack (KIP-392): as in Kafka, only such a fetch may be served by
// a follower or pointed at one.
func fetchReader(req *kmsg.FetchRequest, r *Request) replication.Reader {
	version := r.Version
	who := replication.Reader{ReplicaID: req.ReplicaID, BrokerEpoch: -1}
	if version >= 15 {
		who = replication.Reader{ReplicaID: req.ReplicaState.ID, BrokerEpoch: req.ReplicaState.Epoch}
	}
	if !who.IsFollower() && version >= 11 {
		who.Client = &replication.ClientMetadata{RackID: req.Rack, ClientID: r.ClientID, Listener: r.Listener}
	}
	return who
}

// fetchTopicID is the topic id a fetch names its topic by: only Fetch v13+ does, and the
// replica manager then checks it against its replica's.
func fetchTopicID(version int16, id [16]byte) [16]byte {
	if version < 13 {
		return [16]byte{}
	}
	return id
}

// topicNameByID resolves a topic id; unknown is true when no topic has it.
func topicNameByID(im *metadata.Image, id [16]byte) (name string, unknown bool) {
	if offsetsTopicByID(im, id) {
		return metadata.OffsetsTopic, false
	}
	for _, t := range im.Topics {
		if t.ID == id {
			return t.Name, false
		}
	}
	return "", true
}

// fetchAPI: from v4, as the log holds only message format v2 and v0-v3 clients would
// need it down-converted; librdkafka needs v4 in range. v16+ (KIP-951's leader hints and
// later) are not served.
var fetchAPI = api{key: kmsg.Fetch, min: 4, max: 15, handle: (*Server).handleFetch, errors: errorsOf(fetchError)}

// fetchError answers with the top-level code (v7+) and no partitions, as Kafka does.
func fetchError(req *kmsg.FetchRequest, code int16) *kmsg.FetchResponse {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	resp.ErrorCode = code
	return resp
}
