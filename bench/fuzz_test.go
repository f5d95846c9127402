package bench

import (
	"strconv"
	"testing"
)

// FuzzParseByteSize: any input parses to a non-negative size or an error,
// and a plain number reads back as itself.
func FuzzParseByteSize(f *testing.F) {
	for _, s := range []string{"0", "1024", "1KiB", "1kb", "3 MiB", "1g", "-1", "9223372036854775807", "99999999999GiB", "k", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseByteSize(s)
		if err != nil {
			return
		}
		if n < 0 {
			t.Fatalf("parseByteSize(%q) = %d", s, n)
		}
		if back, err := parseByteSize(strconv.FormatInt(n, 10)); err != nil || back != n {
			t.Fatalf("%d does not read back: %d %v", n, back, err)
		}
	})
}

// FuzzParseKeyDist: any input parses or errors, and what parses prints back
// to a form that parses to the same distribution.
func FuzzParseKeyDist(f *testing.F) {
	for _, s := range []string{"none", "random", "fixed:1", "fixed:100", "fixed:0", "fixed:-3", "fixed:", "fixed:1e3", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseKeyDist(s)
		if err != nil {
			return
		}
		if k.Kind == KeysFixed && k.Count < 1 {
			t.Fatalf("%q gave fixed:%d", s, k.Count)
		}
		back, err := ParseKeyDist(k.String())
		if err != nil || back != k {
			t.Fatalf("%q -> %v -> %v, %v", s, k, back, err)
		}
	})
}

// FuzzE2EHeader: any value is either rejected or read back without panic.
func FuzzE2EHeader(f *testing.F) {
	f.Add([]byte{}, uint64(1))
	f.Add(make([]byte, 16), uint64(0))
	f.Fuzz(func(t *testing.T, v []byte, runID uint64) {
		at, ok := readE2EHeader(v, runID)
		if ok && len(v) < e2eHeaderSize {
			t.Fatalf("short value accepted: %v", at)
		}
	})
}
