package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleApiVersions answers with every registered API. A version newer than Shale serves
// gets a v0-format response with UNSUPPORTED_VERSION that lists ApiVersions' own range
// (KIP-511), as Kafka's does, so that the client retries at a version both sides know:
// only that answer carries the features (v3+), which clients such as franz-go otherwise
// never see when they are given the whole list in the v0 format.
func (s *Server) handleApiVersions(_ context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.ApiVersionsRequest)
	h := s.handlers[kmsg.ApiVersions.Int16()]
	resp := kmsg.NewPtrApiVersionsResponse()
	// The client software fields are kept for KIP-714's matching even from a request
	// answered with UNSUPPORTED_VERSION: franz-go asks at v5 once and uses the key list
	// it gets back without asking again.
	if r.Version >= 3 && r.conn != nil && req.ClientSoftwareName != "" && validClientSoftware(req.ClientSoftwareName, req.ClientSoftwareVersion) {
		r.conn.software.Store(&clientSoftware{req.ClientSoftwareName, req.ClientSoftwareVersion})
	}
	if r.Version > h.max || r.Version < h.min {
		resp.Version = 0
		resp.ErrorCode = codeUnsupportedVersion
		resp.ApiKeys = []kmsg.ApiVersionsResponseApiKey{{ApiKey: kmsg.ApiVersions.Int16(), MinVersion: h.min, MaxVersion: h.max}}
		return Result{Resp: resp}
	}
	resp.Version = r.Version
	if r.Version >= 3 && !validClientSoftware(req.ClientSoftwareName, req.ClientSoftwareVersion) {
		resp.ErrorCode = 42 // INVALID_REQUEST, as Kafka answers a malformed client software name
		resp.ApiKeys = s.supportedKeys()
		return Result{Resp: resp}
	}
	resp.ApiKeys = s.supportedKeys()
	s.features(resp)
	return Result{Resp: resp}
}

// transactionVersionFeature is the feature KIP-890 part 2 is finalized under.
const transactionVersionFeature = "transaction.version"

// features fills the v3+ feature fields: Shale supports transaction.version 0-2 and
// finalizes the configured level. A client learns transactions v2 from the finalized
// level, never from the API versions alone (Kafka's design), so a level below 2 keeps
// clients on version 1 even where they could send the newer requests.
func (s *Server) features(resp *kmsg.ApiVersionsResponse) {
	if resp.Version < 3 {
		return
	}
	// Java clients before Kafka 3.9 fail on a supported feature whose minimum is 0:
	// Kafka lists those only from v4 (KAFKA-17011, KAFKA-17492).
	if resp.Version >= 4 {
		sf := kmsg.NewApiVersionsResponseSupportedFeature()
		sf.Name, sf.MinVersion, sf.MaxVersion = transactionVersionFeature, 0, 2
		resp.SupportedFeatures = append(resp.SupportedFeatures, sf)
	}
	// Kafka's epoch is the metadata offset the features were read at; clients keep the
	// features of the highest epoch they saw. -1 would mean "none finalized".
	resp.FinalizedFeaturesEpoch = 0
	if im := s.image(); im != nil {
		resp.FinalizedFeaturesEpoch = int64(im.Offset)
	}
	if lvl := s.cfg.TransactionVersion; lvl > 0 {
		// Kafka lists a finalized feature only above level 0.
		ff := kmsg.NewApiVersionsResponseFinalizedFeature()
		ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = transactionVersionFeature, lvl, lvl
		resp.FinalizedFeatures = append(resp.FinalizedFeatures, ff)
	}
}

// validClientSoftware applies KIP-511's pattern to the client's self-description:
// [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?. Empty strings are allowed, as clients that
// predate the fields send them.
func validClientSoftware(name, version string) bool {
	for _, s := range []string{name, version} {
		if s == "" {
			continue
		}
		for i := 0; i < len(s); i++ {
			c := s[i]
			alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
			if !alnum && ((c != '-' && c != '.') || i == 0 || i == len(s)-1) {
				return false
			}
		}
	}
	return true
}

