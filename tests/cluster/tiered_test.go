package cluster

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/internal/testutil"
	"github.com/shalelog/shale/tests/s3server"
	"github.com/shalelog/shale/tiered/objstore"
	"github.com/shalelog/shale/tiered/remotelog"
)

// Tiered storage (KIP-405) end to end: real Shale processes upload to a real S3 server
// (versitygw) and clients of three lineages read the history back from the remote log.

const tieredTopic = "tiered"

// newTieredCluster starts versitygw and a cluster whose every node has tiered storage on,
// pointed at it: path-style addressing, plain http on loopback, keys from a
// shared-credentials file. The uploader and retention run every 200 ms so that segments
// leave the local disks within seconds.
func newTieredCluster(t *testing.T) (*cluster, *s3server.Server) {
	t.Helper()
	return newTieredClusterWith(t, nil)
}

// newTieredClusterWith is newTieredCluster with brokerExtra settings for each broker.
func newTieredClusterWith(t *testing.T, brokerExtra func(id int32) []string) (*cluster, *s3server.Server) {
	t.Helper()
	s3 := s3server.Start(t)
	c := newClusterWith(t, brokerExtra,
		"--remote.log.storage.system.enable=true",
		"--remote.log.manager.task.interval.ms=200",
		"--log.retention.check.interval.ms=200",
		"--remote.storage.s3.endpoint="+s3.Endpoint,
		"--remote.storage.s3.bucket="+s3.Bucket,
		"--remote.storage.s3.path.style=true",
		"--remote.storage.s3.credentials.file="+s3.CredentialsFile(t),
	)
	return c, s3
}

// createTieredTopic creates a one-partition topic, replicated on the three brokers, whose
// segments roll every few KiB and of which each replica keeps about two locally.
func createTieredTopic(t *testing.T, c *cluster, name string) {
	t.Helper()
	req := newTopic(name, 1, 3)
	for k, v := range map[string]string{
		"remote.storage.enable": "true",
		"segment.bytes":         "4096",
		"local.retention.bytes": "8192",
		"local.retention.ms":    "-2",
		"min.insync.replicas":   "2",
	} {
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		cfg.Name, cfg.Value = k, kmsg.StringPtr(v)
		req.Topics[0].Configs = append(req.Topics[0].Configs, cfg)
	}
	createTopic(t, c.brokers[0].addr, req)
}

// tRecord is a record as every client reports it, for byte-wise comparison.
type tRecord struct {
	Offset  int64
	Key     []byte
	Value   []byte
	Headers [][2][]byte
}

func (r tRecord) String() string {
	return fmt.Sprintf("offset %d key %q value %x headers %q", r.Offset, r.Key, r.Value, r.Headers)
}

func equalRecords(a, b tRecord) bool {
	if a.Offset != b.Offset || !bytes.Equal(a.Key, b.Key) || !bytes.Equal(a.Value, b.Value) || len(a.Headers) != len(b.Headers) {
		return false
	}
	for i := range a.Headers {
		if !bytes.Equal(a.Headers[i][0], b.Headers[i][0]) || !bytes.Equal(a.Headers[i][1], b.Headers[i][1]) {
			return false
		}
	}
	return true
}

// checkSame fails unless got is want, record for record.
func checkSame(t *testing.T, client string, want, got []tRecord) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s read %d records, want %d", client, len(got), len(want))
	}
	for i := range want {
		if !equalRecords(want[i], got[i]) {
			t.Fatalf("%s: record #%d is\n  %v\nwant\n  %v", client, i, got[i], want[i])
		}
	}
}

