package records

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	shalelog "github.com/shalelog/shale/log"
)

// DefaultMaxDecompressedBytes is the default bound on one batch's decompressed records
// payload: 32 MiB, i.e. a 32x expansion of a batch at Kafka's default max.message.bytes
// (1 MiB). Legitimate text batches rarely compress better than 10-20x; anything beyond
// the bound is rejected rather than allowed to claim memory.
const DefaultMaxDecompressedBytes = 32 << 20

// Config tunes a Codecs. The zero value means every default.
type Config struct {
	// MaxDecompressedBytes bounds the decompressed size of one records payload.
	// Default DefaultMaxDecompressedBytes; at most math.MaxInt32 (a batch's length
	// field cannot describe more). A broker should set it to at least a few
	// times the largest max.message.bytes it accepts.
	MaxDecompressedBytes int

	// GzipLevel is Kafka's compression.gzip.level: 1 (fastest) to 9 (best), or -1 for
	// the library default (6). Default -1, as in Kafka.
	GzipLevel int

	// LZ4Level is Kafka's compression.lz4.level: 0 or 1 for the fast compressor, 2-9 for
	// the high-compression one at that level. Default 0; Kafka's own default (9) also
	// uses the fast compressor.
	LZ4Level int

	// ZstdLevel is Kafka's compression.zstd.level, mapped onto the nearest speed the Go
	// encoder offers. Default 3, as in Kafka.
	ZstdLevel int
}

func (c Config) withDefaults() Config {
	if c.MaxDecompressedBytes <= 0 {
		c.MaxDecompressedBytes = DefaultMaxDecompressedBytes
	}
	// No batch payload can exceed 2 GiB; clamping also keeps limit arithmetic from
	// overflowing.
	c.MaxDecompressedBytes = min(c.MaxDecompressedBytes, math.MaxInt32)
	if c.GzipLevel == 0 {
		c.GzipLevel = gzip.DefaultCompression
	}
	if c.ZstdLevel == 0 {
		c.ZstdLevel = 3
	}
	return c
}

// Codecs compresses and decompresses record payloads, keeping the expensive encoder and
// decoder state for reuse. It is safe for concurrent use. Create it with NewCodecs.
type Codecs struct {
	cfg      Config
	lz4Level lz4.CompressionLevel

	zstdEnc *zstd.Encoder // EncodeAll is safe for concurrent use
	zstdDec *zstd.Decoder // DecodeAll is safe for concurrent use

	gzipWriters sync.Pool // *gzipWriter
	gzipReaders sync.Pool // *gzipReader
	lz4Writers  sync.Pool // *lz4Writer
	lz4Readers  sync.Pool // *lz4Reader
	scratch     sync.Pool // *[]byte, decompression and encoding scratch space
}

// NewCodecs builds a Codecs. It fails only for an out-of-range compression level.
func NewCodecs(cfg Config) (*Codecs, error) {
	cfg = cfg.withDefaults()
	if cfg.GzipLevel != gzip.DefaultCompression && (cfg.GzipLevel < gzip.BestSpeed || cfg.GzipLevel > gzip.BestCompression) {
		return nil, fmt.Errorf("records: gzip level %d out of range 1..9", cfg.GzipLevel)
	}
	lz4Level, err := lz4LevelFor(cfg.LZ4Level)
	if err != nil {
		return nil, err
	}
	// Go's zstd has four speeds; Kafka's levels are zstd's own, so map them.
	enc, err := zstd.NewWriter(nil,
		zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(cfg.ZstdLevel)),
		zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)),
		// An empty payload still gets a frame: some decoders reject zero bytes.
		zstd.WithZeroFrames(true),
		// Batches are at most a few MiB; a 1 MiB window keeps encoder state small and
		// is well within what every Kafka client's decoder accepts.
		zstd.WithWindowSize(1<<20),
	)
	if err != nil {
		return nil, fmt.Errorf("records: zstd encoder: %w", err)
	}
	dec, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(runtime.GOMAXPROCS(0)),
		zstd.WithDecoderMaxMemory(uint64(cfg.MaxDecompressedBytes)),
		// zstd's own default limit (and zstd-jni's, on the Java side) is a 128 MiB window.
		zstd.WithDecoderMaxWindow(1<<27),
	)
	if err != nil {
		enc.Close()
		return nil, fmt.Errorf("records: zstd decoder: %w", err)
	}
	return &Codecs{cfg: cfg, lz4Level: lz4Level, zstdEnc: enc, zstdDec: dec}, nil
}

func lz4LevelFor(level int) (lz4.CompressionLevel, error) {
	levels := [...]lz4.CompressionLevel{lz4.Fast, lz4.Fast, lz4.Level2, lz4.Level3, lz4.Level4,
		lz4.Level5, lz4.Level6, lz4.Level7, lz4.Level8, lz4.Level9}
	if level < 0 || level >= len(levels) {
		return 0, fmt.Errorf("records: lz4 level %d out of range 0..9", level)
	}
	return levels[level], nil
}

// Config returns the configuration in effect, defaults filled in.
func (c *Codecs) Config() Config { return c.cfg }

