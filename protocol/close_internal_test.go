package protocol

import (
	"context"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/replication"
)

// Close lets in-flight requests finish within its grace, then ends them: a request that
// waits on its context (acks=all, a long poll) used to hold Close until its own timeout,
// which closing the sockets did not shorten, and forever for a handler that waits only
// on its context.
func TestCloseEndsRequestsAfterGrace(t *testing.T) {
	meta := oneImageStore{im: &metadata.Image{ControllerID: -1, Brokers: map[int32]metadata.Broker{}, Topics: map[string]*metadata.Topic{}}}
	// Driven: no background goroutine; the writer asks it for the image's quotas.
	reps, err := replication.NewManager(replication.Config{NodeID: 1, LogDir: t.TempDir(), Driven: true}, meta)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reps.Close() })
	s := NewServer(Config{}, Deps{Meta: meta, Replicas: reps})
	entered := make(chan struct{})
	ended := make(chan struct{})
	s.Register(kmsg.ListGroups, 0, 0, func(ctx context.Context, r *Request) Result {
		close(entered)
		<-ctx.Done()
		close(ended)
		return Result{NoResponse: true}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(context.Background(), ln)

	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	// ListGroups v0: request header v1 (key, version, correlation id, null client id),
	// empty body.
	frame := binary.BigEndian.AppendUint32(nil, 10)
	frame = binary.BigEndian.AppendUint16(frame, uint16(kmsg.ListGroups))
	frame = binary.BigEndian.AppendUint16(frame, 0)
	frame = binary.BigEndian.AppendUint32(frame, 1)
	frame = binary.BigEndian.AppendUint16(frame, 0xffff)
	if _, err := nc.Write(frame); err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-time.After(20 * time.Second):
		t.Fatal("the request never reached its handler")
	}

	closed := make(chan error, 1)
	go func() { closed <- s.Close(10 * time.Millisecond) }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Close still waiting for a request 20s past its 10ms grace")
	}
	select {
	case <-ended:
	default:
		t.Fatal("Close returned before the request ended")
	}
}

// oneImageStore is a metadata store that only ever shows im.
type oneImageStore struct {
	metadata.Store
	im *metadata.Image
}

func (s oneImageStore) Current() *metadata.Image { return s.im }
