package protocol_test

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TestAdminErrorMessages: error_message carries only what is specific to the failure.
// Clients print the code's name and description beside it, so a message that repeats
// them reads "INVALID_PARTITIONS: Number of partitions is below 1.: INVALID_PARTITIONS:
// Number of partitions is below 1.: topic ..." on a user's screen.
func TestAdminErrorMessages(t *testing.T) {
	tb := startBroker(t)
	adm := tb.admin()
	ctx := ctxTimeout(t, 20*time.Second)
	tb.createTopic("t1", 5, nil)

	check := func(what string, err error, wantErr *kerr.Error, msg, wantMsg string) {
		t.Helper()
		if !errors.Is(err, wantErr) || msg != wantMsg {
			t.Errorf("%s: error %v, message %q; want %v and %q", what, err, msg, wantErr, wantMsg)
		}
	}

	// From the controller, over its gRPC service.
	parts, err := adm.UpdatePartitions(ctx, 2, "t1")
	if err != nil {
		t.Fatal(err)
	}
	check("lower the partition count", parts["t1"].Err, kerr.InvalidPartitions, parts["t1"].ErrMessage,
		`topic "t1" has 5 partitions, more than the requested 2`)
	created, err := adm.CreateTopics(ctx, 1, 1, nil, "t1")
	if err != nil {
		t.Fatal(err)
	}
	check("create an existing topic", created["t1"].Err, kerr.TopicAlreadyExists, created["t1"].ErrMessage,
		`topic "t1" already exists`)

	// Removing an unknown config is refused as setting one is, as Kafka does.
	for _, op := range []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "no.such.key", Value: kadm.StringPtr("1")},
		{Op: kadm.DeleteConfig, Name: "no.such.key"},
	} {
		res, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{op}, "t1")
		if err != nil {
			t.Fatal(err)
		}
		check("alter no.such.key", res[0].Err, kerr.InvalidConfig, res[0].ErrMessage, `unknown topic config "no.such.key"`)
	}

	// From the broker itself.
	res, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "log.retention.ms", Value: kadm.StringPtr("1")}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	check("alter a broker config", res[0].Err, kerr.InvalidRequest, res[0].ErrMessage,
		"Shale's broker configs are static; set them in server.properties or flags")
}
