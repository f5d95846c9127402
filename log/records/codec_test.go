package records

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	segsnappy "github.com/segmentio/kafka-go/compress/snappy"

	shalelog "github.com/shalelog/shale/log"
)

func TestCodecNames(t *testing.T) {
	for _, codec := range allCodecs {
		got, ok := CodecByName(CodecName(codec))
		if !ok || got != codec {
			t.Errorf("CodecByName(%q) = %d, %v; want %d", CodecName(codec), got, ok, codec)
		}
	}
	if c, ok := CodecByName("uncompressed"); !ok || c != shalelog.CodecNone {
		t.Errorf("uncompressed = %d, %v", c, ok)
	}
	for _, bad := range []string{"producer", "", "GZIP", "brotli"} {
		if _, ok := CodecByName(bad); ok {
			t.Errorf("CodecByName(%q) accepted", bad)
		}
	}
	if got := CodecName(7); got != "unknown(7)" {
		t.Errorf("CodecName(7) = %q", got)
	}
}

// payloads covers empty, tiny, incompressible, compressible and multi-block inputs
// (snappy's xerial blocks are 32 KiB, lz4's 64 KiB).
func payloads() map[string][]byte {
	rng := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 200<<10)
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	var text bytes.Buffer
	for text.Len() < 300<<10 {
		text.WriteString(`{"user":"someone","event":"click","n":12345},`)
	}
	return map[string][]byte{
		"empty":  {},
		"one":    {42},
		"small":  []byte("hello, kafka"),
		"random": random,
		"text":   text.Bytes(),
	}
}

func TestRoundTripEveryCodec(t *testing.T) {
	c := newCodecs(t, Config{})
	for _, codec := range allCodecs {
		for name, src := range payloads() {
			t.Run(CodecName(codec)+"/"+name, func(t *testing.T) {
				prefix := []byte("prefix")
				comp, err := c.Compress(codec, src, append([]byte(nil), prefix...))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.HasPrefix(comp, prefix) {
					t.Fatal("Compress did not append to dst")
				}
				comp = comp[len(prefix):]
				out, err := c.Decompress(codec, comp, append([]byte(nil), prefix...))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(out[:len(prefix)], prefix) || !bytes.Equal(out[len(prefix):], src) {
					t.Fatal("round trip changed the payload")
				}
				// franz-go's decoder reads what we write, except a header-only xerial
				// stream (what snappy-java writes for empty input), which it rejects.
				if codec != shalelog.CodecSnappy || len(src) > 0 {
					if got := franzDecompress(t, codec, comp); !bytes.Equal(got, src) {
						t.Fatal("franz-go decoded something else")
					}
				}
				// And we read what franz-go writes.
				theirs := franzCompress(t, codec, src)
				got, err := c.Decompress(codec, theirs, nil)
				if err != nil {
					t.Fatalf("decompressing franz-go's %s: %v", CodecName(codec), err)
				}
				if !bytes.Equal(got, src) {
					t.Fatal("decoded franz-go output differs")
				}
			})
		}
	}
}

// TestSnappyFraming checks the xerial framing byte by byte, and that raw snappy blocks
// and other implementations' framing decode too.
func TestSnappyFraming(t *testing.T) {
	src := payloads()["text"]
	out, err := Compress(shalelog.CodecSnappy, src, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1}
	if !bytes.HasPrefix(out, want) {
		t.Fatalf("header % x, want % x", out[:16], want)
	}
	// Walk the blocks: each is length-prefixed raw snappy of at most 32 KiB input.
	var joined []byte
	for p := 16; p < len(out); {
		n := int(binary.BigEndian.Uint32(out[p:]))
		p += 4
		block, err := snappy.Decode(nil, out[p:p+n])
		if err != nil {
			t.Fatal(err)
		}
		if len(block) > 32<<10 {
			t.Fatalf("block of %d bytes", len(block))
		}
		joined = append(joined, block...)
		p += n
	}
	if !bytes.Equal(joined, src) {
		t.Fatal("blocks do not join to the input")
	}

	// A raw block, as some clients send.
	raw := snappy.Encode(nil, src)
	if got, err := Decompress(shalelog.CodecSnappy, raw, nil); err != nil || !bytes.Equal(got, src) {
		t.Fatalf("raw snappy: %v", err)
	}
	// Hand-framed with uneven block sizes, as snappy-java's stream might flush them.
	framed := append([]byte(nil), want...)
	for _, part := range [][]byte{src[:1], src[1:5000], src[5000:5000], src[5000:]} {
		blk := snappy.Encode(nil, part)
		framed = binary.BigEndian.AppendUint32(framed, uint32(len(blk)))
		framed = append(framed, blk...)
	}
	if got, err := Decompress(shalelog.CodecSnappy, framed, nil); err != nil || !bytes.Equal(got, src) {
		t.Fatalf("hand-framed xerial: %v", err)
	}
	// Header only: an empty payload.
	if got, err := Decompress(shalelog.CodecSnappy, want, nil); err != nil || len(got) != 0 {
		t.Fatalf("header-only xerial: %q, %v", got, err)
	}

	// segmentio/kafka-go's independent xerial implementation, both ways.
	codec := &segsnappy.Codec{Framing: segsnappy.Framed}
	var seg bytes.Buffer
	w := codec.NewWriter(&seg)
	if _, err := w.Write(src); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got, err := Decompress(shalelog.CodecSnappy, seg.Bytes(), nil); err != nil || !bytes.Equal(got, src) {
		t.Fatalf("kafka-go framed snappy: %v", err)
	}
	r := codec.NewReader(bytes.NewReader(out))
	got, err := io.ReadAll(r)
	r.Close()
	if err != nil || !bytes.Equal(got, src) {
		t.Fatalf("kafka-go cannot read our snappy: %v", err)
	}
}