// produceNumbered produces n numbered records with acks=all in small synchronous
// batches (each well under segment.bytes) and returns them with their offsets. The
// values hold every byte value, so that a client that mangles binary shows.
func produceNumbered(t *testing.T, cl *kgo.Client, topic string, from, n int) []tRecord {
	t.Helper()
	var out []tRecord
	for i := from; i < from+n; {
		var batch []*kgo.Record
		for j := 0; j < 8 && i < from+n; j, i = j+1, i+1 {
			val := make([]byte, 200)
			for k := range val {
				val[k] = byte(i + k)
			}
			copy(val, fmt.Sprintf("record-%06d|", i))
			batch = append(batch, &kgo.Record{
				Topic: topic, Partition: 0, Key: []byte(fmt.Sprintf("key-%06d", i)), Value: val,
				Headers: []kgo.RecordHeader{{Key: "n", Value: []byte(fmt.Sprint(i))}, {Key: "bin", Value: []byte{0, 0xff, byte(i)}}},
			})
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res := cl.ProduceSync(ctx, batch...)
		cancel()
		if err := res.FirstErr(); err != nil {
			t.Fatalf("produce records up to #%d: %v", i, err)
		}
		for _, r := range res {
			tr := tRecord{Offset: r.Record.Offset, Key: r.Record.Key, Value: r.Record.Value}
			for _, h := range r.Record.Headers {
				tr.Headers = append(tr.Headers, [2][]byte{[]byte(h.Key), h.Value})
			}
			out = append(out, tr)
		}
	}
	return out
}

// listOffset asks the partition's leader for one ListOffsets timestamp: -2 earliest, -4
// earliest local (v8), -5 highest remote offset (v9), -1 latest.
func listOffset(ctx context.Context, cl *kgo.Client, topic string, ts int64) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = 9
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = 0, ts, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return 0, fmt.Errorf("ListOffsets answered %d topics", len(resp.Topics))
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerrCode(p.ErrorCode); err != nil {
		return 0, fmt.Errorf("ListOffsets %d: %w", ts, err)
	}
	return p.Offset, nil
}

// tieredOffsets are a tiered partition's offsets as its leader answers ListOffsets.
type tieredOffsets struct{ earliest, earliestLocal, highestRemote, latest int64 }

func readTieredOffsets(cl *kgo.Client, topic string) (tieredOffsets, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var o tieredOffsets
	for _, q := range []struct {
		ts  int64
		out *int64
	}{{-2, &o.earliest}, {-4, &o.earliestLocal}, {-5, &o.highestRemote}, {-1, &o.latest}} {
		v, err := listOffset(ctx, cl, topic, q.ts)
		if err != nil {
			return o, err
		}
		*q.out = v
	}
	return o, nil
}

// waitTiered waits until the remote log holds everything below the leader's local log
// start and that start is at least minLocalStart.
func waitTiered(t *testing.T, cl *kgo.Client, topic string, minLocalStart int64) tieredOffsets {
	t.Helper()
	var o tieredOffsets
	var lastErr error
	testutil.Eventually(t, 60*time.Second, "segments uploaded and deleted locally", func() bool {
		var err error
		o, err = readTieredOffsets(cl, topic)
		if err != nil {
			lastErr = err
			return false
		}
		return o.earliestLocal >= minLocalStart && o.highestRemote >= o.earliestLocal-1
	})
	if lastErr != nil {
		t.Logf("a ListOffsets on the way failed: %v", lastErr)
	}
	return o
}

func readFranz(t *testing.T, seeds []string, topic string, n int) []tRecord {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(0)}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out []tRecord
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("franz-go read %d of %d records: %v", len(out), n, ctx.Err())
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("franz-go fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			tr := tRecord{Offset: r.Offset, Key: r.Key, Value: r.Value}
			for _, h := range r.Headers {
				tr.Headers = append(tr.Headers, [2][]byte{[]byte(h.Key), h.Value})
			}
			out = append(out, tr)
		})
	}
	return out
}

func readKafkaGo(t *testing.T, seeds []string, topic string, n int) []tRecord {
	t.Helper()
	r := kafkago.NewReader(kafkago.ReaderConfig{Brokers: seeds, Topic: topic, Partition: 0,
		MinBytes: 1, MaxBytes: 1 << 20, MaxWait: 500 * time.Millisecond})
	defer r.Close()
	if err := r.SetOffset(0); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out []tRecord
	for len(out) < n {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("kafka-go read %d of %d records: %v", len(out), n, err)
		}
		tr := tRecord{Offset: m.Offset, Key: m.Key, Value: m.Value}
		for _, h := range m.Headers {
			tr.Headers = append(tr.Headers, [2][]byte{[]byte(h.Key), h.Value})
		}
		out = append(out, tr)
	}
	return out
}

