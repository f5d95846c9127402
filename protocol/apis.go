package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/metadata"
)

// api is one Kafka API as Shale serves it. Each is declared in the file of its handler
// (NN_name.go, NN its key), beside the version range it advertises and the response
// that refuses a request of it, as franz-go's kfake keeps one file per key.
type api struct {
	key kmsg.Key
	// min and max are the versions ApiVersions advertises; dispatch refuses others with
	// UNSUPPORTED_VERSION.
	min, max int16
	handle   func(s *Server, ctx context.Context, r *Request) Result
	// needs are the broker services without which the API is not advertised at all.
	needs need
	// maxV2, when set, is the highest version under transactions v2 (KIP-890 part 2):
	// advertised in place of max when Config.TransactionVersion is 2 or more and the
	// server has needsV2 besides needs. It is the one place the advertised ranges depend
	// on configuration: clients learn transactions v2 from the finalized
	// transaction.version (ApiVersions v3+), and a broker below level 2 keeps them on
	// the versions of transactions v1.
	maxV2   int16
	needsV2 need
	// errors builds Kafka's getErrorResponse for a request of this API: every topic,
	// partition, group or resource it names answered with code. Nil for APIs without
	// one: a request dispatch cannot hand to the handler then closes the connection.
	errors func(req kmsg.Request, code int16) kmsg.Response
}

// need is a set of broker services an API depends on.
type need uint8

const (
	needGroups        need = 1 << iota // Deps.Groups, the group coordinator
	needTxn                            // Deps.Txn, the transaction coordinator
	needShares                         // Deps.Shares, the share-partition manager
	needQuorumAdmin                    // a metadata store that forwards to the controller quorum
	needClientMetrics                  // a metadata store that keeps KIP-714 subscriptions
	needTelemetry                      // Config.Telemetry, where pushed client metrics go
	needScram                          // a metadata store that keeps SCRAM credentials
	needTxnVerifier                    // Deps.TxnVerifier, to add to a transaction on any broker
)

// apis are every API Shale serves, by key; a server advertises those whose needs it has.
var apis = []*api{
	&produceAPI,
	&fetchAPI,
	&listOffsetsAPI,
	&metadataAPI,
	&offsetCommitAPI,
	&offsetFetchAPI,
	&findCoordinatorAPI,
	&joinGroupAPI,
	&heartbeatAPI,
	&leaveGroupAPI,
	&syncGroupAPI,
	&describeGroupsAPI,
	&listGroupsAPI,
	&saslHandshakeAPI,
	&apiVersionsAPI,
	&createTopicsAPI,
	&deleteTopicsAPI,
	&deleteRecordsAPI,
	&initProducerIDAPI,
	&offsetForLeaderEpochAPI,
	&addPartitionsToTxnAPI,
	&addOffsetsToTxnAPI,
	&endTxnAPI,
	&writeTxnMarkersAPI,
	&txnOffsetCommitAPI,
	&describeACLsAPI,
	&createACLsAPI,
	&deleteACLsAPI,
	&describeConfigsAPI,
	&alterConfigsAPI,
	&describeLogDirsAPI,
	&saslAuthenticateAPI,
	&createPartitionsAPI,
	&deleteGroupsAPI,
	&electLeadersAPI,
	&incrementalAlterConfigsAPI,
	&alterPartitionReassignmentsAPI,
	&listPartitionReassignmentsAPI,
	&offsetDeleteAPI,
	&describeClientQuotasAPI,
	&alterClientQuotasAPI,
	&describeUserScramCredentialsAPI,
	&alterUserScramCredentialsAPI,
	&describeQuorumAPI,
	&describeClusterAPI,
	&describeProducersAPI,
	&unregisterBrokerAPI,
	&describeTransactionsAPI,
	&listTransactionsAPI,
	&consumerGroupHeartbeatAPI,
	&consumerGroupDescribeAPI,
	&getTelemetrySubscriptionsAPI,
	&pushTelemetryAPI,
	&listClientMetricsResourcesAPI,
	&shareGroupHeartbeatAPI,
	&shareGroupDescribeAPI,
	&shareFetchAPI,
	&shareAcknowledgeAPI,
	&addRaftVoterAPI,
	&removeRaftVoterAPI,
	&updateRaftVoterAPI,
	&describeShareGroupOffsetsAPI,
	&alterShareGroupOffsetsAPI,
	&deleteShareGroupOffsetsAPI,
}

// has reports which of the services APIs need this server has.
func (s *Server) has() need {
	var n need
	if s.deps.Groups != nil {
		n |= needGroups
	}
	if s.deps.Txn != nil {
		n |= needTxn
	}
	if s.deps.Shares != nil {
		n |= needShares
	}
	if _, ok := s.deps.Meta.(metadata.QuorumAdmin); ok {
		n |= needQuorumAdmin
	}
	if _, ok := s.deps.Meta.(metadata.ClientMetricsStore); ok {
		n |= needClientMetrics
	}
	if s.cfg.Telemetry != nil {
		n |= needTelemetry
	}
	if _, ok := s.deps.Meta.(metadata.ScramStore); ok {
		n |= needScram
	}
	if s.deps.TxnVerifier != nil {
		n |= needTxnVerifier
	}
	return n
}

// registerAPIs registers every API whose needs the server has.
func (s *Server) registerAPIs() {
	have := s.has()
	for _, a := range apis {
		if a.needs&^have != 0 {
			continue
		}
		s.Register(a.key, a.min, a.maxVersion(s.cfg.TransactionVersion, have), func(ctx context.Context, r *Request) Result { return a.handle(s, ctx, r) })
	}
}

// maxVersion is the highest version a advertises at transaction.version level with the
// services have.
func (a *api) maxVersion(level int16, have need) int16 {
	if a.maxV2 != 0 && level >= 2 && a.needsV2&^have == 0 {
		return a.maxV2
	}
	return a.max
}

// errorResponse is the response that refuses kreq with code, built by its API's own
// builder; nil when the API has none (or Shale does not serve it), and the connection is
// then closed.
func errorResponse(kreq kmsg.Request, code int16) kmsg.Response {
	for _, a := range apis {
		if a.key.Int16() == kreq.Key() {
			if a.errors == nil {
				return nil
			}
			return a.errors(kreq, code)
		}
	}
	return nil
}

// errorsOf adapts a builder of one request kind's error response to api.errors.
func errorsOf[Req kmsg.Request, Resp kmsg.Response](build func(Req, int16) Resp) func(kmsg.Request, int16) kmsg.Response {
	return func(req kmsg.Request, code int16) kmsg.Response { return build(req.(Req), code) }
}
