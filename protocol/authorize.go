package protocol

import (
	"net"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/security/acl"
)

// Authorization: every handler asks here, with the operation and resource Kafka's table of
// required permissions names for its API (KIP-11, KIP-290, the "Operations and
// Resources on Protocols" table). Decisions come from the ACLs of the image the broker
// has applied, so a CreateAcls acknowledged by the controller takes effect on a broker as
// soon as that broker's image has it (the ACL handlers wait for that).

// Kafka's resource types and operations, shortened for the call sites.
const (
	resTopic   = kmsg.ACLResourceTypeTopic
	resGroup   = kmsg.ACLResourceTypeGroup
	resCluster = kmsg.ACLResourceTypeCluster
	resTxnID   = kmsg.ACLResourceTypeTransactionalId

	opRead            = kmsg.ACLOperationRead
	opWrite           = kmsg.ACLOperationWrite
	opCreate          = kmsg.ACLOperationCreate
	opDelete          = kmsg.ACLOperationDelete
	opAlter           = kmsg.ACLOperationAlter
	opDescribe        = kmsg.ACLOperationDescribe
	opClusterAction   = kmsg.ACLOperationClusterAction
	opDescribeConfigs = kmsg.ACLOperationDescribeConfigs
	opAlterConfigs    = kmsg.ACLOperationAlterConfigs
	opIdempotentWrite = kmsg.ACLOperationIdempotentWrite
)

// clusterResource is the name of the one CLUSTER resource.
const clusterResource = acl.ClusterName

// The errors handlers answer a denial with.
var (
	errTopicDenied   = kerr.TopicAuthorizationFailed
	errGroupDenied   = kerr.GroupAuthorizationFailed
	errClusterDenied = kerr.ClusterAuthorizationFailed
)

// principalOf is who r is decided for: its connection's principal.
func (s *Server) principalOf(r *Request) string {
	if r.Principal == "" {
		return AnonymousPrincipal
	}
	return r.Principal
}

