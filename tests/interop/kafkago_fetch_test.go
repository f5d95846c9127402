package interop

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	kafka "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKafkaGoClientFetch: kafka-go's Client.Fetch sends a full fetch with session id -1
// and epoch -1, which asks for no fetch session; Kafka serves it. (Shale used to answer
// FETCH_SESSION_ID_NOT_FOUND with no records.)
func TestKafkaGoClientFetch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	topic := fmt.Sprintf("kafkago-client-fetch-%d", time.Now().UnixNano())
	resp, err := target.admin.CreateTopic(ctx, 1, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic: %v", err)
	}
	const n = 5
	for i := range n {
		r := &kgo.Record{Topic: topic, Value: []byte(fmt.Sprint("v", i))}
		if err := target.client.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	// A transport of its own: kafka.DefaultTransport caches metadata for seconds, and an
	// earlier test in this process may have filled it before the topic existed.
	transport := &kafka.Transport{}
	defer transport.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(target.seeds...), Timeout: 10 * time.Second, Transport: transport}
	fr, err := client.Fetch(ctx, &kafka.FetchRequest{Topic: topic, Partition: 0, Offset: 0, MinBytes: 1, MaxBytes: 1 << 20, MaxWait: time.Second})
	if err != nil {
		t.Fatalf("kafka-go Client.Fetch: %v", err)
	}
	if fr.Error != nil {
		t.Fatalf("kafka-go Client.Fetch answered %v", fr.Error)
	}
	var got []string
	for {
		rec, err := fr.Records.ReadRecord()
		if err != nil {
			break
		}
		v, err := io.ReadAll(rec.Value)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(v))
	}
	if len(got) != n || got[0] != "v0" || got[n-1] != fmt.Sprint("v", n-1) {
		t.Fatalf("fetched %q, want v0..v%d (high watermark %d)", got, n-1, fr.HighWatermark)
	}
}
