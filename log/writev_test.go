package log

import (
	"bytes"
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