// hostOf is the client host ACLs match against: the IP address, as in Kafka.
func hostOf(a net.Addr) string {
	switch a := a.(type) {
	case *net.TCPAddr:
		return a.IP.String()
	case nil:
		return ""
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// authorizing reports whether ACLs are checked at all.
func (s *Server) authorizing() bool { return s.cfg.Authorizer.Enabled() }

// allowed decides whether r's principal may perform op on the resource, and writes an
// audit record of a denial.
func (s *Server) allowed(r *Request, op kmsg.ACLOperation, typ kmsg.ACLResourceType, name string) bool {
	if !s.authorizing() {
		return true
	}
	p := s.principalOf(r)
	if s.cfg.Authorizer.Authorize(s.image().ACLs, p, hostOf(r.Remote), op, typ, name) {
		return true
	}
	s.auditDenial(r, p, op, typ, name)
	return false
}

// visible is allowed without the audit record, for resources a request did not name
// (Metadata for all topics, ListGroups): Kafka filters those silently.
func (s *Server) visible(r *Request, op kmsg.ACLOperation, typ kmsg.ACLResourceType, name string) bool {
	if !s.authorizing() {
		return true
	}
	return s.cfg.Authorizer.Authorize(s.image().ACLs, s.principalOf(r), hostOf(r.Remote), op, typ, name)
}

// allowedCluster is allowed on the cluster resource.
func (s *Server) allowedCluster(r *Request, op kmsg.ACLOperation) bool {
	return s.allowed(r, op, resCluster, acl.ClusterName)
}

// allowedAnyTopic reports whether r's principal may perform op on some topic, as Kafka's
// authorizeByResourceType does for an idempotent InitProducerId (KIP-679: WRITE on any
// topic stands for IDEMPOTENT_WRITE on the cluster).
func (s *Server) allowedAnyTopic(r *Request, op kmsg.ACLOperation) bool {
	if !s.authorizing() {
		return true
	}
	return s.cfg.Authorizer.AuthorizeAny(s.image().ACLs, s.principalOf(r), hostOf(r.Remote), op, resTopic)
}

// auditDenial writes the structured record of one denied operation.
func (s *Server) auditDenial(r *Request, principal string, op kmsg.ACLOperation, typ kmsg.ACLResourceType, name string) {
	s.lg.Info("authorization denied", "audit", "authz", "principal", principal, "client", addrString(r), "client_id", r.ClientID,
		"api", describeKey(r.Key), "api_version", r.Version, "operation", op.String(), "resource_type", typ.String(), "resource", name)
}

// topicCheck returns a memoized check of op on topics for one request, so that a request
// answered more than once (a long-polling fetch) is decided, and audited, once per topic.
// Calls must not be concurrent.
func (s *Server) topicCheck(r *Request, op kmsg.ACLOperation) func(topic string) bool {
	if !s.authorizing() {
		return func(string) bool { return true }
	}
	seen := map[string]bool{}
	return func(topic string) bool {
		ok, done := seen[topic]
		if !done {
			ok = s.allowed(r, op, resTopic, topic)
			seen[topic] = ok
		}
		return ok
	}
}

// mayCreateTopic is Kafka's check for a topic to be created: CREATE on the cluster, or
// else on the topic (only the latter's denial is audited).
func (s *Server) mayCreateTopic(r *Request, topic string) bool {
	return s.visible(r, opCreate, resCluster, clusterResource) || s.allowed(r, opCreate, resTopic, topic)
}

// authorizeMetadata applies DESCRIBE on topics to a finished Metadata response: a
// request for all topics silently leaves out those the principal may not describe; a
// topic asked for by name or id is answered with TOPIC_AUTHORIZATION_FAILED and nothing
// else, and so is one that would have been auto-created without CREATE permission.
// Requested authorized-operations bitfields are computed from the ACLs.
func (s *Server) authorizeMetadata(r *Request, resp *kmsg.MetadataResponse, all bool, createDenied map[string]bool) {
	if !s.authorizing() {
		return
	}
	req := r.Kreq.(*kmsg.MetadataRequest)
	if req.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = s.authorizedOps(r, resCluster, clusterResource)
	}
	mayDescribe := s.topicCheck(r, opDescribe)
	kept := resp.Topics[:0]
	for _, mt := range resp.Topics {
		if mt.Topic == nil { // an unknown topic id: nothing to reveal
			kept = append(kept, mt)
			continue
		}
		name := *mt.Topic
		switch {
		case all:
			if !s.visible(r, opDescribe, resTopic, name) {
				continue
			}
		case !mayDescribe(name) || createDenied[name]:
			denied := kmsg.NewMetadataResponseTopic()
			denied.ErrorCode = errTopicDenied.Code
			denied.AuthorizedOperations = authorizedOpsUnset
			if !byID(req, mt.TopicID) {
				denied.Topic = mt.Topic
			}
			kept = append(kept, denied)
			continue
		}
		if req.IncludeTopicAuthorizedOperations {
			mt.AuthorizedOperations = s.authorizedOps(r, resTopic, name)
		}
		kept = append(kept, mt)
	}
	resp.Topics = kept
}

// byID reports whether a Metadata request named the topic only by its id.
func byID(req *kmsg.MetadataRequest, id [16]byte) bool {
	for _, t := range req.Topics {
		if t.Topic == nil && t.TopicID == id && id != [16]byte{} {
			return true
		}
	}
	return false
}

// operationsOf are the operations each resource type's authorized-operations bitfield
// reports (KIP-430).
var operationsOf = map[kmsg.ACLResourceType][]kmsg.ACLOperation{
	resTopic:   {opRead, opWrite, opCreate, opDelete, opAlter, opDescribe, opDescribeConfigs, opAlterConfigs},
	resGroup:   {opRead, opDelete, opDescribe},
	resCluster: {opCreate, opAlter, opDescribe, opClusterAction, opDescribeConfigs, opAlterConfigs, opIdempotentWrite},
}

// authorizedOps is the KIP-430 bitfield of what r's principal may do to a resource.
func (s *Server) authorizedOps(r *Request, typ kmsg.ACLResourceType, name string) int32 {
	var bits int32
	for _, op := range operationsOf[typ] {
		if s.visible(r, op, typ, name) {
			bits |= 1 << op
		}
	}
	return bits
}

// authorizeFetchedOffsets applies DESCRIBE on topics to a group's fetched offsets: when
// the request named no topics those the principal may not describe are left out,
// otherwise their partitions carry TOPIC_AUTHORIZATION_FAILED.
func (s *Server) authorizeFetchedOffsets(r *Request, fts []fetchedTopic, allTopics bool) []fetchedTopic {
	if !s.authorizing() {
		return fts
	}
	out := fts[:0]
	for _, ft := range fts {
		switch {
		case allTopics:
			if !s.visible(r, opDescribe, resTopic, ft.Topic) {
				continue
			}
		case !s.allowed(r, opDescribe, resTopic, ft.Topic):
			for i := range ft.Partitions {
				ft.Partitions[i] = fetchedPartition{Partition: ft.Partitions[i].Partition, Offset: -1, LeaderEpoch: -1,
					ErrorCode: errTopicDenied.Code}
			}
		}
		out = append(out, ft)
	}
	return out
}

// configAccess checks op (DESCRIBE_CONFIGS or ALTER_CONFIGS) on a config resource: a
// topic's configs need it on the topic, a broker's on the cluster. Resource types the
// config handlers do not serve are left to them to refuse.
func (s *Server) configAccess(r *Request, typ kmsg.ConfigResourceType, name string, op kmsg.ACLOperation) error {
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		if !s.allowed(r, op, resTopic, name) {
			return errTopicDenied
		}
	case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger, kmsg.ConfigResourceTypeClientMetrics:
		if !s.allowedCluster(r, op) {
			return errClusterDenied
		}
	case kmsg.ConfigResourceTypeGroupConfig:
		if !s.allowed(r, op, resGroup, name) {
			return errGroupDenied
		}
	}
	return nil
}
