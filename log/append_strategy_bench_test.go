package log

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkAppendStrategy writes the same stream of batches into fresh segment-sized
// files in three ways, side by side in one run (issue 19, item 2), and then reads each
// file back through its mapping as a fetch would:
//
//   - mmap: what the log did before issue 19. The file is truncated to its capacity and
//     mapped read-write; a reservation fallocates and pre-faults (MADV_POPULATE_WRITE)
//     ahead of the write position in the background, and each batch is copied into the
//     mapping.
//   - pwrite-falloc: what the log does now (segment.writeBatch). The same sparse file,
//     writable mapping and background fallocate, without pre-faulting; each batch is
//     written with one pwritev (its rewritten header, then the rest), so the kernel
//     copies into the page cache and no page is faulted in.
//   - pwrite-sparse: the same without fallocate.
//   - pwrite-ro: the file grows with pwrite (no preallocation, no fallocate); the
//     mapping is read-only and used for reads alone.
//
// Each op writes stratSegment bytes through every strategy in turn (so that noise and
// writeback hit all alike), unmaps and removes the files. Reported per strategy:
// write MB/s (wall), CPU ns per KiB written (user+system of this process from getrusage,
// which counts the background pre-faulting as well: the CPU a broker takes from clients
// on the same cores), minor faults per MiB, and the same for the read pass.
//
//	go test -run '^$' -bench AppendStrategy -benchtime 3x ./log/
func BenchmarkAppendStrategy(b *testing.B) {
	for _, size := range []int{1 << 10, 16 << 10, 256 << 10} {
		b.Run(sizeName(size), func(b *testing.B) {
			dir := b.TempDir()
			batch := sizedBatch(b, size, time.Now().UnixMilli())
			strategies := []appendStrategy{
				{name: "mmap", write: writeMmap},
				{name: "pwrite-falloc", write: writeSegmentPwrite},
				{name: "pwrite-sparse", write: writePwrite(true)},
				{name: "pwrite-ro", write: writePwrite(false)},
			}
			stats := make([]stratStats, len(strategies))
			readBuf := make([]byte, 1<<20)
			b.SetBytes(int64(len(strategies)) * stratSegment)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for k, s := range strategies {
					path := filepath.Join(dir, s.name)
					w0, r0 := time.Now(), rusage(b)
					data, closeFn := s.write(b, path, batch)
					stats[k].write.add(time.Since(w0), rusage(b).sub(r0))
					w0, r0 = time.Now(), rusage(b)
					readThrough(data, readBuf)
					stats[k].read.add(time.Since(w0), rusage(b).sub(r0))
					closeFn()
					if err := os.Remove(path); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.StopTimer()
			for k, s := range strategies {
				stats[k].write.report(b, s.name+"-write", int64(b.N)*stratSegment)
				stats[k].read.report(b, s.name+"-read", int64(b.N)*stratSegment)
			}
		})
	}
}

// stratSegment is how much each strategy writes per op: a segment far larger than the
// reservation's look-ahead, so the steady state dominates.
const stratSegment = 128 << 20

type appendStrategy struct {
	name string
	// write fills a new file at path with copies of batch up to stratSegment bytes and
	// returns its mapping (valid for reads of what was written) and a close function.
	write func(b *testing.B, path string, batch []byte) ([]byte, func())
}

func writeMmap(b *testing.B, path string, batch []byte) ([]byte, func()) {
	f, err := osFS{}.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	if err := f.Truncate(stratSegment); err != nil {
		b.Fatal(err)
	}
	data, err := f.Map(stratSegment, true)
	if err != nil {
		b.Fatal(err)
	}
	adviseRandom(data, 0)
	res := &reservation{f: f, mapping: data, limit: stratSegment, chunk: reserveChunk, background: true}
	res.startAt(0)
	var pos int64
	for n := int64(len(batch)); pos+n <= stratSegment; pos += n {
		if err := res.ensure(pos + n); err != nil {
			b.Fatal(err)
		}
		if err := copyGuarded(data[pos:pos+n], batch); err != nil {
			b.Fatal(err)
		}
	}
	res.stop()
	return data[:pos], func() { unmap(data); f.Close() }
}

func writeSegmentPwrite(b *testing.B, path string, batch []byte) ([]byte, func()) {
	f, err := osFS{}.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	if err := f.Truncate(stratSegment); err != nil {
		b.Fatal(err)
	}
	data, err := f.Map(stratSegment, true)
	if err != nil {
		b.Fatal(err)
	}
	adviseRandom(data, 0)
	s := &segment{logFile: f}
	res := &reservation{f: f, limit: stratSegment, chunk: reserveChunk, background: true}
	res.startAt(0)
	var pos int64
	for n := int64(len(batch)); pos+n <= stratSegment; pos += n {
		if err := res.ensure(pos + n); err != nil {
			b.Fatal(err)
		}
		if err := s.writeBatch(batch, pos, pos, 1, true); err != nil {
			b.Fatal(err)
		}
	}
	res.stop()
	return data[:pos], func() { unmap(data); f.Close() }
}

// writePwrite returns the pwrite strategy: with sparse, the file is preallocated
// (truncated to its capacity) and mapped read-write as the log's active segment is;
// without, it grows with each write and is mapped read-only.
func writePwrite(sparse bool) func(b *testing.B, path string, batch []byte) ([]byte, func()) {
	return func(b *testing.B, path string, batch []byte) ([]byte, func()) {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			b.Fatal(err)
		}
		prot := unix.PROT_READ
		if sparse {
			if err := f.Truncate(stratSegment); err != nil {
				b.Fatal(err)
			}
			prot |= unix.PROT_WRITE
		}
		// A mapping may extend past the end of the file; only what was written is read.
		data, err := unix.Mmap(int(f.Fd()), 0, stratSegment, prot, unix.MAP_SHARED)
		if err != nil {
			b.Fatal(err)
		}
		if sparse {
			adviseRandom(data, 0)
		}
		fd := int(f.Fd())
		var pos int64
		for n := int64(len(batch)); pos+n <= stratSegment; pos += n {
			if _, err := unix.Pwrite(fd, batch, pos); err != nil {
				b.Fatal(err)
			}
		}
		return data[:pos], func() { unix.Munmap(data); f.Close() }
	}
}

// readThrough copies data out in fetch-sized pieces, as a writev to a socket reads it.
func readThrough(data, buf []byte) {
	for p := 0; p < len(data); p += len(buf) {
		copy(buf, data[p:min(p+len(buf), len(data))])
	}
}

type usage struct {
	cpu    time.Duration
	minflt int64
}

func rusage(b *testing.B) usage {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return usage{
		cpu:    time.Duration(ru.Utime.Nano() + ru.Stime.Nano()),
		minflt: ru.Minflt,
	}
}

func (u usage) sub(o usage) usage { return usage{cpu: u.cpu - o.cpu, minflt: u.minflt - o.minflt} }

type phaseStats struct {
	wall time.Duration
	use  usage
}

func (p *phaseStats) add(wall time.Duration, u usage) {
	p.wall += wall
	p.use.cpu += u.cpu
	p.use.minflt += u.minflt
}

func (p *phaseStats) report(b *testing.B, name string, bytes int64) {
	b.ReportMetric(float64(bytes)/1e6/p.wall.Seconds(), name+"-MB/s")
	b.ReportMetric(float64(p.use.cpu.Nanoseconds())/float64(bytes>>10), name+"-cpu-ns/KiB")
	b.ReportMetric(float64(p.use.minflt)/float64(bytes>>20), name+"-faults/MiB")
}

type stratStats struct{ write, read phaseStats }