// debianPython is the interpreter Debian's python3-confluent-kafka installs into, as in
// tests/interop.
const debianPython = "/usr/bin/python3"

// confluentRead reads a partition from offset 0 with confluent-kafka-python (librdkafka)
// and prints every record as JSON, keys, values and headers in hex.
const confluentRead = `
import json, sys, time
from confluent_kafka import Consumer, TopicPartition
bootstrap, topic, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
c = Consumer({"bootstrap.servers": bootstrap, "group.id": "tiered-e2e", "enable.auto.commit": False})
c.assign([TopicPartition(topic, 0, 0)])
out = []
deadline = time.monotonic() + 60
while len(out) < n:
    if time.monotonic() > deadline:
        sys.exit("read %d of %d records before the deadline" % (len(out), n))
    m = c.poll(1.0)
    if m is None:
        continue
    if m.error():
        sys.exit("consume: %s" % m.error())
    out.append({"offset": m.offset(), "key": m.key().hex(), "value": m.value().hex(),
                "headers": [[k, v.hex()] for k, v in (m.headers() or [])]})
c.close()
json.dump(out, sys.stdout)
`

func readLibrdkafka(t *testing.T, seeds []string, topic string, n int) []tRecord {
	t.Helper()
	if out, err := exec.Command(debianPython, "-c", "import confluent_kafka").CombinedOutput(); err != nil {
		t.Skipf("no confluent_kafka for %s (apt-get install python3-confluent-kafka): %v: %s", debianPython, err, out)
	}
	cmd := exec.Command(debianPython, "-c", confluentRead, strings.Join(seeds, ","), topic, fmt.Sprint(n))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("confluent_kafka: %v: %s", err, stderr.String())
	}
	var recs []struct {
		Offset  int64       `json:"offset"`
		Key     string      `json:"key"`
		Value   string      `json:"value"`
		Headers [][2]string `json:"headers"`
	}
	if err := json.Unmarshal(stdout, &recs); err != nil {
		t.Fatalf("confluent_kafka output: %v", err)
	}
	unhex := func(s string) []byte {
		b, err := hex.DecodeString(s)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var out []tRecord
	for _, r := range recs {
		tr := tRecord{Offset: r.Offset, Key: unhex(r.Key), Value: unhex(r.Value)}
		for _, h := range r.Headers {
			tr.Headers = append(tr.Headers, [2][]byte{[]byte(h[0]), unhex(h[1])})
		}
		out = append(out, tr)
	}
	return out
}

// dirBytes is the size of the regular files under dir whose path contains part and
// ends in suffix.
func dirBytes(t *testing.T, dir, part, suffix string) int64 {
	t.Helper()
	var n int64
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.Contains(p, part) || !strings.HasSuffix(p, suffix) {
			return nil
		}
		if info, err := d.Info(); err == nil {
			n += info.Size()
		}
		return nil
	})
	return n
}

func (c *cluster) seeds() []string {
	var s []string
	for _, b := range c.brokers {
		if b.running() {
			s = append(s, b.addr)
		}
	}
	return s
}

