package controller

import (
	"fmt"
	"log/slog"
	"sync"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/shalelog/shale/metadata"

	pb "github.com/shalelog/shale/controller/proto"
)

// fsm is the Raft state machine: the metadata image plus the state outside it (broker
// listeners, producer-id counter, committed offsets). Apply is deterministic: everything
// it decides follows from the state and the record.
type fsm struct {
	log *slog.Logger

	mu sync.RWMutex
	// img is immutable; every change swaps in a new one.
	img     *metadata.Image
	brokers map[int32]*pb.BrokerState // complete broker records; values are never modified
	// unclean is unclean.leader.election.enable as the latest leader-change record set it.
	unclean        bool
	nextProducerID int64
	groups         map[string]map[topicPartition]offsetValue
	lastApplied    uint64
	deltas         deltaLog
	offsetsLog     offsetsLog
	// scram holds SCRAM credentials by user, then mechanism (fsm_scram.go).
	scram map[string]map[string]*pb.ScramCredential
	// txns holds transaction states by transactional id (fsm_txn.go); values are
	// replaced, never modified.
	txns map[string]*pb.TxnState
	// share holds share groups' partition states (fsm_share.go).
	share map[shareKey]*pb.SharePartitionState
	// consumerGroups holds consumer groups' (KIP-848) states by group id
	// (fsm_consumergroups.go); values are replaced, never modified.
	consumerGroups map[string]*pb.ConsumerGroupState
}

type topicPartition struct {
	topic     string
	partition int32
}

type offsetValue struct {
	offset      int64
	leaderEpoch int32
	metadata    string
	commitMs    int64
	expireMs    int64
	// logOffset is this commit's offset in the __consumer_offsets view.
	logOffset int64
}

// applyResult is what Apply returns to the proposer through the ApplyFuture.
type applyResult struct {
	err   error
	value any
}

// deltaLogCapacity is how many deltas each controller keeps for brokers that reconnect
// slightly behind; older brokers get a complete image.
const deltaLogCapacity = 4096

func newFSM(log *slog.Logger) *fsm {
	return &fsm{
		log:     log,
		img:     emptyImage(),
		brokers: map[int32]*pb.BrokerState{},
		groups:  map[string]map[topicPartition]offsetValue{},
		txns:    map[string]*pb.TxnState{},
		deltas:  newDeltaLog(deltaLogCapacity, 0),
		offsetsLog: offsetsLog{
			changed: make(chan struct{}),
		},
	}
}

var _ raft.FSM = (*fsm)(nil)

// Apply applies one committed record.
func (f *fsm) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	var rec pb.Record
	if err := proto.Unmarshal(l.Data, &rec); err != nil {
		f.log.Error("undecodable metadata record skipped", "index", l.Index, "err", err)
		return applyResult{err: fmt.Errorf("decode metadata record %d: %w", l.Index, err)}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastApplied = l.Index
	c := newChange(f, l.Index)
	res := f.dispatch(c, &rec)
	f.commit(c)
	return res
}

// dryRun runs a record's handler against the current state without changing it: the
// validate-only requests and the leader's checks use it.
func (f *fsm) dryRun(rec *pb.Record) applyResult {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.dispatch(newChange(f, f.img.Offset+1), rec)
}

func (f *fsm) commit(c *change) {
	for _, fn := range c.sideEffects {
		fn()
	}
	c.coordinatorChanges()
	d := c.delta()
	if d == nil {
		return
	}
	img, err := applyDelta(f.img, d)
	if err != nil {
		// A handler built an inconsistent delta: a bug, identical on every controller.
		f.log.Error("metadata delta does not apply; record ignored", "offset", c.offset, "err", err)
		return
	}
	for _, b := range d.Brokers {
		f.brokers[b.Id] = b
	}
	for _, id := range d.UnregisteredBrokers {
		delete(f.brokers, id)
	}
	f.img = img
	f.deltas.append(d)
}