func TestDecompressCorrupt(t *testing.T) {
	src := payloads()["text"]
	for _, codec := range allCodecs[1:] {
		comp, err := Compress(codec, src, nil)
		if err != nil {
			t.Fatal(err)
		}
		cases := map[string][]byte{
			"empty":     {},
			"garbage":   []byte("this is not compressed data at all, not even close"),
			"truncated": comp[:len(comp)/2],
		}
		flipped := append([]byte(nil), comp...)
		flipped[len(flipped)/2] ^= 0xff
		cases["flipped"] = flipped
		for name, in := range cases {
			if codec == shalelog.CodecZstd && name == "empty" {
				continue // zero frames is a valid, empty zstd stream
			}
			if codec == shalelog.CodecLZ4 && name == "empty" {
				continue // pierrec reads an empty source as an empty stream
			}
			out, err := Decompress(codec, in, nil)
			if err == nil && bytes.Equal(out, src) {
				t.Errorf("%s/%s: damaged input decoded to the original", CodecName(codec), name)
				continue
			}
			if err == nil {
				// Flipping a byte inside a literal run can still decode (snappy and lz4
				// frames without block checksums); the result must differ, which the
				// batch CRC and record checks catch.
				if name != "flipped" || codec == shalelog.CodecGzip || codec == shalelog.CodecZstd {
					t.Errorf("%s/%s: no error", CodecName(codec), name)
				}
				continue
			}
			if !errors.Is(err, shalelog.ErrCorruptMessage) {
				t.Errorf("%s/%s: %v does not wrap ErrCorruptMessage", CodecName(codec), name, err)
			}
		}
	}
	if _, err := Decompress(5, []byte{1}, nil); !errors.Is(err, ErrUnsupportedCompression) {
		t.Errorf("codec 5: %v", err)
	}
	if _, err := Compress(-1, []byte{1}, nil); !errors.Is(err, ErrUnsupportedCompression) {
		t.Errorf("codec -1: %v", err)
	}
	// Broken xerial framing.
	hdr := []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1}
	for name, in := range map[string][]byte{
		"short header":   hdr[:12],
		"short length":   append(append([]byte(nil), hdr...), 0, 0),
		"block overruns": append(append([]byte(nil), hdr...), 0, 0, 1, 0, 5),
		"huge claim":     append(append([]byte(nil), hdr...), 0, 0, 0, 5, 0xff, 0xff, 0xff, 0xff, 0x0f),
	} {
		if _, err := Decompress(shalelog.CodecSnappy, in, nil); !errors.Is(err, shalelog.ErrCorruptMessage) && !errors.Is(err, ErrDecompressedTooLarge) {
			t.Errorf("xerial %s: %v", name, err)
		}
	}
}

