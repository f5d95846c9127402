package log

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"unsafe"
)

// vmFlags returns the VmFlags of the mapping that starts at b's first byte, from
// /proc/self/smaps ("rr" is MADV_RANDOM, "sr" MADV_SEQUENTIAL).
func vmFlags(t *testing.T, b []byte) []string {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("no smaps: %v", err)
	}
	defer f.Close()
	start := fmt.Sprintf("%x-", uintptr(unsafe.Pointer(&b[0])))
	sc := bufio.NewScanner(f)
	found := false
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, start) {
			found = true
		}
		if found && strings.HasPrefix(line, "VmFlags:") {
			return strings.Fields(strings.TrimPrefix(line, "VmFlags:"))
		}
	}
	t.Fatalf("mapping at %s not in smaps", start)
	return nil
}

// TestActiveSegmentMappingHasNoReadAround guards the fix for 20-40 ms produce stalls: a
// fault in the preallocated tail must not read around (zero-fill) megabytes at once.
func TestActiveSegmentMappingHasNoReadAround(t *testing.T) {
	dir := t.TempDir()
	p := segmentParams{capacity: 8 << 20, offsetEntries: 1024, timeEntries: 1024, interval: 4096}
	s, err := createSegment(osFS{}, dir, 0, p, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.release()
	if flags := vmFlags(t, s.data); !slices.Contains(flags, "rr") {
		t.Fatalf("active segment mapping flags %v: want rr (MADV_RANDOM)", flags)
	}
	if flags := vmFlags(t, s.offsets.data); !slices.Contains(flags, "rr") {
		t.Fatalf("active offset index mapping flags %v: want rr (MADV_RANDOM)", flags)
	}
	if err := s.seal(1); err != nil {
		t.Fatal(err)
	}
	if flags := vmFlags(t, s.data); slices.Contains(flags, "rr") {
		t.Fatalf("sealed segment mapping flags %v: read-around should be back", flags)
	}
}