func (f *fsm) dispatch(c *change, rec *pb.Record) applyResult {
	switch r := rec.Record.(type) {
	case *pb.Record_LeaderChange:
		return f.applyLeaderChange(c, r.LeaderChange)
	case *pb.Record_RegisterBroker:
		return f.applyRegisterBroker(c, r.RegisterBroker)
	case *pb.Record_FenceBrokers:
		return f.applyFenceBrokers(c, r.FenceBrokers)
	case *pb.Record_UnfenceBroker:
		return f.applyUnfenceBroker(c, r.UnfenceBroker)
	case *pb.Record_CreateTopics:
		return f.applyCreateTopics(c, r.CreateTopics)
	case *pb.Record_DeleteTopics:
		return f.applyDeleteTopics(c, r.DeleteTopics)
	case *pb.Record_CreatePartitions:
		return f.applyCreatePartitions(c, r.CreatePartitions)
	case *pb.Record_SetTopicConfigs:
		return f.applySetTopicConfigs(c, r.SetTopicConfigs)
	case *pb.Record_AlterPartition:
		return f.applyAlterPartition(c, r.AlterPartition)
	case *pb.Record_AllocateProducerIds:
		return f.applyAllocateProducerIDs(c, r.AllocateProducerIds)
	case *pb.Record_OffsetOps:
		return f.applyOffsetOps(c, r.OffsetOps)
	case *pb.Record_ControlledShutdown:
		return f.applyControlledShutdown(c, r.ControlledShutdown)
	case *pb.Record_ElectLeaders:
		return f.applyElectLeaders(c, r.ElectLeaders)
	case *pb.Record_CreateAcls:
		return f.applyCreateAcls(c, r.CreateAcls)
	case *pb.Record_DeleteAcls:
		return f.applyDeleteAcls(c, r.DeleteAcls)
	case *pb.Record_ClientQuotas:
		return f.applyClientQuotas(c, r.ClientQuotas)
	case *pb.Record_ScramCredentials:
		return f.applyScramCredentials(c, r.ScramCredentials)
	case *pb.Record_TxnState:
		return f.applyTxnState(c, r.TxnState)
	case *pb.Record_TxnOffsetCommit:
		return f.applyTxnOffsetCommit(c, r.TxnOffsetCommit)
	case *pb.Record_UnregisterBroker:
		return f.applyUnregisterBroker(c, r.UnregisterBroker)
	case *pb.Record_AlterPartitionReassignments:
		return f.applyAlterPartitionReassignments(c, r.AlterPartitionReassignments)
	case *pb.Record_ShareStateOps:
		return f.applyShareStateOps(c, r.ShareStateOps)
	case *pb.Record_ClientMetrics:
		return f.applyClientMetricsRecord(c, r.ClientMetrics)
	case *pb.Record_GroupConfigs:
		return f.applyGroupConfigsRecord(c, r.GroupConfigs)
	case *pb.Record_ClusterLinks:
		return f.applyClusterLinks(c, r.ClusterLinks)
	case *pb.Record_ConsumerGroup:
		return f.applyConsumerGroup(c, r.ConsumerGroup)
	case *pb.Record_SchemaRegistry:
		return f.applySchemaRegistry(c, r.SchemaRegistry)
	case *pb.Record_RemoteLog:
		return f.applyRemoteLog(c, r.RemoteLog)
	default:
		// A record from a newer version: every controller of this version skips it alike.
		f.log.Error("unknown metadata record skipped", "offset", c.offset)
		return applyResult{err: fmt.Errorf("unknown metadata record at offset %d", c.offset)}
	}
}

// image returns the current image.
func (f *fsm) image() *metadata.Image {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.img
}

// brokerState returns a broker's complete record, or nil.
func (f *fsm) brokerState(id int32) *pb.BrokerState {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.brokers[id]
}

func (f *fsm) uncleanDefault() bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.unclean
}

// sortedBrokers returns the complete broker records sorted by id; callers hold f.mu.
func (f *fsm) sortedBrokersLocked() []*pb.BrokerState {
	out := make([]*pb.BrokerState, 0, len(f.brokers))
	for _, b := range f.brokers {
		out = append(out, b)
	}
	sortBrokers(out)
	return out
}
