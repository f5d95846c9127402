package replication

import (
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"

	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/metadata/topicconfig"
	"github.com/shalelog/shale/partition"
	"github.com/shalelog/shale/tiered/objstore"
	"github.com/shalelog/shale/tiered/remotelog"
)

// Tiered storage (KIP-405), the replica manager's part: which closed segments are
// uploaded and when (the leader's uploader, off every request goroutine), when a local
// segment may go (partition.SetRemoteEnd, from the image, on every replica), which
// remote segments retention and DeleteRecords delete (two-phase, through the
// controller), and reads below the local log start (Fetch, ListOffsets,
// OffsetForLeaderEpoch). tiered/remotelog stores and reads; the controller records which
// upload counts (metadata.RemoteLogStore).

// Defaults of the tiered storage settings in Config.
const (
	DefaultRemoteTaskInterval   = 30 * time.Second
	DefaultRemoteRequestTimeout = 30 * time.Second

	DefaultRemoteLogReaderThreads         = 10
	DefaultRemoteLogReaderMaxPendingTasks = 100
	DefaultRemoteFetchMaxWait             = 500 * time.Millisecond
)

// tiering is the uploader's state: it is touched by the uploader goroutine only, but
// for the counters and the lag gauges, which the scrape reads under mu.
type tiering struct {
	// m is the manager, whose replicas and image the scrape reads for the remote log
	// size gauges.
	m      *Manager
	store  objstore.Store
	logs   metadata.RemoteLogStore
	reader *remotelog.Reader

	mu    sync.Mutex
	parts map[partition.TopicPartition]*tierPartition
	// lagBytes and lagSegments are, per partition led here, the closed segments wholly
	// below the high watermark not yet in the remote log, as of the last pass.
	lagBytes, lagSegments map[partition.TopicPartition]int64

	uploadedBytes, uploadedSegments, readBytes prometheus.Counter
	errs                                       *prometheus.CounterVec

	// readTasks queues the remote reads of consumers' fetches for the reader pool
	// (nil when driven: the read is then done inline); inflight are those queued or
	// running, by what they read, so that a fetch asking again while its read is slow
	// waits for the same read instead of queueing another.
	readTasks chan func()
	inflight  map[remoteReadKey]*remoteReadCall
	// kept are the reads that completed after every fetch waiting for them had given
	// up, oldest first: they stay in inflight, answered, for the fetch that asks again
	// (keptReads).
	kept []keptRead
}

// A read that completes after its fetches gave up waiting (a store slower than
// remote.fetch.max.wait.ms) is kept for the fetch that asks for it again, at most
// keptReadsFor and keptReadsMax of them: otherwise that fetch would start the read anew
// and, the store being as slow as before, give up again, and the consumer would never
// read past that offset. keptReadsFor covers a consumer's fetch.max.wait.ms (franz-go's
// default is 5 s) before it asks again.
const (
	keptReadsFor = 15 * time.Second
	keptReadsMax = 64
)

type keptRead struct {
	key  remoteReadKey
	call *remoteReadCall
	at   time.Time
}

// remoteReadKey is what one remote read reads.
type remoteReadKey struct {
	topicID               [16]byte
	partition             int32
	uploadID              string
	offset                int64
	maxBytes              int
	minOne, readCommitted bool
}

// remoteReadCall is a remote read queued, running, or kept once answered; done is closed
// once its result is set.
type remoteReadCall struct {
	done    chan struct{}
	view    *shalelog.View
	aborted []partition.AbortedTxn
	err     error
	// waiting counts the fetches waiting for it (under tiering.mu).
	waiting int
}

// answer is the call's result for one fetch. Each fetch releases its own View; the bytes
// are shared, read-only.
func (c *remoteReadCall) answer() (*shalelog.View, []partition.AbortedTxn, error) {
	if c.err != nil {
		return nil, nil, c.err
	}
	v := *c.view
	return &v, c.aborted, nil
}

// expireKept forgets the kept reads past keptReadsFor or keptReadsMax. The caller holds
// t.mu.
func (t *tiering) expireKept(now time.Time) {
	n := 0
	for n < len(t.kept) && (len(t.kept)-n > keptReadsMax || now.Sub(t.kept[n].at) > keptReadsFor) {
		if k := t.kept[n]; t.inflight[k.key] == k.call {
			delete(t.inflight, k.key)
		}
		n++
	}
	t.kept = t.kept[n:]
}

// tierPartition is what the uploader remembers of one partition it leads.
type tierPartition struct {
	// epoch is the leader epoch the uploader last worked at: a new one (a restart, a
	// leadership change) looks for orphans, as does a failed upload or commit.
	epoch int32
	scan  bool
	// suspects are the uploads the last scan found outside the remote log: the next scan
	// deletes those still outside it.
	suspects map[string]bool
	// pending is an upload whose commit got no answer (a timeout, a lost connection): it
	// may have been applied, so its objects are not an orphan's. Its commit is sent
	// again (a resend of a committed upload succeeds again) until it is answered.
	pending *remotelog.Segment
	// straddle is the base offset of a local segment that cannot be uploaded (a batch
	// across the remote log's end), reported once.
	straddle int64
	// passes counts the uploader's passes over the partition at this epoch, for the
	// periodic orphan scan.
	passes int
}

