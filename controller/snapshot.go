package controller

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/encoding/protodelim"

	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/security/acl"

	pb "github.com/shalelog/shale/controller/proto"
)

// snapshotVersion is the format Persist writes; Restore refuses newer ones.
const snapshotVersion = 1

// fsmSnapshot is a point-in-time copy of the state. The image is immutable and shared;
// the offsets are copied because the FSM keeps changing them.
type fsmSnapshot struct {
	header  *pb.SnapshotHeader
	img     *metadata.Image
	brokers []*pb.BrokerState
	groups  map[string]map[topicPartition]offsetValue
	scram   []*pb.ScramCredential
	txns    []*pb.TxnState
	share   []*pb.SharePartitionState
	remote  []*pb.RemoteLogState
	// consumerGroups are KIP-848 consumer groups' states (fsm_consumergroups.go).
	consumerGroups []*pb.ConsumerGroupState
}

// Snapshot captures the state for Raft; Persist then writes it while Apply carries on.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	groups := make(map[string]map[topicPartition]offsetValue, len(f.groups))
	for name, g := range f.groups {
		groups[name] = maps.Clone(g)
	}
	s := &fsmSnapshot{
		header: &pb.SnapshotHeader{
			Version:               snapshotVersion,
			MetadataOffset:        f.img.Offset,
			ClusterId:             f.img.ClusterID,
			ControllerId:          f.img.ControllerID,
			UncleanLeaderElection: f.unclean,
			NextProducerId:        f.nextProducerID,
			AppliedIndex:          f.lastApplied,
			Coordinators:          coordinatorsToPB(f.img.Coordinators),
			OffsetsLogEnd:         f.offsetsLog.end,
		},
		img:     f.img,
		brokers: f.sortedBrokersLocked(),
		groups:  groups,
		scram:   f.scramSnapshotLocked(),
		txns:    f.txnSnapshotLocked(),
		share:   f.shareSnapshotLocked(),
		remote:  remoteLogsToPB(f.img.RemoteLogs),

		consumerGroups: f.consumerGroupSnapshotLocked(),
	}
	s.header.ItemCount = uint64(len(s.brokers) + len(s.img.Topics) + len(groups) + s.img.ACLs.Len() + len(s.img.ClientQuotas) + len(s.img.ClientMetrics) + len(s.img.GroupConfigs) + len(s.img.Links) + len(s.img.Mirrors) + len(s.scram) + len(s.txns) + len(s.share) + len(s.remote) + len(s.img.RemotePurges) + len(s.consumerGroups))
	if s.img.SchemaRegistry != nil {
		s.header.ItemCount++
	}
	return s, nil
}

// Persist writes a length-delimited stream: the header, then one item per broker, topic
// and group, so that no single message grows with the cluster.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := s.write(sink); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("persist metadata snapshot: %w", err)
	}
	return sink.Close()
}

