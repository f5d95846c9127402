package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/shalelog/shale/internal/testutil"
)

// franz-go's registry client registers, evolves (one compatible and one incompatible
// change per type) and looks up schemas on the schema.registry.listener of a node started
// as `shale serve` starts one.
func TestSchemaRegistryWithFranzGoClient(t *testing.T) {
	kafka := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	registry := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	var logs testutil.Buffer
	runNode(t, &logs, "--log.dirs="+filepath.Join(t.TempDir(), "data"), "--http.listener=",
		"--schema.registry.listener="+registry, "--rest.proxy.listener=", "--listeners=PLAINTEXT://"+kafka)
	waitBroker(t, kafka)

	cl, err := sr.NewClient(sr.URLs("http://" + registry))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	testutil.Eventually(t, 20*time.Second, "the registry answers", func() bool {
		_, err := cl.Subjects(ctx)
		return err == nil
	})

	for _, tc := range []struct {
		typ                      sr.SchemaType
		v1, compatible, breaking string
	}{
		{sr.TypeAvro,
			`{"type":"record","name":"Order","fields":[{"name":"id","type":"long"}]}`,
			`{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},{"name":"note","type":"string","default":""}]}`,
			`{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},{"name":"qty","type":"int"}]}`},
		{sr.TypeProtobuf,
			"syntax = \"proto3\";\npackage shop;\nmessage Order { int64 id = 1; }\n",
			"syntax = \"proto3\";\npackage shop;\nmessage Order { int64 id = 1; string note = 2; }\n",
			"syntax = \"proto3\";\npackage shop;\nmessage Order { string id = 1; string note = 2; }\n"},
		{sr.TypeJSON,
			`{"type":"object","properties":{"id":{"type":"integer"}},"additionalProperties":false}`,
			`{"type":"object","properties":{"id":{"type":"integer"},"note":{"type":"string"}},"additionalProperties":false}`,
			`{"type":"object","properties":{"id":{"type":"string"},"note":{"type":"string"}},"additionalProperties":false}`},
	} {
		t.Run(tc.typ.String(), func(t *testing.T) {
			subject := "orders-" + tc.typ.String() + "-value"
			first, err := cl.CreateSchema(ctx, subject, sr.Schema{Schema: tc.v1, Type: tc.typ})
			if err != nil {
				t.Fatalf("register v1: %v\n%s", err, logs.String())
			}
			if first.Version != 1 || first.ID <= 0 {
				t.Fatalf("v1 %+v", first)
			}
			again, err := cl.CreateSchema(ctx, subject, sr.Schema{Schema: tc.v1, Type: tc.typ})
			if err != nil || again.ID != first.ID || again.Version != 1 {
				t.Fatalf("v1 again %+v, %v", again, err)
			}
			check, err := cl.CheckCompatibility(ctx, subject, -1, sr.Schema{Schema: tc.compatible, Type: tc.typ})
			if err != nil || !check.Is {
				t.Fatalf("compatible change checked %+v, %v", check, err)
			}
			second, err := cl.CreateSchema(ctx, subject, sr.Schema{Schema: tc.compatible, Type: tc.typ})
			if err != nil || second.Version != 2 || second.ID == first.ID {
				t.Fatalf("compatible change %+v, %v", second, err)
			}
			_, err = cl.CreateSchema(ctx, subject, sr.Schema{Schema: tc.breaking, Type: tc.typ})
			var re *sr.ResponseError
			if !errors.As(err, &re) || re.StatusCode != http.StatusConflict || re.ErrorCode != 409 {
				t.Fatalf("breaking change answered %v", err)
			}
			found, err := cl.LookupSchema(ctx, subject, sr.Schema{Schema: tc.v1, Type: tc.typ})
			if err != nil || found.ID != first.ID || found.Version != 1 {
				t.Fatalf("lookup %+v, %v", found, err)
			}
			byID, err := cl.SchemaByID(ctx, second.ID)
			if err != nil || byID.Type != tc.typ {
				t.Fatalf("by id %+v, %v", byID, err)
			}
			latest, err := cl.SchemaByVersion(ctx, subject, -1)
			if err != nil || latest.Version != 2 || latest.ID != second.ID {
				t.Fatalf("latest %+v, %v", latest, err)
			}
		})
	}
	subjects, err := cl.Subjects(ctx)
	if err != nil || len(subjects) != 3 {
		t.Fatalf("subjects %v, %v", subjects, err)
	}
	// Per-subject compatibility through the client's own calls.
	res := cl.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatNone}, "orders-AVRO-value")
	if len(res) != 1 || res[0].Err != nil || res[0].Level != sr.CompatNone {
		t.Fatalf("set compatibility %+v", res)
	}
}