// orphanScanEvery is how many passes apart the uploader scans a partition for orphans
// even when nothing failed: an object store may apply a write after its client gave up
// on it (a PUT that timed out while queued on a stalled server lands when the server
// resumes), which the one scan right after the failure can miss.
const orphanScanEvery = 20

func newTiering(m *Manager) *tiering {
	return &tiering{
		m: m, store: m.cfg.RemoteStore, logs: m.cfg.RemoteLogs, reader: remotelog.NewReader(m.remoteSource()),
		parts: map[partition.TopicPartition]*tierPartition{}, lagBytes: map[partition.TopicPartition]int64{},
		lagSegments:   map[partition.TopicPartition]int64{},
		uploadedBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "shale_remote_log_upload_bytes_total", Help: "Bytes of segments this broker uploaded to the remote log and committed."}),
		uploadedSegments: prometheus.NewCounter(prometheus.CounterOpts{Name: "shale_remote_log_upload_segments_total",
			Help: "Segments this broker uploaded to the remote log and committed."}),
		readBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "shale_remote_log_read_bytes_total", Help: "Bytes of records this broker served from the remote log."}),
		errs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "shale_remote_log_errors_total",
			Help: "Failed remote log operations, by operation (upload, commit, delete, read, list)."}, []string{"op"}),
	}
}

func (m *Manager) remoteSource() remotelog.Source {
	if m.cfg.RemoteSource != nil {
		return m.cfg.RemoteSource
	}
	return remotelog.Direct(m.cfg.RemoteStore)
}

var (
	// Kafka's RemoteCopyLagBytes and RemoteCopyLagSegments, per partition as Kafka's, from
	// the partition's leader, as of its uploader's last pass.
	tierLagBytes = prometheus.NewDesc("shale_remote_log_upload_lag_bytes",
		"Bytes of closed segments below the high watermark that the remote log does not hold yet, of a tiered partition this broker leads.", []string{"topic", "partition"}, nil)
	tierLagSegments = prometheus.NewDesc("shale_remote_log_upload_lag_segments",
		"Closed segments below the high watermark that the remote log does not hold yet, of a tiered partition this broker leads.", []string{"topic", "partition"}, nil)
	// KIP-963's RemoteLogSizeBytes, per partition as Kafka's, from the partition's leader
	// only, so that a sum over the brokers counts each remote log once.
	tierSizeBytes = prometheus.NewDesc("shale_remote_log_size_bytes",
		"Bytes of a tiered partition's remote log (its committed segments still part of the log), from the partition's leader.", []string{"topic", "partition"}, nil)
	tierSegments = prometheus.NewDesc("shale_remote_log_segments",
		"Segments of a tiered partition's remote log (committed, still part of the log), from the partition's leader.", []string{"topic", "partition"}, nil)
)

func (t *tiering) Describe(ch chan<- *prometheus.Desc) {
	ch <- tierLagBytes
	ch <- tierLagSegments
	ch <- tierSizeBytes
	ch <- tierSegments
	t.uploadedBytes.Describe(ch)
	t.uploadedSegments.Describe(ch)
	t.readBytes.Describe(ch)
	t.errs.Describe(ch)
}

func (t *tiering) Collect(ch chan<- prometheus.Metric) {
	t.mu.Lock()
	lagBytes, lagSegments := maps.Clone(t.lagBytes), maps.Clone(t.lagSegments)
	t.mu.Unlock()
	for tp, b := range lagBytes {
		labels := []string{tp.Topic, strconv.Itoa(int(tp.Index))}
		ch <- prometheus.MustNewConstMetric(tierLagBytes, prometheus.GaugeValue, float64(b), labels...)
		ch <- prometheus.MustNewConstMetric(tierLagSegments, prometheus.GaugeValue, float64(lagSegments[tp]), labels...)
	}
	t.collectSizes(ch)
	t.uploadedBytes.Collect(ch)
	t.uploadedSegments.Collect(ch)
	t.readBytes.Collect(ch)
	t.errs.Collect(ch)
}

// collectSizes reports the remote log size of each tiered partition led here, from the
// applied image at scrape time: a partition that goes away or whose leadership moves
// drops out at the next scrape. One led before its first upload reports 0.
func (t *tiering) collectSizes(ch chan<- prometheus.Metric) {
	im := t.m.Image()
	for _, p := range t.m.parts.All() {
		if p.Role() != partition.RoleLeader || !p.Settings().Tiered {
			continue
		}
		var size int64
		var segs int
		if rl := im.RemoteLog(p.Topic(), p.Index()); rl != nil && rl.TopicID == p.TopicID() {
			size, segs = rl.Size()
		}
		labels := []string{p.Topic(), strconv.Itoa(int(p.Index()))}
		ch <- prometheus.MustNewConstMetric(tierSizeBytes, prometheus.GaugeValue, float64(size), labels...)
		ch <- prometheus.MustNewConstMetric(tierSegments, prometheus.GaugeValue, float64(segs), labels...)
	}
}

