package controller

import (
	"context"
	"maps"
	"slices"

	"github.com/shalelog/shale/metadata"

	pb "github.com/shalelog/shale/controller/proto"
)

var _ metadata.TxnStore = (*BrokerClient)(nil)

func txnStateToPB(st metadata.TxnState) *pb.TxnState {
	out := &pb.TxnState{
		TransactionalId: st.TransactionalID, ProducerId: st.ProducerID, ProducerEpoch: int32(st.ProducerEpoch),
		LastProducerId: st.LastProducerID, LastProducerEpoch: int32(st.LastProducerEpoch), TimeoutMs: st.TimeoutMs,
		Status: pb.TxnStatus(st.Status), Partitions: topicPartitionsPB(st.Partitions), Groups: slices.Clone(st.Groups),
		StartMs: st.StartMs, LastUpdateMs: st.LastUpdateMs, TxnVersion: int32(st.TxnVersion),
	}
	if st.NextProducerID >= 0 && (st.Status == metadata.TxnPrepareCommit || st.Status == metadata.TxnPrepareAbort) {
		out.NextProducerId = &st.NextProducerID
	}
	for _, g := range slices.Sorted(maps.Keys(st.PendingOffsets)) {
		gs := &pb.GroupOffsets{Group: g}
		for _, o := range st.PendingOffsets[g] {
			gs.Offsets = append(gs.Offsets, offsetToPB(o))
		}
		out.PendingOffsets = append(out.PendingOffsets, gs)
	}
	return out
}

func txnStateFromPB(p *pb.TxnState) metadata.TxnState {
	st := metadata.TxnState{
		TransactionalID: p.TransactionalId, ProducerID: p.ProducerId, ProducerEpoch: int16(p.ProducerEpoch),
		LastProducerID: p.LastProducerId, LastProducerEpoch: int16(p.LastProducerEpoch), TimeoutMs: p.TimeoutMs,
		Status: metadata.TxnStatus(p.Status), Partitions: topicFilter(false, p.Partitions), Groups: p.Groups,
		StartMs: p.StartMs, LastUpdateMs: p.LastUpdateMs, TxnVersion: int16(p.TxnVersion), NextProducerID: -1,
	}
	if p.NextProducerId != nil {
		st.NextProducerID = *p.NextProducerId
	}
	if len(p.PendingOffsets) > 0 {
		st.PendingOffsets = map[string][]metadata.CommittedOffset{}
		for _, g := range p.PendingOffsets {
			for _, e := range g.Offsets {
				st.PendingOffsets[g.Group] = append(st.PendingOffsets[g.Group], offsetFromPB(e))
			}
		}
	}
	return st
}

// WriteTxnState commits one transition of a transactional id; see metadata.TxnStore.
func (c *BrokerClient) WriteTxnState(ctx context.Context, fence metadata.GroupFence, st metadata.TxnState, remove bool) error {
	req := &pb.WriteTxnStateRequest{Record: &pb.TxnStateRecord{CoordinatorId: fence.Broker, CoordinatorEpoch: fence.Epoch,
		State: txnStateToPB(st), Remove: remove}}
	req.Record.State.PendingOffsets = nil
	_, err := rpc(ctx, c, pb.ControllerClient.WriteTxnState, req)
	return err
}

// TxnOffsetCommit adds offsets to a transaction's pending offsets; see metadata.TxnStore.
func (c *BrokerClient) TxnOffsetCommit(ctx context.Context, fence metadata.GroupFence, transactionalID string, producerID int64, producerEpoch int16, group string, offsets []metadata.CommittedOffset) error {
	rec := &pb.TxnOffsetCommitRecord{CoordinatorId: fence.Broker, CoordinatorEpoch: fence.Epoch, TransactionalId: transactionalID,
		ProducerId: producerID, ProducerEpoch: int32(producerEpoch), Group: group}
	for _, o := range offsets {
		rec.Offsets = append(rec.Offsets, offsetToPB(o))
	}
	_, err := rpc(ctx, c, pb.ControllerClient.TxnOffsetCommit, &pb.TxnOffsetCommitRequest{Record: rec})
	return err
}

// LoadTxnStates returns the transaction states of the given offsets partitions.
func (c *BrokerClient) LoadTxnStates(ctx context.Context, partitions []int32) ([]metadata.TxnState, error) {
	resp, err := rpc(ctx, c, pb.ControllerClient.LoadTxnStates, &pb.LoadTxnStatesRequest{Partitions: partitions})
	if err != nil {
		return nil, err
	}
	out := make([]metadata.TxnState, len(resp.States))
	for i, s := range resp.States {
		out[i] = txnStateFromPB(s)
	}
	return out, nil
}

// PendingTxnOffsets lists group's partitions with offsets pending in a transaction.
func (c *BrokerClient) PendingTxnOffsets(ctx context.Context, group string) (map[string][]int32, error) {
	resp, err := rpc(ctx, c, pb.ControllerClient.PendingTxnOffsets, &pb.PendingTxnOffsetsRequest{Group: group})
	if err != nil {
		return nil, err
	}
	return topicFilter(false, resp.Partitions), nil
}