// TestDecompressionBomb checks that every codec stops at MaxDecompressedBytes, with
// or without the frame declaring its content size.
func TestDecompressionBomb(t *testing.T) {
	const limit = 1 << 20
	c := newCodecs(t, Config{MaxDecompressedBytes: limit})
	zeros := make([]byte, 8<<20)
	for _, codec := range allCodecs {
		comp, err := c.Compress(codec, zeros, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Decompress(codec, comp, nil)
		if !errors.Is(err, ErrDecompressedTooLarge) || !errors.Is(err, shalelog.ErrMessageTooLarge) {
			t.Errorf("%s: 8 MiB against a 1 MiB limit: %v", CodecName(codec), err)
		}
		// Exactly at the limit is fine, also appended after existing bytes.
		comp, _ = c.Compress(codec, zeros[:limit], nil)
		out, err := c.Decompress(codec, comp, []byte("x"))
		if err != nil || len(out) != limit+1 {
			t.Errorf("%s: at the limit: %d bytes, %v", CodecName(codec), len(out), err)
		}
	}
	// A zstd stream without a content size in its frame header (as zstd-jni's
	// ZstdOutputStream writes) must be stopped while decoding.
	var buf bytes.Buffer
	zw, _ := zstd.NewWriter(&buf, zstd.WithWindowSize(64<<10))
	if _, err := zw.Write(zeros); err != nil {
		t.Fatal(err)
	}
	zw.Close()
	var fh zstd.Header
	if err := fh.Decode(buf.Bytes()); err != nil || fh.HasFCS {
		t.Fatalf("test stream should lack a content size: %+v %v", fh, err)
	}
	if _, err := c.Decompress(shalelog.CodecZstd, buf.Bytes(), nil); !errors.Is(err, ErrDecompressedTooLarge) {
		t.Errorf("zstd stream without content size: %v", err)
	}
	// A frame whose window alone exceeds the limit is refused as a limit breach.
	buf.Reset()
	zw, _ = zstd.NewWriter(&buf, zstd.WithWindowSize(4<<20))
	zw.Write(zeros)
	zw.Close()
	if _, err := c.Decompress(shalelog.CodecZstd, buf.Bytes(), nil); !errors.Is(err, ErrDecompressedTooLarge) {
		t.Errorf("zstd window beyond the limit: %v", err)
	}
	// A raw snappy block claiming 4 GiB in five bytes must not allocate it.
	claim := binary.AppendUvarint(nil, 1<<32-1)
	if _, err := c.Decompress(shalelog.CodecSnappy, claim, nil); err == nil {
		t.Error("snappy 4 GiB claim accepted")
	}
}

func TestConfigLevels(t *testing.T) {
	if _, err := NewCodecs(Config{GzipLevel: 11}); err == nil {
		t.Error("gzip level 11 accepted")
	}
	if _, err := NewCodecs(Config{LZ4Level: 10}); err == nil {
		t.Error("lz4 level 10 accepted")
	}
	src := payloads()["text"]
	for _, cfg := range []Config{{GzipLevel: 1}, {GzipLevel: 9}, {LZ4Level: 9}, {ZstdLevel: 1}, {ZstdLevel: 19}, {ZstdLevel: -5}} {
		c := newCodecs(t, cfg)
		for _, codec := range allCodecs {
			comp, err := c.Compress(codec, src, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := franzDecompress(t, codec, comp); !bytes.Equal(got, src) {
				t.Fatalf("%+v %s: round trip failed", cfg, CodecName(codec))
			}
		}
	}
	if got := Default().Config(); got.MaxDecompressedBytes != DefaultMaxDecompressedBytes || got.ZstdLevel != 3 {
		t.Errorf("default config %+v", got)
	}
}

// TestConcurrentCodecs exercises the pooled state from many goroutines (run with -race).
func TestConcurrentCodecs(t *testing.T) {
	c := newCodecs(t, Config{})
	src := payloads()["text"][:50<<10]
	done := make(chan error)
	for g := 0; g < 8; g++ {
		go func() {
			var err error
			for i := 0; i < 20 && err == nil; i++ {
				codec := allCodecs[(g+i)%len(allCodecs)]
				var comp, out []byte
				if comp, err = c.Compress(codec, src, nil); err == nil {
					out, err = c.Decompress(codec, comp, nil)
					if err == nil && !bytes.Equal(out, src) {
						err = errors.New("mismatch")
					}
				}
			}
			done <- err
		}()
	}
	for g := 0; g < 8; g++ {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

// TestCodecsStartNoGoroutines checks that using a Codecs leaves no goroutines behind,
// even unclosed (the Default one is never closed).
func TestCodecsStartNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	c, err := NewCodecs(Config{})
	if err != nil {
		t.Fatal(err)
	}
	src := payloads()["text"]
	for _, codec := range allCodecs {
		comp, err := c.Compress(codec, src, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Decompress(codec, comp, nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines before, %d while the Codecs is idle", before, n)
	}
	c.Close()
}

func TestConfigHugeLimit(t *testing.T) {
	c := newCodecs(t, Config{MaxDecompressedBytes: math.MaxInt})
	if got := c.Config().MaxDecompressedBytes; got != math.MaxInt32 {
		t.Fatalf("limit %d", got)
	}
	src := payloads()["text"]
	for _, codec := range allCodecs {
		comp, _ := c.Compress(codec, src, nil)
		if out, err := c.Decompress(codec, comp, nil); err != nil || !bytes.Equal(out, src) {
			t.Fatalf("%s: %v", CodecName(codec), err)
		}
	}
}
