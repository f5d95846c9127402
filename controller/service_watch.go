package controller

import (
	"time"

	"google.golang.org/grpc/status"

	pb "github.com/shalelog/shale/controller/proto"
)

const (
	// watchProgressInterval is how often a quiet WatchMetadata stream says it is alive.
	watchProgressInterval = time.Second
	// imageChunkPartitions is about how many partitions one image chunk carries.
	imageChunkPartitions = 20_000
)

func (v *service) WatchMetadata(req *pb.WatchMetadataRequest, stream pb.Controller_WatchMetadataServer) error {
	ctx := stream.Context()
	ls, err := v.s.awaitSession(ctx)
	if err != nil {
		return v.rpcError(err)
	}
	offset, clusterID := req.FromOffset, req.ClusterId
	ping := time.NewTicker(watchProgressInterval)
	defer ping.Stop()
	f := v.s.fsm
	for {
		f.mu.RLock()
		im := f.img
		ds, ok := f.deltas.since(offset, im.Offset)
		if req.WantImage {
			ok, req.WantImage = false, false
		}
		if clusterID != "" && im.ClusterID != "" && clusterID != im.ClusterID {
			ok = false
		}
		var brokers []*pb.BrokerState
		if !ok {
			brokers = f.sortedBrokersLocked()
		}
		changed := f.deltas.changed
		f.mu.RUnlock()

		if ok {
			for _, d := range ds {
				if err := stream.Send(&pb.MetadataUpdate{Update: &pb.MetadataUpdate_Delta{Delta: d}}); err != nil {
					return err
				}
			}
		} else {
			for _, c := range imageChunks(im, brokers, imageChunkPartitions) {
				if err := stream.Send(&pb.MetadataUpdate{Update: &pb.MetadataUpdate_Image{Image: c}}); err != nil {
					return err
				}
			}
		}
		offset, clusterID = im.Offset, im.ClusterID

		select {
		case <-changed:
		case <-ping.C:
			if err := stream.Send(&pb.MetadataUpdate{Update: &pb.MetadataUpdate_Progress{Progress: offset}}); err != nil {
				return err
			}
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-ls.ctx.Done():
			return v.rpcError(errNotLeader)
		}
	}
}
