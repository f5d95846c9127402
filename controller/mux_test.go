package controller

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/shalelog/shale/internal/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kafkaRequest frames req as a Kafka client sends it: size, header v1, body.
func kafkaRequest(req kmsg.Request) []byte {
	body := req.AppendTo(nil)
	hdr := []byte{0, 0, 0, 0}
	hdr = append(hdr, byte(req.Key()>>8), byte(req.Key()), byte(req.GetVersion()>>8), byte(req.GetVersion()))
	hdr = append(hdr, 0, 0, 0, 7)               // correlation id
	hdr = append(hdr, 0, 4, 'k', 'g', 'o', '!') // client id
	if req.IsFlexible() {
		hdr = append(hdr, 0) // no tagged fields
	}
	msg := append(hdr, body...)
	n := len(msg) - 4
	msg[0], msg[1], msg[2], msg[3] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	return msg
}

// A Kafka client given a controller-only listener is closed at once, not left to time
// out, and the log says where the brokers listen.
func TestKafkaClientOnControllerPort(t *testing.T) {
	var logs testutil.Buffer
	q := newTestQuorum(t, 1, func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	q.leader()
	q.broker(1, "")

	c, err := net.Dial("tcp", q.voters[0].Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "kgo", "1"
	if _, err := c.Write(kafkaRequest(req)); err != nil {
		t.Fatal(err)
	}
	// Generous: the point is that the server closes rather than waits for the client.
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	if n, err := c.Read(make([]byte, 64)); !errors.Is(err, io.EOF) && !isReset(err) {
		t.Fatalf("read %d bytes, err %v; want the connection closed", n, err)
	}
	if out := logs.String(); !strings.Contains(out, "a Kafka client connected to the controller listener") ||
		!strings.Contains(out, "broker_listeners=127.0.0.1:19001") {
		t.Fatalf("no hint logged:\n%s", out)
	}
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && strings.Contains(op.Err.Error(), "connection reset")
}