// withTimeout bounds one call to the store or the controller by the manager's clock.
func (m *Manager) withTimeout(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	timer := m.after(d)
	go func() {
		select {
		case <-timer:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// tierLoop uploads, retains and cleans the remote logs of the partitions this broker
// leads, every RemoteTaskInterval, until the manager closes. One pass at a time, one
// call at a time, each bounded by RemoteRequestTimeout: an unreachable store delays the
// uploads (and so the local deletions), never a produce or a fetch.
func (m *Manager) tierLoop() {
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-m.after(m.cfg.RemoteTaskInterval):
		}
		m.tierPass(m.ctx)
	}
}

// purgeDeleted deletes the remote objects of the deleted tiered topics' partitions that
// the image still lists (metadata.Image.RemotePurges) and names this broker to purge
// (metadata.Image.RemotePurger), and reports each done to the controller, which drops
// its entry. The list is the quorum's, not this broker's memory, so a purge that a
// restart (of this broker or of every broker) interrupts is picked up again by whichever
// broker the image names then. A purge that fails is retried at the next pass.
func (m *Manager) purgeDeleted(ctx context.Context, im *metadata.Image) {
	t := m.tier
	for _, k := range slices.SortedFunc(maps.Keys(im.RemotePurges), func(a, b metadata.RemotePurgeKey) int {
		return cmp.Or(slices.Compare(a.TopicID[:], b.TopicID[:]), cmp.Compare(a.Partition, b.Partition))
	}) {
		if ctx.Err() != nil {
			return
		}
		p := im.RemotePurges[k]
		if im.RemotePurger(p) != m.cfg.NodeID {
			continue
		}
		lg := m.lg.With("topic", p.Topic, "topic_id", hex.EncodeToString(p.TopicID[:]), "partition", p.Partition)
		if err := m.deleteUploads(ctx, p.TopicID, p.Partition); err != nil {
			t.errs.WithLabelValues("delete").Inc()
			lg.Warn("deleting a deleted topic's remote log failed; retried at the next pass", "err", err)
			continue
		}
		cctx, cancel := m.withTimeout(ctx, m.cfg.RemoteRequestTimeout)
		err := t.logs.RemotePurged(cctx, p.TopicID, p.Partition)
		cancel()
		if err != nil {
			// The objects are gone; the next pass finds none and reports again.
			t.errs.WithLabelValues("delete").Inc()
			lg.Warn("reporting a deleted topic's remote log deleted failed; retried at the next pass", "err", err)
		}
	}
}

// deleteUploads deletes every upload under a partition's prefix in the store.
func (m *Manager) deleteUploads(ctx context.Context, topicID [16]byte, partition int32) error {
	cctx, cancel := m.withTimeout(ctx, m.cfg.RemoteRequestTimeout)
	ups, err := remotelog.ListUploads(cctx, m.tier.store, topicID, partition)
	cancel()
	if err != nil {
		return err
	}
	for _, u := range ups {
		cctx, cancel := m.withTimeout(ctx, m.cfg.RemoteRequestTimeout)
		err := remotelog.Delete(cctx, m.tier.store, u.Segment)
		cancel()
		if err != nil {
			return err
		}
	}
	return nil
}

// tierPass runs one round of the uploader over every tiered partition led here.
func (m *Manager) tierPass(ctx context.Context) {
	t := m.tier
	im := m.Image()
	m.purgeDeleted(ctx, im)
	led := map[partition.TopicPartition]bool{}
	for _, p := range m.parts.All() {
		if ctx.Err() != nil {
			return
		}
		if p.Role() != partition.RoleLeader || !p.Settings().Tiered {
			continue
		}
		tp := partition.TopicPartition{Topic: p.Topic(), Index: p.Index()}
		led[tp] = true
		m.tierPartition(ctx, im, tp, p)
	}
	t.mu.Lock()
	for tp := range t.parts {
		if !led[tp] {
			delete(t.parts, tp)
			delete(t.lagBytes, tp)
			delete(t.lagSegments, tp)
		}
	}
	t.mu.Unlock()
}

func (m *Manager) tierPartition(ctx context.Context, im *metadata.Image, tp partition.TopicPartition, p *partition.Partition) {
	t := m.tier
	topic := im.Topic(tp.Topic)
	if topic == nil || topic.ID != p.TopicID() {
		return
	}
	epoch := p.LeaderEpoch()
	t.mu.Lock()
	st := t.parts[tp]
	if st == nil || st.epoch != epoch {
		st = &tierPartition{epoch: epoch, scan: true, suspects: map[string]bool{}, straddle: -1}
		t.parts[tp] = st
	}
	t.mu.Unlock()
	rl := im.RemoteLog(tp.Topic, tp.Index)
	lg := m.lg.With("partition", tp)

	// Deletions started, by this leader or an earlier one, are finished first: their
	// segments are no longer served, only their objects are left.
	if rl != nil && len(rl.Deleting) > 0 {
		m.finishRemoteDeletes(ctx, tp, topic.ID, epoch, rl.Deleting, lg)
	}

	m.uploadSegments(ctx, tp, topic.ID, p, rl, st, lg)
	m.retainRemote(ctx, tp, topic, p, rl, epoch, lg)
	st.passes++
	if st.scan || st.passes%orphanScanEvery == 0 {
		m.cleanOrphans(ctx, tp, topic.ID, st, lg)
	}
}

// uploadSegments uploads, oldest first, each closed segment above the remote log that
// lies wholly below the high watermark and the last stable offset (so that no record a
// consumer cannot see yet, and no open transaction's, goes remote), and commits each
// through the controller before the next.
func (m *Manager) uploadSegments(ctx context.Context, tp partition.TopicPartition, topicID [16]byte, p *partition.Partition, rl *metadata.RemoteLog, st *tierPartition, lg *slog.Logger) {
	t := m.tier
	// highest is the last committed offset, which a new segment must not overlap;
	// segments wholly below the covered end are remote already, or deleted.
	highest, covered := int64(-1), int64(0)
	if rl != nil {
		highest, covered = rl.HighestOffset, rl.CoveredEnd()
	}
	blocked := false
	if st.pending != nil {
		seg := *st.pending
		cctx, cancel := m.withTimeout(ctx, m.cfg.RemoteRequestTimeout)
		err := t.logs.CommitRemoteSegment(cctx, tp.Topic, st.epoch, metaSegment(seg))
		cancel()
		var ke *kerr.Error
		switch {
		case err == nil:
			st.pending = nil
			t.uploadedBytes.Add(float64(seg.SizeBytes))
			t.uploadedSegments.Inc()
			highest, covered = max(highest, seg.EndOffset), max(covered, seg.EndOffset+1)
		case errors.As(err, &ke):
			// Refused now, yet the first send may have been applied before (and this one
			// refused for a leader epoch bumped since): the orphan scan decides, from an
			// image that shows the first send if it was applied.
			st.pending = nil
			st.scan = true
			lg.Info("an uploaded segment's commit, sent again, was refused; the orphan scan decides on its objects", "base_offset", seg.BaseOffset, "err", err)
		default:
			t.errs.WithLabelValues("commit").Inc()
			lg.Warn("committing an uploaded segment again failed; it is retried at the next pass", "base_offset", seg.BaseOffset, "err", err)
			blocked = true
		}
	}
	bound := min(p.HighWatermark(), p.LastStableOffset())
	var todo []shalelog.SealedSegment
	for _, s := range p.SealedSegments() {
		if s.NextOffset <= covered || s.Size < shalelog.BatchHeaderSize {
			continue
		}
		if s.NextOffset > bound {
			break
		}
		todo = append(todo, s)
	}
	defer func() {
		var b int64
		for _, s := range todo {
			b += s.Size
		}
		t.mu.Lock()
		t.lagBytes[tp], t.lagSegments[tp] = b, int64(len(todo))
		t.mu.Unlock()
	}()
	if blocked {
		return
	}
	entries := p.EpochEntries()
	for len(todo) > 0 {
		s := todo[0]
		// A segment this replica rolled elsewhere than the uploader of the remote log's
		// last segment did (a former follower, segment.ms, a truncation) goes on from
		// the remote log's end: only its part above is uploaded.
		part, err := segmentPart(p, s, highest)
		if err != nil {
			t.errs.WithLabelValues("upload").Inc()
			if st.straddle != s.BaseOffset {
				st.straddle = s.BaseOffset
				lg.Warn("cannot upload a segment", "base_offset", s.BaseOffset, "remote_highest_offset", highest, "err", err)
			}
			return
		}
		seg := remotelog.Segment{TopicID: topicID, Partition: tp.Index, UploadID: remotelog.NewUploadID(),
			BaseOffset: part.base, EndOffset: part.end, MaxTimestamp: part.maxTs, SizeBytes: s.Size - part.pos,
			Epochs: epochsIn(entries, part.base, part.end)}
		cctx, cancel := m.withTimeout(ctx, m.cfg.RemoteRequestTimeout)
		err = remotelog.Upload(cctx, t.store, seg, remotelog.Files{Log: s.Log, OffsetIndex: s.OffsetIndex, TimeIndex: s.TimeIndex, TxnIndex: s.TxnIndex,
			LogPosition: part.pos, ProducerSnapshot: p.ProducerSnapshotAt(s.NextOffset)})
		cancel()
		if err != nil {
			// Whatever the store kept is an orphan for the next scan.
			t.errs.WithLabelValues("upload").Inc()
			st.scan = true
			lg.Warn("uploading a segment failed; it is retried at the next pass", "base_offset", s.BaseOffset, "err", err)
			return
		}
		cctx, cancel = m.withTimeout(ctx, m.cfg.RemoteRequestTimeout)
		err = t.logs.CommitRemoteSegment(cctx, tp.Topic, st.epoch, metaSegment(seg))
		cancel()
		if err != nil {
			t.errs.WithLabelValues("commit").Inc()
			st.scan = true
			var ke *kerr.Error
			if errors.As(err, &ke) {
				// Refused for good (a newer leader, an overlap): the objects are ours
				// alone to delete.
				dctx, dcancel := m.withTimeout(ctx, m.cfg.RemoteRequestTimeout)
				if derr := remotelog.Delete(dctx, t.store, seg); derr != nil {
					t.errs.WithLabelValues("delete").Inc()
				}
				dcancel()
			} else {
				// No answer: the commit may have been applied.
				st.pending = &seg
			}
			lg.Warn("committing an uploaded segment failed", "base_offset", s.BaseOffset, "err", err)
			return
		}
		t.uploadedBytes.Add(float64(seg.SizeBytes))
		t.uploadedSegments.Inc()
		highest = seg.EndOffset
		todo = todo[1:]
	}
}

// segPart is the part of a closed segment to upload: from the batch at base, at byte
// position pos of its file, to end, the offset of its last record; maxTs is the largest
// batch timestamp in it.
type segPart struct {
	pos, base, end, maxTs int64
}

// segmentPart finds the part of a closed segment above highest, the remote log's last
// offset: the whole segment when it begins above. A batch that straddles highest
// cannot be split: the remote log ends where a batch of this log does, since every
// replica holds the same batches below the high watermark, so it is an error.
func segmentPart(p *partition.Partition, s shalelog.SealedSegment, highest int64) (segPart, error) {
	out := segPart{base: -1, end: -1, maxTs: -1}
	pos := int64(0)
	var bad error
	err := p.ScanHeaders(s.BaseOffset, func(h shalelog.Header) bool {
		if h.BaseOffset >= s.NextOffset {
			return false
		}
		switch {
		case h.LastOffset() <= highest:
			pos += int64(h.Size())
			return true
		case h.BaseOffset <= highest:
			bad = fmt.Errorf("the batch %d-%d straddles the remote log's end %d", h.BaseOffset, h.LastOffset(), highest)
			return false
		}
		if out.base < 0 {
			out.base, out.pos = h.BaseOffset, pos
		}
		out.end, out.maxTs = h.LastOffset(), max(out.maxTs, h.MaxTimestamp)
		return true
	})
	switch {
	case err != nil:
		return out, err
	case bad != nil:
		return out, bad
	case out.base < 0:
		return out, fmt.Errorf("segment %d has no batch above %d", s.BaseOffset, highest)
	}
	return out, nil
}

// epochsIn are the leader epoch entries of [base, end]: the epoch in force at base, then
// every one that starts inside.
func epochsIn(entries []partition.EpochStart, base, end int64) []remotelog.EpochEntry {
	var out []remotelog.EpochEntry
	for i, e := range entries {
		next := int64(math.MaxInt64)
		if i+1 < len(entries) {
			next = entries[i+1].StartOffset
		}
		if next <= base || e.StartOffset > end {
			continue
		}
		out = append(out, remotelog.EpochEntry{Epoch: e.Epoch, StartOffset: max(e.StartOffset, base)})
	}
	return out
}

func uploadIDString(id [16]byte) string { return hex.EncodeToString(id[:]) }

func parseUploadID(s string) ([16]byte, bool) {
	var id [16]byte
	if len(s) != 32 {
		return id, false
	}
	_, err := hex.Decode(id[:], []byte(s))
	return id, err == nil
}

func metaSegment(seg remotelog.Segment) metadata.RemoteSegment {
	out := metadata.RemoteSegment{TopicID: seg.TopicID, Partition: seg.Partition, UploadID: uploadIDString(seg.UploadID),
		BaseOffset: seg.BaseOffset, EndOffset: seg.EndOffset, MaxTimestampMs: seg.MaxTimestamp, SizeBytes: seg.SizeBytes}
	for _, e := range seg.Epochs {
		out.Epochs = append(out.Epochs, metadata.RemoteEpochStart{Epoch: e.Epoch, StartOffset: e.StartOffset})
	}
	return out
}

// storeSegment is the remote log's description of a committed segment, for its reads.
func storeSegment(s metadata.RemoteSegment) (remotelog.Segment, bool) {
	id, ok := parseUploadID(s.UploadID)
	if !ok {
		return remotelog.Segment{}, false
	}
	out := remotelog.Segment{TopicID: s.TopicID, Partition: s.Partition, UploadID: id, BaseOffset: s.BaseOffset,
		EndOffset: s.EndOffset, MaxTimestamp: s.MaxTimestampMs, SizeBytes: s.SizeBytes}
	for _, e := range s.Epochs {
		out.Epochs = append(out.Epochs, remotelog.EpochEntry{Epoch: e.Epoch, StartOffset: e.StartOffset})
	}
	return out, true
}

// retainRemote applies retention.ms and retention.bytes to the whole log, remote plus
// local, as Kafka's RLMExpirationTask: the oldest remote segments go while they are older
// than retention.ms, or while the log without them still holds retention.bytes, and so
// do those wholly below the log start DeleteRecords moved. Their deletion is started
// through the controller, then finished.
func (m *Manager) retainRemote(ctx context.Context, tp partition.TopicPartition, topic *metadata.Topic, p *partition.Partition, rl *metadata.RemoteLog, epoch int32, lg *slog.Logger) {
	if rl == nil || len(rl.Segments) == 0 {
		return
	}
	r := topicconfig.Resolve(topic.Configs, m.cfg.TopicDefaults)
	retMs, retBytes := r.Int64(topicconfig.RetentionMs), r.Int64(topicconfig.RetentionBytes)
	// The local bytes the remote log does not hold: the rest are counted remotely.
	localOnly := p.Size()
	for _, s := range p.SealedSegments() {
		if s.NextOffset <= rl.CoveredEnd() {
			localOnly -= s.Size
		}
	}
	total := rl.SizeBytes + max(localOnly, 0)
	now := m.now().UnixMilli()
	var del []metadata.RemoteSegment
	for _, s := range rl.Segments {
		byTime := retMs >= 0 && now-s.MaxTimestampMs > retMs
		byBytes := retBytes >= 0 && total-s.SizeBytes >= retBytes
		if !byTime && !byBytes && s.EndOffset >= rl.LogStart {
			break
		}
		del = append(del, s)
		total -= s.SizeBytes
	}
	if len(del) == 0 {
		return
	}
	ids := make([]string, len(del))
	for i, s := range del {
		ids[i] = s.UploadID
	}
	cctx, cancel := m.withTimeout(ctx, m.cfg.RemoteRequestTimeout)
	err := m.tier.logs.StartRemoteDelete(cctx, tp.Topic, topic.ID, tp.Index, epoch, ids, 0)
	cancel()
	if err != nil {
		m.tier.errs.WithLabelValues("delete").Inc()
		lg.Warn("starting the deletion of remote segments failed", "segments", len(ids), "err", err)
		return
	}
	m.finishRemoteDeletes(ctx, tp, topic.ID, epoch, del, lg)
}

// finishRemoteDeletes deletes the objects of segments whose deletion started, then drops
// their records.
func (m *Manager) finishRemoteDeletes(ctx context.Context, tp partition.TopicPartition, topicID [16]byte, epoch int32, segs []metadata.RemoteSegment, lg *slog.Logger) {
	var done []string
	for _, s := range segs {
		seg, ok := storeSegment(s)
		if ok {
			cctx, cancel := m.withTimeout(ctx, m.cfg.RemoteRequestTimeout)
			err := remotelog.Delete(cctx, m.tier.store, seg)
			cancel()
			if err != nil {
				m.tier.errs.WithLabelValues("delete").Inc()
				lg.Warn("deleting a remote segment's objects failed; retried at the next pass", "base_offset", s.BaseOffset, "err", err)
				break
			}
		}
		done = append(done, s.UploadID)
	}
	if len(done) == 0 {
		return
	}
	cctx, cancel := m.withTimeout(ctx, m.cfg.RemoteRequestTimeout)
	defer cancel()
	if err := m.tier.logs.FinishRemoteDelete(cctx, tp.Topic, topicID, tp.Index, epoch, done); err != nil {
		m.tier.errs.WithLabelValues("delete").Inc()
		lg.Warn("finishing the deletion of remote segments failed", "segments", len(done), "err", err)
	}
}

// cleanOrphans deletes the uploads of a partition that the remote log does not hold:
// failed uploads, and commits refused. It judges by the image as it is after the
// listing, which shows every commit this uploader got an answer to (the controller
// client returns only once its cache shows the answer) and every commit of an earlier
// leader that was applied (those applied later are fenced by the leader epoch this
// broker leads at). An upload whose commit got no answer (pending) is kept. An upload is
// deleted at the second scan that finds it outside the remote log, so that a scan that
// races with a commit never deletes at once.
func (m *Manager) cleanOrphans(ctx context.Context, tp partition.TopicPartition, topicID [16]byte, st *tierPartition, lg *slog.Logger) {
	cctx, cancel := m.withTimeout(ctx, m.cfg.RemoteRequestTimeout)
	ups, err := remotelog.ListUploads(cctx, m.tier.store, topicID, tp.Index)
	cancel()
	if err != nil {
		m.tier.errs.WithLabelValues("list").Inc()
		lg.Warn("listing a partition's uploads failed", "err", err)
		return
	}
	// The metadata cache, which the controller client's answers wait for, may be ahead
	// of the image this manager has applied.
	im := m.Image()
	if c := m.store.Current(); c != nil && c.Offset > im.Offset {
		im = c
	}
	rl := im.RemoteLog(tp.Topic, tp.Index)
	if rl != nil && rl.TopicID != topicID {
		return // the topic was deleted and made again since the pass began
	}
	seen := map[string]bool{}
	for _, u := range ups {
		id := uploadIDString(u.Segment.UploadID)
		if _, ok := rl.Upload(id); ok {
			continue
		}
		if st.pending != nil && uploadIDString(st.pending.UploadID) == id {
			continue
		}
		seen[id] = true
		if !st.suspects[id] {
			st.suspects[id] = true
			continue
		}
		dctx, dcancel := m.withTimeout(ctx, m.cfg.RemoteRequestTimeout)
		err := remotelog.Delete(dctx, m.tier.store, u.Segment)
		dcancel()
		if err != nil {
			m.tier.errs.WithLabelValues("delete").Inc()
			continue
		}
		lg.Info("deleted an orphan upload", "upload_id", id, "base_offset", u.Segment.BaseOffset)
		delete(st.suspects, id)
		delete(seen, id)
	}
	for id := range st.suspects {
		if !seen[id] {
			delete(st.suspects, id)
		}
	}
	st.scan = len(st.suspects) > 0
}

// remoteLog is the partition's remote log in the applied image when its topic is tiered
// and the remote log is on here, else nil.
func (m *Manager) remoteLog(p *partition.Partition) *metadata.RemoteLog {
	if m.tier == nil {
		return nil
	}
	rl := m.Image().RemoteLog(p.Topic(), p.Index())
	if rl == nil || rl.TopicID != p.TopicID() {
		return nil
	}
	return rl
}

// logStart is the partition's log start: the remote log's when it begins below the
// local log.
func logStart(p *partition.Partition, rl *metadata.RemoteLog) int64 {
	local := p.LogStartOffset()
	if rl != nil && rl.StartOffset >= 0 && rl.StartOffset < local {
		return rl.StartOffset
	}
	return local
}

// startRemoteReaders starts the reader pool, which stops with the manager.
func (m *Manager) startRemoteReaders() {
	m.tier.readTasks = make(chan func(), m.cfg.RemoteLogReaderMaxPendingTasks)
	m.tier.inflight = map[remoteReadKey]*remoteReadCall{}
	for range m.cfg.RemoteLogReaderThreads {
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			for {
				select {
				case <-m.ctx.Done():
					return
				case task := <-m.tier.readTasks:
					task()
				}
			}
		}()
	}
}