// Close releases the zstd encoder and decoder. The Codecs must not be used afterwards.
func (c *Codecs) Close() {
	c.zstdEnc.Close()
	c.zstdDec.Close()
}

var defaultCodecs = sync.OnceValue(func() *Codecs {
	c, err := NewCodecs(Config{})
	if err != nil {
		panic("records: default config rejected: " + err.Error()) // defaults are constants
	}
	return c
})

// Default returns the Codecs built from the default Config that the package-level
// functions use. It is created on first use and never closed.
func Default() *Codecs { return defaultCodecs() }

var codecNames = [...]string{
	shalelog.CodecNone:   "none",
	shalelog.CodecGzip:   "gzip",
	shalelog.CodecSnappy: "snappy",
	shalelog.CodecLZ4:    "lz4",
	shalelog.CodecZstd:   "zstd",
}

// CodecByName maps a Kafka compression.type value to its codec number. It accepts the
// producer's names (none, gzip, snappy, lz4, zstd) and the topic config's "uncompressed".
// "producer" is not a codec: the caller keeps the producer's codec for it.
func CodecByName(name string) (codec int, ok bool) {
	if name == "uncompressed" {
		return shalelog.CodecNone, true
	}
	for i, n := range codecNames {
		if n == name {
			return i, true
		}
	}
	return 0, false
}

// CodecName is the producer-style name of a codec, or "unknown(N)".
func CodecName(codec int) string {
	if codec >= 0 && codec < len(codecNames) {
		return codecNames[codec]
	}
	return fmt.Sprintf("unknown(%d)", codec)
}

func checkCodec(codec int) error {
	if codec < 0 || codec >= len(codecNames) {
		return fmt.Errorf("%w: codec %d", ErrUnsupportedCompression, codec)
	}
	return nil
}

// Decompress appends the decompressed form of a records payload (the bytes after a
// batch's 61-byte header) to dst and returns the extended slice. It decompresses at
// most MaxDecompressedBytes; beyond that it fails with ErrDecompressedTooLarge.
// Damaged input fails with an error wrapping log.ErrCorruptMessage.
func (c *Codecs) Decompress(codec int, src, dst []byte) ([]byte, error) {
	if err := checkCodec(codec); err != nil {
		return dst, err
	}
	start := len(dst)
	var err error
	switch codec {
	case shalelog.CodecNone:
		if len(src) > c.cfg.MaxDecompressedBytes {
			return dst, fmt.Errorf("%w: %d bytes", ErrDecompressedTooLarge, len(src))
		}
		return append(dst, src...), nil
	case shalelog.CodecGzip:
		dst, err = c.gunzip(src, dst)
	case shalelog.CodecSnappy:
		dst, err = decodeSnappy(src, dst, c.cfg.MaxDecompressedBytes)
	case shalelog.CodecLZ4:
		dst, err = c.unlz4(src, dst)
	case shalelog.CodecZstd:
		dst, err = c.unzstd(src, dst)
	}
	if err != nil {
		if errors.Is(err, ErrDecompressedTooLarge) {
			return dst[:start], err
		}
		return dst[:start], fmt.Errorf("%w: %s payload: %v", shalelog.ErrCorruptMessage, CodecName(codec), err)
	}
	return dst, nil
}

// Compress appends the compressed form of a records payload to dst and returns the
// extended slice. Snappy is written xerial-framed and lz4 as an LZ4 frame with 64 KiB
// blocks, as Kafka's Java producer writes them.
func (c *Codecs) Compress(codec int, src, dst []byte) ([]byte, error) {
	if err := checkCodec(codec); err != nil {
		return dst, err
	}
	switch codec {
	case shalelog.CodecNone:
		return append(dst, src...), nil
	case shalelog.CodecGzip:
		return c.gzip(src, dst)
	case shalelog.CodecSnappy:
		return encodeSnappy(src, dst), nil
	case shalelog.CodecLZ4:
		return c.lz4(src, dst)
	default: // zstd
		return c.zstdEnc.EncodeAll(src, dst), nil
	}
}

// appendWriter is an io.Writer appending to a byte slice, so stream compressors can
// write straight into the caller's dst.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

type gzipWriter struct {
	zw  *gzip.Writer
	out appendWriter
}

func (c *Codecs) gzip(src, dst []byte) ([]byte, error) {
	w, _ := c.gzipWriters.Get().(*gzipWriter)
	if w == nil {
		w = &gzipWriter{}
		zw, err := gzip.NewWriterLevel(&w.out, c.cfg.GzipLevel)
		if err != nil {
			return dst, fmt.Errorf("records: gzip writer: %w", err)
		}
		w.zw = zw
	} else {
		w.zw.Reset(&w.out)
	}
	w.out.b = dst
	_, err := w.zw.Write(src)
	if err == nil {
		err = w.zw.Close()
	}
	out := w.out.b
	w.out.b = nil
	c.gzipWriters.Put(w)
	if err != nil {
		return dst, fmt.Errorf("records: gzip: %w", err)
	}
	return out, nil
}

