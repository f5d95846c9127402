package partition

import (
	"testing"
	"time"
)

// Retention never deletes a segment unless the next one starts at or below the high
// watermark (Kafka's rule). Above it, a record may be all that a lagging in-sync
// follower still lacks: deleting it sends the follower to the new log start, its fetch
// offset raises the high watermark, and acks=all produces are answered for records that
// no replica or consumer ever saw. By size (retention.bytes) and by time (retention.ms
// with old CreateTime timestamps, a backfill) alike.
func TestRetentionStopsAtTheHighWatermark(t *testing.T) {
	for _, c := range []struct {
		name        string
		bytes, mins int64
	}{{"retention.bytes", 1, -1}, {"retention.ms", -1, 1}} {
		t.Run(c.name, func(t *testing.T) {
			set := testSettings()
			set.Log.SegmentBytes = int64(len(batch(t, 0, 10, 0))) // one batch a segment
			set.Log.RetentionBytes, set.Log.RetentionMs = c.bytes, c.mins
			p, err := open("t", testID, 0, 1, t.TempDir(), -1, set, quiet())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.close() })
			now := time.Now()
			if _, err := p.ApplyState(leaderState(1, 1, 1, 2), now); err != nil {
				t.Fatal(err)
			}
			for range 5 {
				appendLeader(t, p, 10, -1) // timestamps 0: older than any retention.ms
			}
			// Follower 2, in the ISR, has fetched the first batch only.
			if _, _, err := p.FollowerFetched(2, 10, 0, -1, now); err != nil {
				t.Fatal(err)
			}
			if hw := p.HighWatermark(); hw != 10 {
				t.Fatalf("high watermark %d, want 10", hw)
			}
			if err := p.EnforceRetention(); err != nil {
				t.Fatal(err)
			}
			if start, hw := p.LogStartOffset(), p.HighWatermark(); start != 10 {
				t.Fatalf("retention moved the log start to %d with the high watermark at %d, want 10", start, hw)
			}
			// Once the follower has it all, retention goes on to the last sealed segment.
			if _, _, err := p.FollowerFetched(2, 50, 10, -1, now); err != nil {
				t.Fatal(err)
			}
			if err := p.EnforceRetention(); err != nil {
				t.Fatal(err)
			}
			if start := p.LogStartOffset(); start != 40 {
				t.Fatalf("log start %d after the follower caught up, want 40", start)
			}
		})
	}
}