func (s *Server) registerBuiltins() {
	// Produce v0-v2 carry legacy message sets, up-converted on append; librdkafka < 2.10
	// compresses only when v0 is in range.
	s.Register(kmsg.Produce, 0, s.produceMaxVersion(), s.handleProduce)
	s.Register(kmsg.Fetch, 4, 15, s.handleFetch)
	s.Register(kmsg.ListOffsets, 1, 7, s.handleListOffsets)
	s.Register(kmsg.Metadata, 0, 12, s.handleMetadata)
	s.Register(kmsg.ApiVersions, 0, 4, s.handleApiVersions)
	s.Register(kmsg.CreateTopics, 0, 5, s.handleCreateTopics)
	s.Register(kmsg.DeleteTopics, 0, 4, s.handleDeleteTopics)
	s.Register(kmsg.DeleteRecords, 0, 2, s.handleDeleteRecords)
	s.Register(kmsg.InitProducerID, 0, 4, s.handleInitProducerID)
	s.Register(kmsg.OffsetForLeaderEpoch, 0, 4, s.handleOffsetForLeaderEpoch)
	s.Register(kmsg.WriteTxnMarkers, 0, 1, s.handleWriteTxnMarkers)
	s.Register(kmsg.DescribeProducers, 0, 0, s.handleDescribeProducers)
	s.Register(kmsg.DescribeConfigs, 0, 4, s.handleDescribeConfigs)
	s.Register(kmsg.AlterConfigs, 0, 1, s.handleAlterConfigs)
	s.Register(kmsg.CreatePartitions, 0, 3, s.handleCreatePartitions)
	s.Register(kmsg.IncrementalAlterConfigs, 0, 1, s.handleIncrementalAlterConfigs)
	s.Register(kmsg.DescribeCluster, 0, 1, s.handleDescribeCluster)
	s.Register(kmsg.ElectLeaders, 0, 2, s.handleElectLeaders)
	s.Register(kmsg.DescribeLogDirs, 0, 4, s.handleDescribeLogDirs)
	s.Register(kmsg.AlterPartitionAssignments, 0, 1, s.handleAlterPartitionReassignments)
	s.Register(kmsg.ListPartitionReassignments, 0, 0, s.handleListPartitionReassignments)
	s.registerACLs() // 29_acls.go
	s.Register(kmsg.DescribeClientQuotas, 0, 1, s.handleDescribeClientQuotas)
	s.Register(kmsg.AlterClientQuotas, 0, 1, s.handleAlterClientQuotas)
	s.registerAuth()
	s.registerQuorum() // 55_describe_quorum.go
	if s.deps.Groups != nil {
		// Capped below KIP-848 (OffsetCommit/OffsetFetch v9, ConsumerGroupHeartbeat) and
		// topic ids (v10); FindCoordinator v4 and OffsetFetch v8 are the batched forms.
		s.Register(kmsg.OffsetCommit, 2, 8, s.handleOffsetCommit)
		s.Register(kmsg.OffsetFetch, 1, 8, s.handleOffsetFetch)
		s.Register(kmsg.FindCoordinator, 0, 4, s.handleFindCoordinator)
		s.Register(kmsg.JoinGroup, 0, 9, s.handleJoinGroup)
		s.Register(kmsg.Heartbeat, 0, 4, s.handleHeartbeat)
		s.Register(kmsg.LeaveGroup, 0, 5, s.handleLeaveGroup)
		s.Register(kmsg.SyncGroup, 0, 5, s.handleSyncGroup)
		s.Register(kmsg.DescribeGroups, 0, 5, s.handleDescribeGroups)
		s.Register(kmsg.ListGroups, 0, 5, s.handleListGroups)
		s.Register(kmsg.DeleteGroups, 0, 2, s.handleDeleteGroups)
		s.Register(kmsg.OffsetDelete, 0, 0, s.handleOffsetDelete)
		s.registerShareGroups() // 76_share_group_heartbeat.go
	}
	if s.deps.Shares != nil {
		// KIP-932; v1 adds MaxRecords and BatchSize (KIP-1206), v2 lock renewal (KIP-1222).
		s.Register(kmsg.ShareFetch, 0, 2, s.handleShareFetch)
		s.Register(kmsg.ShareAcknowledge, 0, 2, s.handleShareAcknowledge)
	}
	s.registerTelemetry() // 71_get_telemetry_subscriptions.go
	if s.deps.Txn != nil && s.deps.Groups != nil {
		s.registerTxn() // txn.go
	}
}
