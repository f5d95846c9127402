package log

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// TestPowerLossModel: the tracker undoes exactly what was not made durable.
func TestPowerLossModel(t *testing.T) {
	dir := t.TempDir()
	f := &Faults{}
	f.TrackDurability()
	fsys := faultyFS{fileSystem: osFS{}, f: f}
	write := func(name, content string, sync bool) file {
		t.Helper()
		fl, err := fsys.OpenFile(filepath.Join(dir, name), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if err := fl.Truncate(0); err != nil {
			t.Fatal(err)
		}
		if _, err := fl.WriteAt([]byte(content), 0); err != nil {
			t.Fatal(err)
		}
		if sync {
			if err := fl.Sync(); err != nil {
				t.Fatal(err)
			}
		}
		return fl
	}
	write("a", "a-synced", true).Close()
	write("gone", "gone-synced", true).Close()
	write("moved", "moved-synced", true).Close()
	if err := fsys.SyncDir(dir); err != nil {
		t.Fatal(err)
	}
	write("a", "a-unsynced-longer", false).Close()                  // reverts
	write("new", "never durable", true).Close()                     // its entry is not durable
	if err := fsys.Remove(filepath.Join(dir, "gone")); err != nil { // comes back
		t.Fatal(err)
	}
	if err := fsys.Rename(filepath.Join(dir, "moved"), filepath.Join(dir, "moved2")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.PowerLoss(); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a": "a-synced", "gone": "gone-synced", "moved": "moved-synced"}
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, de := range des {
		b, err := os.ReadFile(filepath.Join(dir, de.Name()))
		if err != nil {
			t.Fatal(err)
		}
		got[de.Name()] = string(b)
	}
	if len(got) != len(want) {
		t.Fatalf("after the power loss: %q, want %q", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("after the power loss: %q, want %q", got, want)
		}
	}
}

// TestLogRecoversFromPowerLoss appends, crashes and cuts the power at random points,
// then reopens: the log must hold a prefix of what was appended, consistent indexes, and
// with flush.messages=1 every append that its group commit covered (FlushedOffset).
func TestLogRecoversFromPowerLoss(t *testing.T) {
	for _, flushEvery := range []bool{false, true} {
		lost := 0
		for seed := uint64(1); seed <= 20; seed++ {
			rng := rand.New(rand.NewPCG(seed, 7))
			dir := t.TempDir()
			f := &Faults{}
			f.TrackDurability()
			cfg := testConfig(nil)
			cfg.SegmentBytes = 1024
			cfg.IndexIntervalBytes = 100
			cfg.Faults = f
			if flushEvery {
				cfg.FlushMessages = 1
			}
			var appended [][]byte
			for round := 0; round < 3; round++ {
				l := mustOpen(t, dir, cfg)
				if got := readAll(t, l, l.StartOffset()); !isPrefix(got, appended) {
					t.Fatalf("seed %d flush %v round %d: %d batches after recovery are not a prefix of the %d appended",
						seed, flushEvery, round, len(got), len(appended))
				} else {
					if flushEvery && len(got) != len(appended) {
						t.Fatalf("seed %d: flush.messages=1 lost %d acknowledged batches in a power loss",
							seed, len(appended)-len(got))
					}
					appended = got
				}
				checkIndexes(t, l)
				for i := 0; i < 5+rng.IntN(30); i++ {
					b := makeBatch(t, batchSpec{records: 1 + rng.IntN(3), valueSize: 20 + rng.IntN(200), timestamp: int64(1000 + i)})
					mustAppend(t, l, b, 1)
				}
				if rng.IntN(2) == 0 {
					if err := l.Flush(); err != nil {
						t.Fatal(err)
					}
				}
				if flushEvery {
					// Acknowledged under flush.messages=1: below the flushed offset.
					waitFlushed(t, l)
				}
				appended = readAll(t, l, l.StartOffset())
				l.crashForTest()
				n, err := f.PowerLoss()
				if err != nil {
					t.Fatal(err)
				}
				lost += n
			}
		}
		if lost == 0 {
			t.Errorf("flush %v: no power loss changed a file: the test tests nothing", flushEvery)
		}
	}
}

func isPrefix(got, all [][]byte) bool {
	if len(got) > len(all) {
		return false
	}
	for i := range got {
		if !bytes.Equal(got[i], all[i]) {
			return false
		}
	}
	return true
}

// TestPowerLossDirectoryReplaced: directories are not tracked, so a directory renamed
// away and another created at its path (a deleted topic's replica set aside, the topic
// recreated) keeps the new one's files, never the old one's.
func TestPowerLossDirectoryReplaced(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "t-0")
	f := &Faults{}
	f.TrackDurability()
	fsys := faultyFS{fileSystem: osFS{}, f: f}
	put := func(name, content string) {
		t.Helper()
		fl, err := fsys.OpenFile(filepath.Join(dir, name), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fl.WriteAt([]byte(content), 0); err != nil {
			t.Fatal(err)
		}
		if err := fl.Sync(); err != nil {
			t.Fatal(err)
		}
		fl.Close()
		if err := fsys.SyncDir(dir); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	put("old.log", "old incarnation")
	if err := os.Rename(dir, dir+".x-delete"); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	put("new.log", "new incarnation")
	if _, err := f.PowerLoss(); err != nil {
		t.Fatal(err)
	}
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(des) != 1 || des[0].Name() != "new.log" {
		t.Fatalf("after the power loss the new directory holds %v, want only new.log", des)
	}
}