// errRemoteReadersBusy answers a fetch whose remote read finds the reader pool's queue
// full, as Kafka answers one its RemoteLogReader executor rejects (UNKNOWN_SERVER_ERROR).
var errRemoteReadersBusy = fmt.Errorf("%w: too many remote log reads pending", kerr.UnknownServerError)

// RemoteWait is the time one pass over a fetch's partitions may wait for remote reads:
// RemoteFetchMaxWait from the first remote read that waits, shared by every remote
// partition of the pass. Without it, a fetch of k partitions below their local log
// starts would wait k times remote.fetch.max.wait.ms on a slow store, past the
// consumer's request.timeout.ms for large k, and the consumer would never get an answer;
// Kafka too waits for a fetch's remote reads together (one DelayedRemoteFetch). The zero
// value is ready; it is not reused across passes.
type RemoteWait struct {
	mu   sync.Mutex
	over chan struct{} // closed once the wait is spent; nil until a read waits
}

// expired returns a channel closed once RemoteFetchMaxWait has passed since the pass's
// first remote wait (or the manager stops). A nil w is a wait of its own.
func (w *RemoteWait) expired(m *Manager) <-chan struct{} {
	if w == nil {
		w = &RemoteWait{}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.over == nil {
		w.over = make(chan struct{})
		timer, over := m.after(m.cfg.RemoteFetchMaxWait), w.over
		go func() { // lives RemoteFetchMaxWait at most, or until the manager stops
			select {
			case <-timer:
			case <-m.ctx.Done():
			}
			close(over)
		}()
	}
	return w.over
}

// remoteFetch is remoteRead for a consumer's fetch, done by the reader pool so that a
// slow store holds up neither the request goroutine nor the fetch's other partitions
// for longer than the pass's RemoteWait: the partition is answered empty then (the
// consumer asks again, and the read goes on), never with an error for a merely slow
// store. A fetch asking for a read already queued or running waits for that one, and
// one asking for a read that ended after its fetches gave up takes its answer (kept).
func (m *Manager) remoteFetch(rl *metadata.RemoteLog, offset int64, maxBytes int, minOne, readCommitted bool, wait *RemoteWait) (*shalelog.View, []partition.AbortedTxn, error) {
	t := m.tier
	if t.readTasks == nil {
		return m.remoteRead(rl, offset, maxBytes, minOne, readCommitted)
	}
	s, ok := rl.Find(offset)
	if !ok || s.BaseOffset > offset {
		return nil, nil, fmt.Errorf("%w: offset %d is not in the remote log", kerr.OffsetOutOfRange, offset)
	}
	key := remoteReadKey{topicID: s.TopicID, partition: s.Partition, uploadID: s.UploadID, offset: offset, maxBytes: maxBytes, minOne: minOne, readCommitted: readCommitted}
	t.mu.Lock()
	t.expireKept(m.now())
	call := t.inflight[key]
	if call != nil {
		select {
		case <-call.done: // kept: answered after its fetches gave up; this one takes it
			delete(t.inflight, key)
			t.mu.Unlock()
			return call.answer()
		default:
		}
	}
	if call == nil {
		call = &remoteReadCall{done: make(chan struct{})}
		task := func() {
			call.view, call.aborted, call.err = m.remoteRead(rl, offset, maxBytes, minOne, readCommitted)
			t.mu.Lock()
			if call.waiting > 0 {
				delete(t.inflight, key)
			} else {
				t.kept = append(t.kept, keptRead{key: key, call: call, at: m.now()})
			}
			close(call.done)
			t.mu.Unlock()
		}
		select {
		case t.readTasks <- task:
			t.inflight[key] = call
		default:
			t.mu.Unlock()
			t.errs.WithLabelValues("read").Inc()
			return nil, nil, errRemoteReadersBusy
		}
	}
	call.waiting++
	t.mu.Unlock()
	select {
	case <-call.done:
	case <-wait.expired(m):
	}
	// Under t.mu, where the read's end is published: either it has ended (and this
	// fetch answers with it, even if the wait ran out at the same moment), or it ends
	// later and, with no fetch waiting, is kept for the next.
	t.mu.Lock()
	call.waiting--
	select {
	case <-call.done:
		t.mu.Unlock()
		return call.answer()
	default:
	}
	t.mu.Unlock()
	return &shalelog.View{FirstOffset: offset, NextOffset: offset}, nil, nil
}

// remoteRead answers a consumer's read below the local log start from the remote log:
// whole batches of the segment holding offset, within maxBytes (at least one with
// minOne), and, for read_committed, the aborted transactions they span.
func (m *Manager) remoteRead(rl *metadata.RemoteLog, offset int64, maxBytes int, minOne, readCommitted bool) (*shalelog.View, []partition.AbortedTxn, error) {
	s, ok := rl.Find(offset)
	if !ok || s.BaseOffset > offset {
		return nil, nil, fmt.Errorf("%w: offset %d is not in the remote log", kerr.OffsetOutOfRange, offset)
	}
	seg, ok := storeSegment(s)
	if !ok {
		return nil, nil, fmt.Errorf("%w: remote segment %s has a malformed upload id", kerr.KafkaStorageError, s.UploadID)
	}
	if !minOne && maxBytes <= 0 {
		return &shalelog.View{FirstOffset: offset, NextOffset: offset}, nil, nil
	}
	ctx, cancel := m.withTimeout(m.ctx, m.cfg.RemoteRequestTimeout)
	defer cancel()
	b, err := m.tier.reader.Read(ctx, seg, offset, max(maxBytes, 1))
	if err != nil {
		m.tier.errs.WithLabelValues("read").Inc()
		return nil, nil, fmt.Errorf("%w: reading the remote log: %w", kerr.KafkaStorageError, err)
	}
	if len(b) == 0 {
		return &shalelog.View{FirstOffset: offset, NextOffset: offset}, nil, nil
	}
	if !minOne && len(b) > maxBytes {
		return &shalelog.View{FirstOffset: offset, NextOffset: offset}, nil, nil
	}
	first, last, err := batchSpan(b)
	if err != nil {
		m.tier.errs.WithLabelValues("read").Inc()
		return nil, nil, fmt.Errorf("%w: remote segment %d: %w", kerr.KafkaStorageError, s.BaseOffset, err)
	}
	m.tier.readBytes.Add(float64(len(b)))
	v := &shalelog.View{Chunks: [][]byte{b}, Sections: []shalelog.Section{{}}, Size: len(b), FirstOffset: first, NextOffset: last + 1}
	if !readCommitted {
		return v, nil, nil
	}
	aborted, err := m.remoteAborted(ctx, rl, s, first, last+1)
	if err != nil {
		m.tier.errs.WithLabelValues("read").Inc()
		return nil, nil, fmt.Errorf("%w: remote transaction index: %w", kerr.KafkaStorageError, err)
	}
	return v, aborted, nil
}

// remoteAborted lists the aborted transactions a read of [from, to) spans, from the
// transaction indexes of the remote segments from s on.
func (m *Manager) remoteAborted(ctx context.Context, rl *metadata.RemoteLog, s metadata.RemoteSegment, from, to int64) ([]partition.AbortedTxn, error) {
	var out []partition.AbortedTxn
	for _, rs := range rl.Segments {
		if rs.EndOffset < s.BaseOffset {
			continue
		}
		seg, ok := storeSegment(rs)
		if !ok {
			continue
		}
		txns, done, err := m.tier.reader.AbortedTxns(ctx, seg, from, to)
		if err != nil {
			return nil, err
		}
		for _, a := range txns {
			out = append(out, partition.AbortedTxn{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset})
		}
		if done {
			break
		}
	}
	return out, nil
}

// batchSpan returns the first and last offsets of whole batches in b.
func batchSpan(b []byte) (first, last int64, err error) {
	first = -1
	for len(b) > 0 {
		h, err := shalelog.ParseHeader(b)
		if err != nil {
			return 0, 0, err
		}
		if first < 0 {
			first = h.BaseOffset
		}
		last = h.LastOffset()
		n := int(h.Length) + 12
		if n > len(b) {
			return 0, 0, fmt.Errorf("%w: batch past the end of the read", shalelog.ErrCorruptMessage)
		}
		b = b[n:]
	}
	return first, last, nil
}

// remoteOffsetForTimestamp finds the first record at or after ts in the remote log,
// below limit (ok false when the remote log has none).
func (m *Manager) remoteOffsetForTimestamp(rl *metadata.RemoteLog, ts, limit int64) (ListedOffset, bool, error) {
	none := ListedOffset{Offset: -1, Timestamp: -1, LeaderEpoch: -1}
	ctx, cancel := m.withTimeout(m.ctx, m.cfg.RemoteRequestTimeout)
	defer cancel()
	for _, s := range rl.Segments {
		if s.MaxTimestampMs < ts || s.EndOffset < rl.StartOffset {
			continue
		}
		seg, ok := storeSegment(s)
		if !ok {
			continue
		}
		base, found, err := m.tier.reader.OffsetForTimestamp(ctx, seg, ts)
		if err != nil {
			m.tier.errs.WithLabelValues("read").Inc()
			return none, false, fmt.Errorf("%w: reading the remote log: %w", kerr.KafkaStorageError, err)
		}
		if !found {
			continue
		}
		b, err := m.tier.reader.Read(ctx, seg, max(base, rl.StartOffset), 1)
		if err != nil {
			m.tier.errs.WithLabelValues("read").Inc()
			return none, false, fmt.Errorf("%w: reading the remote log: %w", kerr.KafkaStorageError, err)
		}
		if out, ok, err := recordAtOrAfter(b, rl.StartOffset, limit, ts); err != nil || ok {
			return out, ok, err
		}
	}
	return none, false, nil
}

// recordAtOrAfter finds, in whole batches b, the first record at or past start and below
// limit whose timestamp is at least ts.
func recordAtOrAfter(b []byte, start, limit, ts int64) (ListedOffset, bool, error) {
	for len(b) > 0 {
		h, err := shalelog.ParseHeader(b)
		if err != nil {
			return ListedOffset{}, false, err
		}
		n := int(h.Length) + 12
		if n > len(b) {
			return ListedOffset{}, false, shalelog.ErrCorruptMessage
		}
		out, ok, err := matchRecord(b[:n], start, limit, func(recTS int64) bool { return recTS >= ts })
		if err != nil || ok {
			return out, ok, err
		}
		b = b[n:]
	}
	return ListedOffset{}, false, nil
}