func TestTieredStorageEndToEnd(t *testing.T) {
	start := time.Now()
	// Broker 4 serves the REST proxy, for the remote log's size.
	restPort := testutil.FreePort(t)
	c, s3 := newTieredClusterWith(t, func(id int32) []string {
		if id == 4 {
			return []string{fmt.Sprintf("--rest.proxy.listener=127.0.0.1:%d", restPort)}
		}
		return nil
	})
	createTieredTopic(t, c, tieredTopic)
	cl := c.kafkaClient(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()))

	const n = 600
	want := produceNumbered(t, cl, tieredTopic, 0, n)
	for i, r := range want {
		if r.Offset != int64(i) {
			t.Fatalf("record #%d was written at offset %d", i, r.Offset)
		}
	}
	// Most of the log leaves the local disks: all but about local.retention.bytes and
	// the active segment (~130 KB produced, 8 KiB kept).
	o := waitTiered(t, cl, tieredTopic, n/2)
	if o.earliest != 0 || o.latest != n {
		t.Fatalf("ListOffsets: earliest %d, latest %d; want 0 and %d (%+v)", o.earliest, o.latest, n, o)
	}
	t.Logf("after %v: earliest %d, earliest-local %d, highest remote %d, latest %d", time.Since(start).Round(time.Millisecond),
		o.earliest, o.earliestLocal, o.highestRemote, o.latest)
	for _, b := range c.brokers {
		t.Logf("broker %d: %d bytes of %s segments on local disk", b.id, dirBytes(t, filepath.Join(b.dir, "data"), tieredTopic+"-0", ".log"), tieredTopic)
	}
	t.Logf("bucket: %d bytes (segments, indexes, epochs)", dirBytes(t, s3.Dir, "", ""))

	d := describeTiered(t, c, tieredTopic)
	t.Logf("shale topic describe: %v", d)
	// Nothing is produced any more, but the uploader and retention may still move on.
	if d["LogStartOffset"] != 0 || d["LogEndOffset"] != n || d["LocalLogStartOffset"] < o.earliestLocal ||
		d["HighestRemoteOffset"] < d["LocalLogStartOffset"]-1 || d["LocalSizeBytes"] <= 0 {
		t.Fatalf("shale topic describe: %v; ListOffsets said %+v", d, o)
	}
	checkRemoteSize(t, c, s3, fmt.Sprintf("--rest-url=http://127.0.0.1:%d", restPort))

	seeds := c.seeds()
	checkSame(t, "franz-go", want, readFranz(t, seeds, tieredTopic, n))
	checkSame(t, "kafka-go", want, readKafkaGo(t, seeds, tieredTopic, n))
	checkSame(t, "librdkafka (confluent_kafka)", want, readLibrdkafka(t, seeds, tieredTopic, n))
	t.Logf("took %v", time.Since(start).Round(time.Millisecond))
}

// checkRemoteSize checks that the remote log size `shale topic describe --rest-url`
// shows is the sum of the committed uploads' sizes in the bucket, and their count. It
// retries while the uploader may still commit: the uploads must then be exactly the
// chain from 0 to the highest remote offset, so that none is an orphan.
func checkRemoteSize(t *testing.T, c *cluster, s3 *s3server.Server, restURL string) {
	t.Helper()
	resp, err := metadataFrom(context.Background(), c.brokers[0].addr)
	if err != nil {
		t.Fatal(err)
	}
	var id [16]byte
	for _, tp := range resp.Topics {
		if tp.Topic != nil && *tp.Topic == tieredTopic {
			id = tp.TopicID
		}
	}
	store := s3.NewStore(t, "")
	var d map[string]int64
	var spans []string
	var sum int64
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(300 * time.Millisecond) {
		d = describeTiered(t, c, tieredTopic, restURL)
		var complete []remotelog.Segment
		spans, complete = remoteUploads(t, store, id, 0)
		sum = 0
		for _, s := range complete {
			sum += s.SizeBytes
		}
		size, ok := d["RemoteSizeBytes"]
		if ok && chained(spans, complete, d["HighestRemoteOffset"]) && size == sum && d["RemoteSegments"] == int64(len(complete)) {
			t.Logf("remote log: %d bytes in %d segments", size, len(complete))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("shale topic describe %v; the bucket holds uploads %v of %d bytes", d, spans, sum)
		}
	}
}

// describeTiered runs `shale topic describe` on a one-partition tiered topic and returns
// the numeric columns of its partition line; extra are further flags.
func describeTiered(t *testing.T, c *cluster, topic string, extra ...string) map[string]int64 {
	t.Helper()
	args := append([]string{"topic", "describe", "--bootstrap-server", strings.Join(c.seeds(), ","), "--topic", topic}, extra...)
	out, err := exec.Command(shaleBin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("shale topic describe: %v: %s", err, out)
	}
	cols := map[string]int64{}
	for _, line := range strings.Split(string(out), "\n") {
		if !strings.Contains(line, "\tPartition: 0\t") {
			continue
		}
		for _, f := range strings.Split(line, "\t") {
			k, v, ok := strings.Cut(f, ": ")
			if !ok {
				continue
			}
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				cols[k] = n
			}
		}
	}
	for _, k := range []string{"LogStartOffset", "LocalLogStartOffset", "HighestRemoteOffset", "LogEndOffset", "LocalSizeBytes"} {
		if _, ok := cols[k]; !ok {
			t.Fatalf("shale topic describe has no %s column:\n%s", k, out)
		}
	}
	return cols
}

