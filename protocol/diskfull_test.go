package protocol_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestFullDiskStorageError fills a small tmpfs under the broker's log dir: produce gets
// KAFKA_STORAGE_ERROR (not a hang, a crash or BROKER_NOT_AVAILABLE), reads keep working,
// and once space is freed writes are accepted again. Needs root to mount a tmpfs.
func TestFullDiskStorageError(t *testing.T) {
	dir := t.TempDir()
	mnt := filepath.Join(dir, "mnt")
	os.Mkdir(mnt, 0o755)
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (needs root): %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", mnt).Run() })

	tb := startBrokerIn(t, mnt)
	tb.createTopic("full", 1, map[string]*string{"segment.bytes": strPtr("1048576")})
	rc := dialRaw(t, tb.addr)
	if p := produceRaw(t, rc, "full", 0, makeBatch(t, -1, -1, -1, 10, 100)); p.ErrorCode != 0 {
		t.Fatalf("first produce: %d", p.ErrorCode)
	}
	// Take every remaining block.
	filler := filepath.Join(mnt, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	chunk := bytes.Repeat([]byte{1}, 1<<20)
	for {
		if _, err := f.Write(chunk); err != nil {
			break
		}
	}
	f.Close()

	var storageErr bool
	for i := 0; i < 200 && !storageErr; i++ {
		p := produceRaw(t, rc, "full", 0, makeBatch(t, -1, -1, -1, 50, 1000))
		switch p.ErrorCode {
		case 0:
		case kerr.KafkaStorageError.Code:
			storageErr = true
		default:
			t.Fatalf("produce on a full disk: error %d, want KAFKA_STORAGE_ERROR (56)", p.ErrorCode)
		}
	}
	if !storageErr {
		t.Fatal("never saw KAFKA_STORAGE_ERROR on a full disk")
	}

	// Reads still work.
	cl := tb.client(kgo.ConsumeTopics("full"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx := ctxTimeout(t, 10*time.Second)
	fs := cl.PollFetches(ctx)
	if fs.NumRecords() == 0 {
		t.Fatalf("no records readable on a full disk: %v", fs.Errors())
	}

	// Free space: writes are accepted again.
	os.Remove(filler)
	deadline := time.Now().Add(10 * time.Second)
	for {
		p := produceRaw(t, rc, "full", 0, makeBatch(t, -1, -1, -1, 10, 100))
		if p.ErrorCode == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("produce after freeing space: error %d", p.ErrorCode)
		}
		time.Sleep(50 * time.Millisecond)
	}
	hw := tb.broker.Partitions().Get("full", 0).HighWatermark()
	// A restart shows no partial batch: every offset below the high watermark reads.
	tb2 := tb.restart()
	if got := tb2.broker.Partitions().Get("full", 0).HighWatermark(); got != hw {
		t.Fatalf("after restart high watermark %d, want %d", got, hw)
	}
}
