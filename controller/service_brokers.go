package controller

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	pb "github.com/shalelog/shale/controller/proto"
)

func (v *service) RegisterBroker(ctx context.Context, req *pb.RegisterBrokerRequest) (*pb.RegisterBrokerResponse, error) {
	ls, err := v.s.awaitSession(ctx)
	if err != nil {
		return nil, v.rpcError(err)
	}
	fail := func(err error) (*pb.RegisterBrokerResponse, error) {
		return &pb.RegisterBrokerResponse{Error: toPBError(err)}, nil
	}
	switch {
	case req.BrokerId < 0:
		return fail(kafkaErrorf(kerr.InvalidRequest, "broker id %d is negative", req.BrokerId))
	case req.Incarnation == "":
		return fail(kafkaErrorf(kerr.InvalidRequest, "broker %d registers without an incarnation id", req.BrokerId))
	case len(req.Listeners) == 0:
		return fail(kafkaErrorf(kerr.InvalidRequest, "broker %d registers without a listener", req.BrokerId))
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if old := v.s.fsm.brokerState(req.BrokerId); old != nil && old.Incarnation != req.Incarnation && !old.Fenced {
		if seen, ok := ls.lastSeen[req.BrokerId]; ok && time.Since(seen) <= v.s.cfg.SessionTimeout {
			return fail(kafkaErrorf(kerr.DuplicateBrokerRegistration,
				"broker %d is registered by another process whose session is alive", req.BrokerId))
		}
	}
	res, _, err := v.s.propose(ctx, &pb.Record{Record: &pb.Record_RegisterBroker{RegisterBroker: &pb.RegisterBrokerRecord{
		BrokerId: req.BrokerId, Incarnation: req.Incarnation, Listeners: req.Listeners, Rack: req.Rack}}})
	if err != nil {
		return nil, v.rpcError(err)
	}
	if res.err != nil {
		return fail(res.err)
	}
	ls.lastSeen[req.BrokerId] = time.Now()
	epoch := res.value.(registerResult).epoch
	v.s.log.Info("broker registered", "broker", req.BrokerId, "epoch", epoch, "rack", req.Rack)
	return &pb.RegisterBrokerResponse{BrokerEpoch: epoch, ClusterId: v.s.fsm.image().ClusterID}, nil
}

func (v *service) BrokerHeartbeat(ctx context.Context, req *pb.BrokerHeartbeatRequest) (*pb.BrokerHeartbeatResponse, error) {
	ls, err := v.s.awaitSession(ctx)
	if err != nil {
		return nil, v.rpcError(err)
	}
	resp := &pb.BrokerHeartbeatResponse{SessionTimeoutMs: v.s.cfg.SessionTimeout.Milliseconds()}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	b := v.s.fsm.brokerState(req.BrokerId)
	switch {
	case b == nil:
		resp.Error = toPBError(kafkaErrorf(kerr.BrokerIDNotRegistered, "broker %d is not registered", req.BrokerId))
		return resp, nil
	case b.Epoch != req.BrokerEpoch:
		resp.Error = toPBError(kafkaErrorf(kerr.StaleBrokerEpoch, "broker %d has epoch %d, not %d", req.BrokerId, b.Epoch, req.BrokerEpoch))
		return resp, nil
	}
	ls.lastSeen[req.BrokerId] = time.Now()
	v.s.noteBrokerOffsetLocked(ls, req.BrokerId, req.MetadataOffset)
	switch {
	case req.WantShutdown && req.Stopping && !b.Fenced:
		err = v.s.fenceLocked(ls, &pb.FenceBrokersRecord{BrokerIds: []int32{b.Id}, BrokerEpochs: []int64{b.Epoch}, Reason: "broker stopping"})
		if err == nil {
			v.s.log.Info("broker fenced: it is stopping", "broker", b.Id)
		}
	case req.WantShutdown && !b.Fenced && (!b.InControlledShutdown || v.s.fsm.leadsMovable(b.Id)):
		// Again while it leads something movable: an ISR member may have come back since.
		first := !b.InControlledShutdown
		var res applyResult
		res, _, err = v.s.propose(ctx, &pb.Record{Record: &pb.Record_ControlledShutdown{ControlledShutdown: &pb.ControlledShutdownRecord{
			BrokerId: b.Id, BrokerEpoch: b.Epoch}}})
		if err == nil && res.err != nil {
			err = res.err
		}
		if err == nil && first {
			v.s.log.Info("broker in controlled shutdown", "broker", b.Id)
		}
	case !req.WantShutdown && b.Fenced && ReadyToUnfence(b.Epoch, ls.fencedAt[b.Id], req.MetadataOffset):
		var res applyResult
		res, _, err = v.s.propose(ctx, &pb.Record{Record: &pb.Record_UnfenceBroker{UnfenceBroker: &pb.UnfenceBrokerRecord{BrokerId: b.Id, BrokerEpoch: b.Epoch}}})
		if err == nil && res.err != nil {
			err = res.err
		}
		if err == nil {
			delete(ls.fencedAt, b.Id)
			v.s.log.Info("broker unfenced", "broker", b.Id, "epoch", b.Epoch)
		}
	}
	if resp.Error, err = v.outcome(err); err != nil {
		return nil, err
	}
	if b = v.s.fsm.brokerState(req.BrokerId); b != nil {
		resp.Fenced = b.Fenced
		resp.ShouldShutDown = req.WantShutdown && (b.Fenced || !v.s.fsm.leadsMovable(b.Id))
	}
	resp.MetadataOffset = v.s.fsm.image().Offset
	return resp, nil
}

func (v *service) ElectLeaders(ctx context.Context, req *pb.ElectLeadersRequest) (*pb.ElectLeadersResponse, error) {
	if _, err := v.s.awaitSession(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	switch req.Type {
	case pb.ElectionType_ELECTION_TYPE_PREFERRED, pb.ElectionType_ELECTION_TYPE_UNCLEAN:
	default:
		return &pb.ElectLeadersResponse{Error: toPBError(kafkaErrorf(kerr.InvalidRequest, "unknown election type %d", req.Type))}, nil
	}
	rec := &pb.ElectLeadersRecord{Type: req.Type, AllPartitions: req.AllPartitions, Partitions: req.Partitions}
	// An election that would change nothing is answered without growing the log.
	full := &pb.Record{Record: &pb.Record_ElectLeaders{ElectLeaders: rec}}
	res := v.s.fsm.dryRun(full)
	if res.err == nil && electionWouldChange(res.value) {
		var err error
		if res, _, err = v.s.propose(ctx, full); err != nil {
			return nil, v.rpcError(err)
		}
	}
	if res.err != nil {
		return &pb.ElectLeadersResponse{Error: toPBError(res.err)}, nil
	}
	results, _ := res.value.(electionResults)
	resp := &pb.ElectLeadersResponse{}
	elected := 0
	for _, topic := range slices.Sorted(maps.Keys(results)) {
		for _, idx := range slices.Sorted(maps.Keys(results[topic])) {
			err := results[topic][idx]
			if err == nil {
				elected++
			}
			resp.Results = append(resp.Results, &pb.PartitionError{Topic: topic, Partition: idx, Error: toPBError(err)})
		}
	}
	if elected > 0 {
		v.s.log.Info("leaders elected on request", "type", req.Type.String(), "partitions", elected)
	}
	return resp, nil
}

// electionWouldChange reports whether a dry run's results elect any partition.
func electionWouldChange(value any) bool {
	results, _ := value.(electionResults)
	for _, ps := range results {
		for _, err := range ps {
			if err == nil {
				return true
			}
		}
	}
	return false
}