func (s *fsmSnapshot) write(sink io.Writer) error {
	w := bufio.NewWriterSize(sink, 256<<10)
	if _, err := protodelim.MarshalTo(w, s.header); err != nil {
		return err
	}
	item := func(it *pb.SnapshotItem) error {
		_, err := protodelim.MarshalTo(w, it)
		return err
	}
	for _, b := range s.brokers {
		if err := item(&pb.SnapshotItem{Item: &pb.SnapshotItem_Broker{Broker: b}}); err != nil {
			return err
		}
	}
	for _, name := range slices.Sorted(maps.Keys(s.img.Topics)) {
		if err := item(&pb.SnapshotItem{Item: &pb.SnapshotItem_Topic{Topic: topicToPB(s.img.Topics[name])}}); err != nil {
			return err
		}
	}
	for _, name := range slices.Sorted(maps.Keys(s.groups)) {
		g := s.groups[name]
		gs := &pb.GroupOffsets{Group: name}
		for _, tp := range slices.SortedFunc(maps.Keys(g), compareTopicPartition) {
			v := g[tp]
			gs.Offsets = append(gs.Offsets, &pb.OffsetEntry{Topic: tp.topic, Partition: tp.partition, Offset: v.offset,
				LeaderEpoch: v.leaderEpoch, Metadata: v.metadata, CommitTimeMs: v.commitMs, ExpireTimeMs: v.expireMs,
				LogOffset: v.logOffset})
		}
		if err := item(&pb.SnapshotItem{Item: &pb.SnapshotItem_Group{Group: gs}}); err != nil {
			return err
		}
	}
	for _, b := range s.img.ACLs.All() {
		if err := item(&pb.SnapshotItem{Item: &pb.SnapshotItem_Acl{Acl: aclToPB(b)}}); err != nil {
			return err
		}
	}
	if r := s.img.SchemaRegistry; r != nil {
		if err := item(&pb.SnapshotItem{Item: &pb.SnapshotItem_SchemaRegistry{SchemaRegistry: registryToPB(r)}}); err != nil {
			return err
		}
	}
	for _, q := range clientQuotasToPB(s.img.ClientQuotas) {
		if err := item(&pb.SnapshotItem{Item: &pb.SnapshotItem_ClientQuota{ClientQuota: q}}); err != nil {
			return err
		}
	}
	for _, m := range clientMetricsToPB(s.img.ClientMetrics) {
		if err := item(&pb.SnapshotItem{Item: &pb.SnapshotItem_ClientMetrics{ClientMetrics: m}}); err != nil {
			return err
		}
	}
	for _, g := range groupConfigsToPB(s.img.GroupConfigs) {
		if err := item(&pb.SnapshotItem{Item: &pb.SnapshotItem_GroupConfigs{GroupConfigs: g}}); err != nil {
			return err
		}
	}
	for _, l := range linksToPB(s.img.Links) {
		if err := item(&pb.SnapshotItem{Item: &pb.SnapshotItem_ClusterLink{ClusterLink: l}}); err != nil {
			return err
		}
	}
	for _, m := range mirrorsToPB(s.img.Mirrors) {
		if err := item(&pb.SnapshotItem{Item: &pb.SnapshotItem_MirrorTopic{MirrorTopic: m}}); err != nil {
			return err
		}
	}
	for _, c := range s.scram {
		if err := item(&pb.SnapshotItem{Item: &pb.SnapshotItem_ScramCredential{ScramCredential: c}}); err != nil {
			return err
		}
	}
	for _, t := range s.txns {
		if err := item(&pb.SnapshotItem{Item: &pb.SnapshotItem_TxnState{TxnState: t}}); err != nil {
			return err
		}
	}
	for _, sp := range s.share {
		if err := item(&pb.SnapshotItem{Item: &pb.SnapshotItem_SharePartition{SharePartition: sp}}); err != nil {
			return err
		}
	}
	for _, r := range s.remote {
		if err := item(&pb.SnapshotItem{Item: &pb.SnapshotItem_RemoteLog{RemoteLog: r}}); err != nil {
			return err
		}
	}
	for _, p := range remotePurgesToPB(s.img.RemotePurges) {
		if err := item(&pb.SnapshotItem{Item: &pb.SnapshotItem_RemotePurge{RemotePurge: p}}); err != nil {
			return err
		}
	}
	for _, cg := range s.consumerGroups {
		if err := item(&pb.SnapshotItem{Item: &pb.SnapshotItem_ConsumerGroup{ConsumerGroup: cg}}); err != nil {
			return err
		}
	}
	return w.Flush()
}

func (s *fsmSnapshot) Release() {}

// maxSnapshotItemSize bounds one decoded item (a topic with maxNewPartitions partitions
// and long configs fits comfortably).
const maxSnapshotItemSize = 256 << 20