type lz4Writer struct {
	zw  *lz4.Writer
	out appendWriter
}

func (c *Codecs) lz4(src, dst []byte) ([]byte, error) {
	w, _ := c.lz4Writers.Get().(*lz4Writer)
	if w == nil {
		w = &lz4Writer{}
		w.zw = lz4.NewWriter(&w.out)
		// 64 KiB blocks like Kafka's Java producer: every consumer reads them, and the
		// block buffer stays small.
		if err := w.zw.Apply(lz4.BlockSizeOption(lz4.Block64Kb), lz4.CompressionLevelOption(c.lz4Level)); err != nil {
			return dst, fmt.Errorf("records: lz4 writer: %w", err)
		}
	} else {
		w.zw.Reset(&w.out)
	}
	w.out.b = dst
	_, err := w.zw.Write(src)
	if err == nil {
		err = w.zw.Close()
	}
	out := w.out.b
	w.out.b = nil
	c.lz4Writers.Put(w)
	if err != nil {
		return dst, fmt.Errorf("records: lz4: %w", err)
	}
	return out, nil
}

// unzstd appends the decoded src to dst. DecodeAll counts dst's existing bytes against
// the decoder's limit, so it decodes into the free tail of dst and the result is joined
// back on.
func (c *Codecs) unzstd(src, dst []byte) ([]byte, error) {
	tail := dst[len(dst):]
	out, err := c.zstdDec.DecodeAll(src, tail)
	switch {
	case errors.Is(err, zstd.ErrDecoderSizeExceeded), errors.Is(err, zstd.ErrWindowSizeExceeded):
		// The decoder refuses windows larger than its memory limit as well: a frame
		// asking for more history than the limit is a limit breach too.
		return dst, ErrDecompressedTooLarge
	case err != nil:
		return dst, err
	case len(out) == 0:
		return dst, nil
	case cap(tail) >= len(out) && &tail[:1][0] == &out[0]:
		return dst[:len(dst)+len(out)], nil // decoded in place
	}
	return append(dst, out...), nil
}

type gzipReader struct {
	zr  gzip.Reader
	src bytes.Reader
}

func (c *Codecs) gunzip(src, dst []byte) ([]byte, error) {
	r, _ := c.gzipReaders.Get().(*gzipReader)
	if r == nil {
		r = &gzipReader{}
	}
	defer c.gzipReaders.Put(r)
	r.src.Reset(src)
	if err := r.zr.Reset(&r.src); err != nil {
		return dst, err
	}
	dst, err := readBounded(&r.zr, dst, len(src), c.cfg.MaxDecompressedBytes)
	r.src.Reset(nil)
	return dst, err
}

type lz4Reader struct {
	zr  *lz4.Reader
	src bytes.Reader
}

func (c *Codecs) unlz4(src, dst []byte) ([]byte, error) {
	r, _ := c.lz4Readers.Get().(*lz4Reader)
	if r == nil {
		r = &lz4Reader{zr: lz4.NewReader(nil)}
	}
	defer c.lz4Readers.Put(r)
	r.src.Reset(src)
	r.zr.Reset(&r.src)
	dst, err := readBounded(r.zr, dst, len(src), c.cfg.MaxDecompressedBytes)
	r.src.Reset(nil)
	r.zr.Reset(nil)
	return dst, err
}

// readBounded appends everything r yields to dst, failing with ErrDecompressedTooLarge
// once more than limit bytes have come out.
func readBounded(r io.Reader, dst []byte, srcLen, limit int) ([]byte, error) {
	start := len(dst)
	// Start from a guess of 4x the compressed size; growth takes over beyond it.
	if want := min(4*srcLen+512, limit+1); cap(dst)-len(dst) < want {
		dst = growCap(dst, want)
	}
	for idle := 0; ; {
		if len(dst) == cap(dst) {
			if len(dst)-start > limit {
				return dst[:start], ErrDecompressedTooLarge
			}
			dst = growCap(dst, min(cap(dst)-start+1, limit+1-(len(dst)-start)))
		}
		n, err := r.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if len(dst)-start > limit {
			return dst[:start], ErrDecompressedTooLarge
		}
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst[:start], err
		}
		if idle = idle + 1; n > 0 {
			idle = 0
		} else if idle > 100 {
			return dst[:start], io.ErrNoProgress
		}
	}
}

// growCap returns b with room for at least n more bytes.
func growCap(b []byte, n int) []byte {
	if n < 1 {
		n = 1
	}
	nb := make([]byte, len(b), len(b)+n)
	copy(nb, b)
	return nb
}

// getScratch returns an empty buffer from the pool for short-lived use.
func (c *Codecs) getScratch() *[]byte {
	if p, _ := c.scratch.Get().(*[]byte); p != nil {
		return p
	}
	b := make([]byte, 0, 64<<10)
	return &b
}

// putScratch returns a buffer to the pool unless it grew too big to keep around.
func (c *Codecs) putScratch(p *[]byte, b []byte) {
	if cap(b) > 4<<20 {
		return
	}
	*p = b[:0]
	c.scratch.Put(p)
}
