package bench

import (
	"context"
	"os"
	"testing"
	"time"
)

func TestProbeLoopback(t *testing.T) {
	l, err := ProbeLoopback(context.Background(), 1024, 2, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if l.Bytes <= 0 || l.Bytes%1024 != 0 || l.MBPerSec <= 0 || l.RecordsPerSec <= 0 || l.Streams != 2 || l.MessageSize != 1024 {
		t.Errorf("probe: %+v", l)
	}
	if l.Label() != "loopback-tcp 1 KiB x2" {
		t.Errorf("label %q", l.Label())
	}
	if _, err := ProbeLoopback(context.Background(), 0, 1, time.Second); err == nil {
		t.Error("size 0 accepted")
	}
}

func TestProbeDisk(t *testing.T) {
	dir := t.TempDir()
	for _, fsync := range []bool{false, true} {
		l, err := ProbeDisk(context.Background(), dir, 64<<10, fsync, 50*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if l.Bytes <= 0 || l.Bytes%(64<<10) != 0 || l.MBPerSec <= 0 {
			t.Errorf("fsync=%v: %+v", fsync, l)
		}
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 0 {
		t.Errorf("probe left %d files behind", len(ents))
	}
	if _, err := ProbeDisk(context.Background(), dir+"/missing", 1024, false, time.Second); err == nil {
		t.Error("missing dir accepted")
	}
}

func TestDescribeMachine(t *testing.T) {
	m := DescribeMachine()
	if m.CPUs < 1 || m.OS == "" || m.Go == "" {
		t.Errorf("machine %+v", m)
	}
	if m.String() == "" {
		t.Error("empty description")
	}
}