// localSegmentBases lists the base offsets of a broker's local segments of partition 0.
func localSegmentBases(t *testing.T, b *proc, topic string) []int64 {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(b.dir, "data", topic+"-0"))
	if err != nil {
		t.Fatal(err)
	}
	var bases []int64
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".log")
		if !ok {
			continue
		}
		base, err := strconv.ParseInt(name, 10, 64)
		if err != nil {
			t.Fatalf("segment file %s: %v", e.Name(), err)
		}
		bases = append(bases, base)
	}
	return bases
}

// A follower whose disk is wiped rejoins by copying only the leader's local log (as
// KIP-1023 has it): its log starts at the leader's local log start, not at 0, and the
// history stays in the remote log, from which every record is still read.
func TestTieredWipedFollowerCopiesLocalLogOnly(t *testing.T) {
	start := time.Now()
	c, _ := newTieredCluster(t)
	createTieredTopic(t, c, tieredTopic)
	cl := c.kafkaClient(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	const n = 400
	want := produceNumbered(t, cl, tieredTopic, 0, n)
	before := waitTiered(t, cl, tieredTopic, n/2)

	var state partitionState
	testutil.Eventually(t, 30*time.Second, "the partition's leader and full ISR", func() bool {
		resp, err := metadataFrom(context.Background(), c.brokers[0].addr)
		if err != nil {
			return false
		}
		ps, ok := topicState(resp, tieredTopic)
		if !ok || len(ps) != 1 || ps[0].leader < 0 || len(ps[0].isr) != 3 {
			return false
		}
		state = ps[0]
		return true
	})
	var victim *proc
	for _, b := range c.brokers {
		if b.id != state.leader {
			victim = b
			break
		}
	}
	victim.terminate()
	if err := os.RemoveAll(filepath.Join(victim.dir, "data")); err != nil {
		t.Fatal(err)
	}
	// Records written while it is away go to the other two (min.insync.replicas=2).
	want = append(want, produceNumbered(t, cl, tieredTopic, n, 40)...)
	victim.start()
	c.waitBrokerReady(victim)
	testutil.Eventually(t, 60*time.Second, fmt.Sprintf("broker %d back in the ISR", victim.id), func() bool {
		resp, err := metadataFrom(context.Background(), c.brokers[0].addr)
		if err != nil {
			return false
		}
		ps, ok := topicState(resp, tieredTopic)
		return ok && len(ps) == 1 && slices.Contains(ps[0].isr, victim.id)
	})
	bases := localSegmentBases(t, victim, tieredTopic)
	o, err := readTieredOffsets(cl, tieredTopic)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("broker %d rejoined after %v; its segments start at %v; leader: %+v (before the wipe: local start %d)",
		victim.id, time.Since(start).Round(time.Millisecond), bases, o, before.earliestLocal)
	// The follower restarted at the leader's local log start at the time, which is at or
	// above the one seen before the wipe; retention may have moved both on since.
	if len(bases) == 0 || bases[0] < before.earliestLocal || bases[0] == 0 {
		t.Fatalf("broker %d's local log starts at %v, want at the leader's local log start (>= %d), not 0", victim.id, bases, before.earliestLocal)
	}
	for _, b := range c.brokers {
		t.Logf("broker %d: %d bytes of %s segments on local disk", b.id, dirBytes(t, filepath.Join(b.dir, "data"), tieredTopic+"-0", ".log"), tieredTopic)
	}
	if o.earliest != 0 || o.latest != int64(len(want)) {
		t.Fatalf("after the rejoin the leader lists earliest %d and latest %d, want 0 and %d", o.earliest, o.latest, len(want))
	}
	checkSame(t, "franz-go", want, readFranz(t, c.seeds(), tieredTopic, len(want)))
	t.Logf("took %v", time.Since(start).Round(time.Millisecond))
}

// remoteUploads lists a partition's uploads in the bucket: "base-end" for each complete
// one (from its manifest), "base-?(incomplete)" for the others, by base offset.
func remoteUploads(t *testing.T, store objstore.Store, topicID [16]byte, p int32) (spans []string, complete []remotelog.Segment) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ups, err := remotelog.ListUploads(ctx, store, topicID, p)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range ups {
		if !u.Complete {
			spans = append(spans, fmt.Sprintf("%d-?(incomplete %x, %d objects)", u.Segment.BaseOffset, u.Segment.UploadID[:4], u.Objects))
			continue
		}
		s, err := remotelog.ReadManifest(ctx, store, u.Segment)
		if err != nil {
			t.Fatal(err)
		}
		spans = append(spans, fmt.Sprintf("%d-%d", s.BaseOffset, s.EndOffset))
		complete = append(complete, s)
	}
	return spans, complete
}