// Restore replaces the whole state with a snapshot's.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	st, err := readSnapshot(bufio.NewReaderSize(rc, 256<<10))
	if err != nil {
		return fmt.Errorf("restore metadata snapshot: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.img, f.brokers, f.groups, f.scram, f.txns, f.share = st.img, st.brokers, st.groups, st.scram, st.txns, st.share
	f.consumerGroups = st.consumerGroups
	f.unclean, f.nextProducerID, f.lastApplied = st.unclean, st.nextProducerID, st.appliedIndex
	f.deltas.reset(st.img.Offset)
	f.offsetsLog.restore(st.offsetsLogEnd)
	return nil
}

type restoredState struct {
	img            *metadata.Image
	brokers        map[int32]*pb.BrokerState
	groups         map[string]map[topicPartition]offsetValue
	scram          map[string]map[string]*pb.ScramCredential
	txns           map[string]*pb.TxnState
	share          map[shareKey]*pb.SharePartitionState
	consumerGroups map[string]*pb.ConsumerGroupState
	unclean        bool
	nextProducerID int64
	appliedIndex   uint64
	offsetsLogEnd  int64
}

func readSnapshot(r *bufio.Reader) (*restoredState, error) {
	opts := protodelim.UnmarshalOptions{MaxSize: maxSnapshotItemSize}
	var h pb.SnapshotHeader
	if err := opts.UnmarshalFrom(r, &h); err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	if h.Version == 0 || h.Version > snapshotVersion {
		return nil, fmt.Errorf("snapshot format version %d is not supported (this build reads up to %d)", h.Version, snapshotVersion)
	}
	st := &restoredState{
		img:            emptyImage(),
		brokers:        map[int32]*pb.BrokerState{},
		groups:         map[string]map[topicPartition]offsetValue{},
		scram:          map[string]map[string]*pb.ScramCredential{},
		txns:           map[string]*pb.TxnState{},
		share:          map[shareKey]*pb.SharePartitionState{},
		consumerGroups: map[string]*pb.ConsumerGroupState{},
		unclean:        h.UncleanLeaderElection,
		nextProducerID: h.NextProducerId,
		appliedIndex:   h.AppliedIndex,
	}
	st.img.Offset, st.img.ClusterID, st.img.ControllerID = h.MetadataOffset, h.ClusterId, h.ControllerId
	cs, err := applyCoordinators(nil, h.Coordinators)
	if err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	st.img.Coordinators = cs
	var acls []acl.Binding
	var remote []*pb.RemoteLogState
	var purges []*pb.RemotePurge
	for i := uint64(0); i < h.ItemCount; i++ {
		var it pb.SnapshotItem
		if err := opts.UnmarshalFrom(r, &it); err != nil {
			return nil, fmt.Errorf("item %d of %d: %w", i, h.ItemCount, err)
		}
		switch x := it.Item.(type) {
		case *pb.SnapshotItem_Broker:
			st.brokers[x.Broker.Id] = x.Broker
			st.img.Brokers[x.Broker.Id] = brokerFromPB(x.Broker)
		case *pb.SnapshotItem_Topic:
			t, err := topicFromPB(x.Topic)
			if err != nil {
				return nil, fmt.Errorf("item %d: %w", i, err)
			}
			st.img.Topics[t.Name] = t
		case *pb.SnapshotItem_Group:
			g := make(map[topicPartition]offsetValue, len(x.Group.Offsets))
			for _, e := range x.Group.Offsets {
				g[topicPartition{e.Topic, e.Partition}] = offsetValue{offset: e.Offset, leaderEpoch: e.LeaderEpoch,
					metadata: e.Metadata, commitMs: e.CommitTimeMs, expireMs: e.ExpireTimeMs, logOffset: e.LogOffset}
				st.offsetsLogEnd = max(st.offsetsLogEnd, e.LogOffset+1)
			}
			st.groups[x.Group.Group] = g
		case *pb.SnapshotItem_Acl:
			acls = append(acls, aclFromPB(x.Acl))
		case *pb.SnapshotItem_ClientQuota:
			st.img.ClientQuotas = applyClientQuotas(st.img.ClientQuotas, []*pb.ClientQuotaState{x.ClientQuota})
		case *pb.SnapshotItem_ClientMetrics:
			st.img.ClientMetrics = applyClientMetrics(st.img.ClientMetrics, []*pb.ClientMetricsState{x.ClientMetrics})
		case *pb.SnapshotItem_GroupConfigs:
			st.img.GroupConfigs = applyGroupConfigs(st.img.GroupConfigs, []*pb.GroupConfigState{x.GroupConfigs})
		case *pb.SnapshotItem_ClusterLink:
			st.img.Links, _ = applyLinks(st.img.Links, nil, []*pb.ClusterLinkState{x.ClusterLink}, nil, nil, nil)
		case *pb.SnapshotItem_MirrorTopic:
			_, st.img.Mirrors = applyLinks(nil, st.img.Mirrors, nil, nil, []*pb.MirrorTopicState{x.MirrorTopic}, nil)
		case *pb.SnapshotItem_SchemaRegistry:
			st.img.SchemaRegistry = applyRegistryDelta(nil, x.SchemaRegistry)
		case *pb.SnapshotItem_ScramCredential:
			restoreScram(st.scram, x.ScramCredential)
		case *pb.SnapshotItem_TxnState:
			st.txns[x.TxnState.TransactionalId] = x.TxnState
		case *pb.SnapshotItem_SharePartition:
			st.share[shareKeyOf(x.SharePartition)] = x.SharePartition
		case *pb.SnapshotItem_RemoteLog:
			remote = append(remote, x.RemoteLog)
		case *pb.SnapshotItem_RemotePurge:
			purges = append(purges, x.RemotePurge)
		case *pb.SnapshotItem_ConsumerGroup:
			st.consumerGroups[x.ConsumerGroup.Group] = x.ConsumerGroup
		default:
			return nil, fmt.Errorf("item %d: unknown kind", i)
		}
	}
	if len(acls) > 0 {
		st.img.ACLs = acl.NewSet(acls)
	}
	if len(remote) > 0 {
		st.img.RemoteLogs = applyRemoteLogs(nil, remote)
	}
	if len(purges) > 0 {
		st.img.RemotePurges = applyRemotePurges(nil, purges, nil)
	}
	st.offsetsLogEnd = max(st.offsetsLogEnd, h.OffsetsLogEnd)
	if _, err := r.ReadByte(); err != io.EOF {
		return nil, fmt.Errorf("trailing data after %d items", h.ItemCount)
	}
	return st, nil
}
