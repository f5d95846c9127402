package log

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// shortFile is an osFile whose vectored write stops after limit bytes, as a write
// interrupted by a signal or a filling disk does.
type shortFile struct {
	*osFile
	limit int
}

func (s shortFile) writevAt(a, b []byte, off int64) (int, error) {
	buf := append(append([]byte(nil), a...), b...)
	return s.osFile.WriteAt(buf[:min(s.limit, len(buf))], off)
}

// TestWriteVectorAtShortWrite checks that a short pwritev is finished with WriteAt,
// wherever it stopped: in the header, at its end, or in the body.
func TestWriteVectorAtShortWrite(t *testing.T) {
	a, b := []byte("header-bytes"), bytes.Repeat([]byte("body"), 100)
	want := append(append([]byte("xx"), a...), b...)
	for _, limit := range []int{0, 5, len(a), len(a) + 7, len(a) + len(b)} {
		path := filepath.Join(t.TempDir(), "f")
		f, err := osFS{}.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte("xx"), 0); err != nil {
			t.Fatal(err)
		}
		if err := writeVectorAt(shortFile{f.(*osFile), limit}, a, b, 2); err != nil {
			t.Fatalf("limit %d: %v", limit, err)
		}
		f.Close()
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("limit %d: file holds %q, want %q", limit, got, want)
		}
	}
}

// TestAppendValidated checks that AppendValidated stores a batch as Append does, and
// still refuses what is not exactly one well-formed batch.
func TestAppendValidated(t *testing.T) {
	cfg := testConfig(nil)
	l := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()
	b := makeBatch(t, batchSpec{records: 3, valueSize: 20, timestamp: 1000})
	if _, err := ValidateHeader(b); err != nil {
		t.Fatal(err)
	}
	info, err := l.AppendValidated(b, 7)
	if err != nil || info.BaseOffset != 0 || info.LastOffset != 2 {
		t.Fatalf("AppendValidated = %+v, %v", info, err)
	}
	got := readAll(t, l, 0)
	if len(got) != 1 || !bytes.Equal(got[0][offPartitionLeaderEpoch+4:], b[offPartitionLeaderEpoch+4:]) {
		t.Fatalf("stored %d batches, first differs from what was appended", len(got))
	}
	if h, _ := ParseHeader(got[0]); h.PartitionLeaderEpoch != 7 {
		t.Fatalf("leader epoch %d, want 7", h.PartitionLeaderEpoch)
	}
	if _, err := l.AppendValidated(append(append([]byte(nil), b...), 0), 7); !errors.Is(err, ErrCorruptMessage) {
		t.Fatalf("trailing byte: %v, want ErrCorruptMessage", err)
	}
	if _, err := l.AppendValidated(b[:len(b)-1], 7); err == nil {
		t.Fatal("truncated batch accepted")
	}
}
