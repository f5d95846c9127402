package controller

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"

	"google.golang.org/grpc"

	"github.com/shalelog/shale/metadata"

	pb "github.com/shalelog/shale/controller/proto"
)

// scriptedController answers WatchMetadata with a fixed list of updates, then EOF.
type scriptedController struct {
	pb.ControllerClient
	updates []*pb.MetadataUpdate
}

type scriptedStream struct {
	grpc.ClientStream
	updates []*pb.MetadataUpdate
}

func (s *scriptedStream) Recv() (*pb.MetadataUpdate, error) {
	if len(s.updates) == 0 {
		return nil, io.EOF
	}
	u := s.updates[0]
	s.updates = s.updates[1:]
	return u, nil
}

func (sc *scriptedController) WatchMetadata(context.Context, *pb.WatchMetadataRequest, ...grpc.CallOption) (grpc.ServerStreamingClient[pb.MetadataUpdate], error) {
	return &scriptedStream{updates: sc.updates}, nil
}

func imageUpdates(offset uint64, topic string) []*pb.MetadataUpdate {
	im := emptyImage()
	im.Offset, im.ClusterID, im.ControllerID = offset, "c", 1
	if topic != "" {
		im.Topics[topic] = &metadata.Topic{Name: topic, ID: [16]byte{1}, Partitions: []metadata.Partition{
			{Topic: topic, Index: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}}}
	}
	var out []*pb.MetadataUpdate
	for _, c := range imageChunks(im, nil, 10) {
		out = append(out, &pb.MetadataUpdate{Update: &pb.MetadataUpdate_Image{Image: c}})
	}
	return out
}

func deltaUpdate(prev, offset uint64) *pb.MetadataUpdate {
	id := int32(2)
	return &pb.MetadataUpdate{Update: &pb.MetadataUpdate_Delta{Delta: &pb.MetadataDelta{PrevOffset: prev, Offset: offset, ControllerId: &id}}}
}

func TestMetadataAppliedInOffsetOrder(t *testing.T) {
	c := &BrokerClient{log: slog.New(slog.DiscardHandler), watchers: map[*imageWatcher]struct{}{}, imgCh: make(chan struct{})}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	defer c.cancel()
	c.img.Store(emptyImage())
	watch := c.Watch(c.ctx)
	<-watch // the current image
	var published []uint64
	drain := func() {
		for {
			select {
			case im := <-watch:
				published = append(published, im.Offset)
			default:
				return
			}
		}
	}
	run := func(updates ...[]*pb.MetadataUpdate) error {
		t.Helper()
		var all []*pb.MetadataUpdate
		for _, u := range updates {
			all = append(all, u...)
		}
		_, err := c.watchOnce(&scriptedController{updates: all}, false)
		drain()
		return err
	}

	if err := run(imageUpdates(10, "new"), []*pb.MetadataUpdate{deltaUpdate(10, 11)}); !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	if im := c.Current(); im.Offset != 11 || im.Topic("new") == nil || im.ControllerID != 2 {
		t.Fatalf("cache at %d: %+v", im.Offset, im)
	}
	// An older image is refused: never published, and the stream is dropped.
	if err := run(imageUpdates(5, "old")); !errors.Is(err, errStaleImage) {
		t.Fatalf("older image: %v", err)
	}
	// An image at the cache's offset changes nothing.
	if err := run(imageUpdates(11, "same")); !errors.Is(err, io.EOF) {
		t.Fatalf("image at the cache's offset: %v", err)
	}
	// A delta that does not follow the cache, or does not move it forward, is refused.
	if err := run([]*pb.MetadataUpdate{deltaUpdate(9, 10)}); !errors.Is(err, errBadDelta) {
		t.Fatalf("old delta: %v", err)
	}
	if err := run([]*pb.MetadataUpdate{deltaUpdate(11, 11)}); !errors.Is(err, errBadDelta) {
		t.Fatalf("delta not moving forward: %v", err)
	}
	if im := c.Current(); im.Offset != 11 || im.Topic("new") == nil || im.Topic("old") != nil || im.Topic("same") != nil {
		t.Fatalf("cache changed by a refused update: offset %d, topics %v", im.Offset, im.Topics)
	}
	if len(published) == 0 || published[len(published)-1] != 11 {
		t.Fatalf("published offsets %v", published)
	}
	for i := 1; i < len(published); i++ {
		if published[i] <= published[i-1] {
			t.Fatalf("published offsets not increasing: %v", published)
		}
	}
	// publish itself refuses anything not newer than the cache.
	old := emptyImage()
	old.Offset = 11
	if c.publish(old) {
		t.Fatal("publish accepted an image at the cache's offset")
	}
}