// chained reports whether the uploads are exactly a gapless, overlap-free chain from 0 to
// highest.
func chained(spans []string, complete []remotelog.Segment, highest int64) bool {
	if len(spans) != len(complete) {
		return false
	}
	next := int64(0)
	for _, s := range complete {
		if s.BaseOffset != next {
			return false
		}
		next = s.EndOffset + 1
	}
	return next-1 == highest
}

// An upload cut short by a stalled store (SIGSTOP of versitygw beyond the request
// timeout) leaves objects behind; the leader's orphan scan deletes them once the store
// is back, so that the bucket again holds exactly the remote log.
func TestTieredStalledStoreLeavesNoOrphans(t *testing.T) {
	start := time.Now()
	s3 := s3server.Start(t)
	c := newCluster(t,
		"--remote.log.storage.system.enable=true",
		"--remote.log.manager.task.interval.ms=200",
		"--log.retention.check.interval.ms=200",
		"--remote.storage.s3.request.timeout.ms=1000",
		"--remote.storage.s3.endpoint="+s3.Endpoint,
		"--remote.storage.s3.bucket="+s3.Bucket,
		"--remote.storage.s3.path.style=true",
		"--remote.storage.s3.credentials.file="+s3.CredentialsFile(t),
	)
	createTieredTopic(t, c, tieredTopic)
	cl := c.kafkaClient(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	want := produceNumbered(t, cl, tieredTopic, 0, 200)
	waitTiered(t, cl, tieredTopic, 50)

	if err := s3.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// Segments close while the store is stopped: each pass's upload times out.
	want = append(want, produceNumbered(t, cl, tieredTopic, 200, 200)...)
	time.Sleep(3 * time.Second)
	if err := s3.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	want = append(want, produceNumbered(t, cl, tieredTopic, 400, 200)...)
	o := waitTiered(t, cl, tieredTopic, 400)

	resp, err := metadataFrom(context.Background(), c.brokers[0].addr)
	if err != nil {
		t.Fatal(err)
	}
	var id [16]byte
	for _, tp := range resp.Topics {
		if tp.Topic != nil && *tp.Topic == tieredTopic {
			id = tp.TopicID
		}
	}
	store := s3.NewStore(t, "")
	var spans []string
	var hr int64
	ok := false
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		var complete []remotelog.Segment
		spans, complete = remoteUploads(t, store, id, 0)
		o2, err := readTieredOffsets(cl, tieredTopic)
		if err != nil {
			continue
		}
		hr = o2.highestRemote
		if chained(spans, complete, hr) {
			ok = true
			break
		}
	}
	if !ok {
		t.Fatalf("the bucket holds uploads %v, not the remote log's chain to %d", spans, hr)
	}
	t.Logf("%d uploads after the stall, remote log to %d, local from %d", len(spans), hr, o.earliestLocal)
	checkSame(t, "franz-go", want, readFranz(t, c.seeds(), tieredTopic, len(want)))
	t.Logf("took %v", time.Since(start).Round(time.Millisecond))
}
