package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/shalelog/shale/internal/testutil"
)

// schemaOrder is the Avro record the test produces; the avro tags are hamba/avro's.
type schemaOrder struct {
	ID   int64  `avro:"id"`
	Note string `avro:"note"`
}

const schemaOrderAvro = `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"long"},{"name":"note","type":"string"}]}`

// A franz-go producer writing to a topic with confluent.value.schema.validation on, on a
// node started as `shale serve` starts one: a payload whose schema id is not registered
// under <topic>-value fails with INVALID_RECORD; once registered with franz-go's sr
// client and framed by its serde, the same record goes in, reads back, and decodes; the
// refusal is counted in the node's metrics.
func TestSchemaValidationWithFranzGo(t *testing.T) {
	kafka := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	registry := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	metrics := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	var logs testutil.Buffer
	runNode(t, &logs, "--log.dirs="+filepath.Join(t.TempDir(), "data"), "--http.listener="+metrics,
		"--schema.registry.listener="+registry, "--rest.proxy.listener=", "--listeners=PLAINTEXT://"+kafka)
	waitBroker(t, kafka)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	const topic = "orders"
	adm := kadm.NewClient(newClient(t, kgo.SeedBrokers(kafka)))
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"confluent.value.schema.validation": ptr("true")}, topic); err != nil {
		t.Fatal(err)
	}

	srCl, err := sr.NewClient(sr.URLs("http://" + registry))
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, "the registry answers", func() bool {
		_, err := srCl.Subjects(ctx)
		return err == nil
	})
	schema := avro.MustParse(schemaOrderAvro)
	// Registered under another topic's subject only: not valid for orders.
	elsewhere, err := srCl.CreateSchema(ctx, "elsewhere-value", sr.Schema{Schema: schemaOrderAvro, Type: sr.TypeAvro})
	if err != nil {
		t.Fatalf("register: %v\n%s", err, logs.String())
	}
	serdeFor := func(id int) *sr.Serde {
		var s sr.Serde
		s.Register(id, schemaOrder{},
			sr.EncodeFn(func(v any) ([]byte, error) { return avro.Marshal(schema, v) }),
			sr.DecodeFn(func(b []byte, v any) error { return avro.Unmarshal(schema, b, v) }))
		return &s
	}
	order := schemaOrder{ID: 7, Note: "two spoons"}

	prod := newClient(t, kgo.SeedBrokers(kafka), kgo.DefaultProduceTopic(topic), kgo.RecordRetries(3))
	produce := func(value []byte) error {
		return prod.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr()
	}
	for name, value := range map[string][]byte{
		"raw JSON":                  []byte(`{"id":7,"note":"two spoons"}`),
		"an id of another subject":  serdeFor(elsewhere.ID).MustEncode(order),
		"an id nobody has assigned": serdeFor(elsewhere.ID + 1000).MustEncode(order),
	} {
		if err := produce(value); !errors.Is(err, kerr.InvalidRecord) {
			t.Fatalf("%s: produce answered %v, want INVALID_RECORD", name, err)
		}
	}

	registered, err := srCl.CreateSchema(ctx, topic+"-value", sr.Schema{Schema: schemaOrderAvro, Type: sr.TypeAvro})
	if err != nil {
		t.Fatal(err)
	}
	serde := serdeFor(registered.ID)
	if err := produce(serde.MustEncode(order)); err != nil {
		t.Fatalf("registered payload: %v", err)
	}

	cons := newClient(t, kgo.SeedBrokers(kafka), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fetches := cons.PollRecords(ctx, 10)
	if err := fetches.Err(); err != nil {
		t.Fatal(err)
	}
	recs := fetches.Records()
	if len(recs) != 1 || recs[0].Offset != 0 {
		t.Fatalf("read back %d records (first at offset %d), want the one registered record at offset 0", len(recs), recs[0].Offset)
	}
	var got schemaOrder
	if err := serde.Decode(recs[0].Value, &got); err != nil || got != order {
		t.Fatalf("decoded %+v, %v", got, err)
	}

	resp, err := http.Get("http://" + metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := `shale_schema_validation_refusals_total{topic="orders"} 3`; !strings.Contains(string(body), want) {
		t.Fatalf("metrics lack %s", want)
	}
}

func newClient(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}
