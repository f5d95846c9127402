package partition

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/log/records"
)

// Start-up at scale: a broker's log directory of startupPartitions replicas with
// startupSegments segments each, reopened as a restart does (NewManager, then OpenAll),
// after a clean shutdown and after an unclean one.
//
//	go test -run '^$' -bench Startup -benchtime 3x ./partition/
//
// Reported besides ns/op: the process's mappings and descriptors added by the open
// (/proc/self/maps, /proc/self/fd), and the sealed segments the MapCache holds mapped.
const (
	startupPartitions = 2000
	startupSegments   = 20
	startupSegBytes   = 16 << 10
	// startupMapped is log.mapped.segments.max for the benchmark: well below the 38,000
	// sealed segments, so that a scan of them all must unmap as it goes.
	startupMapped = 1000
)

var (
	startupOnce sync.Once
	startupDir  string
	startupErr  error
)

func startupSettings() Settings {
	s := Settings{Log: shalelog.DefaultConfig(), MinInsyncReplicas: 1, Codec: -1}
	s.Log.SegmentBytes = startupSegBytes
	s.Log.Logger = quiet()
	return s
}

// startupFixture builds one replica of startupSegments segments (an idempotent
// producer's batches in two leader epochs), closes it cleanly and copies it
// startupPartitions times: the files are what a broker writes, made once per process.
func startupFixture(b *testing.B) string {
	startupOnce.Do(func() {
		root, err := os.MkdirTemp("", "shale-startup-bench-")
		if err != nil {
			startupErr = err
			return
		}
		startupDir = root
		startupErr = buildStartupFixture(root)
	})
	if startupErr != nil {
		b.Fatal(startupErr)
	}
	return startupDir
}

func buildStartupFixture(root string) error {
	tmpl := filepath.Join(root, "template")
	p, err := open("t", testID, 0, 1, tmpl, -1, startupSettings(), quiet())
	if err != nil {
		return err
	}
	seq := int32(0)
	for epoch := int32(1); p.log.NumSegments() < startupSegments; epoch++ {
		if _, err := p.ApplyState(State{Role: RoleLeader, Leader: 1, LeaderEpoch: epoch, PartitionEpoch: epoch,
			Replicas: []int32{1}, ISR: []int32{1}}, time.Now()); err != nil {
			return err
		}
		for i := 0; i < 80 && p.log.NumSegments() < startupSegments; i++ {
			recs := make([]records.Record, 8)
			for j := range recs {
				recs[j] = records.Record{OffsetDelta: int32(j), Value: make([]byte, 100)}
			}
			bt, err := records.Build(shalelog.Header{Magic: 2, ProducerID: 42, ProducerEpoch: 0, BaseSequence: seq}, shalelog.CodecNone, recs)
			if err != nil {
				return err
			}
			seq += int32(len(recs))
			h, err := shalelog.ParseHeader(bt)
			if err != nil {
				return err
			}
			if _, err := p.AppendAsLeader(bt, h, 1); err != nil {
				return err
			}
		}
	}
	if err := p.close(); err != nil {
		return err
	}
	hws := map[TopicPartition]int64{}
	for i := 0; i < startupPartitions; i++ {
		tp := TopicPartition{"t", int32(i)}
		if err := copyTree(tmpl, filepath.Join(root, "data", tp.String())); err != nil {
			return err
		}
		hws[tp] = 1
	}
	return os.WriteFile(filepath.Join(root, "data", hwCheckpointFile), encodeHighWatermarks(hws), 0o644)
}

func copyTree(src, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range entries {
		in, err := os.Open(filepath.Join(src, e.Name()))
		if err != nil {
			return err
		}
		out, err := os.Create(filepath.Join(dst, e.Name()))
		if err == nil {
			_, err = io.Copy(out, in)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
		}
		in.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// makeUnclean leaves every replica as a killed broker does: no clean-shutdown marker,
// the active segment and its indexes still grown for appends (zeros after the data).
// Without snapshot, the producer snapshots are gone too, as for a broker that never
// shut down cleanly since they were written: the producers are replayed from the start.
func makeUnclean(b *testing.B, dir string, snapshot bool) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		d := filepath.Join(dir, e.Name())
		os.Remove(filepath.Join(d, "clean-shutdown"))
		if !snapshot {
			os.Remove(filepath.Join(d, producerSnapshotFile))
		}
		files, _ := os.ReadDir(d)
		var last string
		for _, f := range files {
			if strings.HasSuffix(f.Name(), ".log") {
				last = strings.TrimSuffix(f.Name(), ".log")
			}
		}
		for suffix, size := range map[string]int64{".log": startupSegBytes, ".index": 10 << 20, ".timeindex": 10 << 20} {
			if err := os.Truncate(filepath.Join(d, last+suffix), size); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func countLines(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return strings.Count(string(b), "\n")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func countFDs() int {
	e, _ := os.ReadDir("/proc/self/fd")
	return len(e)
}

func BenchmarkStartup(b *testing.B) {
	for _, tc := range []struct {
		name     string
		clean    bool
		snapshot bool
		threads  int
	}{
		{"clean/threads=1", true, true, 1},
		{"clean/threads=8", true, true, 8},
		{"unclean/threads=8", false, true, 8},
		{"unclean-no-snapshot/threads=8", false, false, 8},
	} {
		b.Run(tc.name, func(b *testing.B) {
			root := startupFixture(b)
			dir := filepath.Join(root, "data")
			reqs := make([]OpenRequest, startupPartitions)
			for i := range reqs {
				reqs[i] = OpenRequest{Topic: "t", TopicID: testID, Index: int32(i), Settings: startupSettings()}
			}
			var maps, fds, mapped int
			var total, cpu time.Duration
			for i := 0; i < b.N; i++ {
				if !tc.clean {
					makeUnclean(b, dir, tc.snapshot)
				}
				maps0, fds0 := countLines("/proc/self/maps"), countFDs()
				cpu0 := cpuTime()
				start := time.Now()
				m, err := NewManager(ManagerConfig{Dir: dir, NodeID: 1, Logger: quiet(),
					RecoveryThreads: tc.threads, MaxMappedSegments: startupMapped, RetentionCheckInterval: time.Hour})
				if err != nil {
					b.Fatal(err)
				}
				for j, r := range m.OpenAll(reqs) {
					if r.Err != nil {
						b.Fatalf("open %d: %v", j, r.Err)
					}
				}
				total += time.Since(start)
				cpu += cpuTime() - cpu0
				maps = countLines("/proc/self/maps") - maps0
				fds = countFDs() - fds0
				mapped = m.MappedSegments()
				b.StopTimer()
				if p := m.Get("t", 7); p.LogEndOffset() == 0 || p.LatestEpoch() < 1 {
					b.Fatalf("reopened replica: LEO %d, latest epoch %d", p.LogEndOffset(), p.LatestEpoch())
				}
				if err := m.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/open")
			// CPU (user+system) of the whole process during the open: on a shared machine
			// the wall time above grows with the load, this much less.
			b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/open")
			b.ReportMetric(float64(maps), "mappings")
			b.ReportMetric(float64(fds), "fds")
			b.ReportMetric(float64(mapped), "sealed-mapped")
			b.ReportMetric(float64(startupPartitions*startupSegments), "segments")
		})
	}
}

// TestMain removes the start-up benchmark's fixture, made once per process.
func TestMain(m *testing.M) {
	code := m.Run()
	if startupDir != "" {
		os.RemoveAll(startupDir)
	}
	os.Exit(code)
}
