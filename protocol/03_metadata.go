package protocol

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/metadata"
)

// authorizedOpsUnset is Kafka's value for authorized operations nobody asked for.
const authorizedOpsUnset = -2147483648

// topicAllOps is the bitfield of every topic operation (READ 3, WRITE 4, CREATE 5,
// DELETE 6, ALTER 7, DESCRIBE 8, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11): without an
// authorizer a client may do them all (with one, authorizedOps computes the bitfield).
const topicAllOps = 1<<3 | 1<<4 | 1<<5 | 1<<6 | 1<<7 | 1<<8 | 1<<10 | 1<<11

// clusterAllOps: CREATE 5, ALTER 7, DESCRIBE 8, CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10,
// ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12.
const clusterAllOps = 1<<5 | 1<<7 | 1<<8 | 1<<9 | 1<<10 | 1<<11 | 1<<12

func (s *Server) handleMetadata(ctx context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	// One image answers the whole request, so that brokers, leaders and replicas agree.
	im := s.image()

	// v0: an empty list means every topic; v1+: null means every topic, empty none.
	all := req.Topics == nil || (r.Version == 0 && len(req.Topics) == 0)
	// Runs last: hides or refuses what the principal may not describe (authorize.go).
	var createDenied map[string]bool
	defer func() { s.authorizeMetadata(r, resp, all, createDenied) }()
	defer s.fillOffsetsTopic(im, resp, req, all) // __consumer_offsets: consumer_offsets.go
	autoCreate := s.cfg.AutoCreateTopics && (r.Version < 4 || req.AllowAutoTopicCreation)

	// Topics created on this request's behalf appear in a later image; this answer says
	// LEADER_NOT_AVAILABLE for them, or why the last attempt failed.
	var createErrs map[string]error
	if !all && autoCreate {
		var missing []string
		for _, t := range req.Topics {
			if t.Topic != nil && im.Topic(*t.Topic) == nil && *t.Topic != metadata.OffsetsTopic {
				if s.authorizing() && metadata.ValidateTopicName(*t.Topic) == nil && !s.mayCreateTopic(r, *t.Topic) {
					if createDenied == nil {
						createDenied = map[string]bool{}
					}
					createDenied[*t.Topic] = true
					continue
				}
				missing = append(missing, *t.Topic)
			}
		}
		if len(missing) > 0 {
			createErrs = s.deps.Replicas.AutoCreateTopics(missing, s.cfg.DefaultPartitions, s.cfg.DefaultReplicationFactor)
		}
	}

	fillBrokers(resp, im, r.Listener)
	clusterID := im.ClusterID
	resp.ClusterID = &clusterID
	resp.ControllerID = s.cfg.NodeID // any broker forwards controller requests
	if req.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = clusterAllOps
	}

	if all {
		names := make([]string, 0, len(im.Topics))
		for name := range im.Topics {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			resp.Topics = append(resp.Topics, metadataTopic(im, im.Topics[name], req))
		}
		return Result{Resp: resp}
	}
	for _, rt := range req.Topics {
		var t *metadata.Topic
		switch {
		case rt.Topic != nil:
			t = im.Topic(*rt.Topic)
		case rt.TopicID != [16]byte{}:
			t = topicByID(im, rt.TopicID)
		}
		if t == nil {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic, mt.TopicID = rt.Topic, rt.TopicID
			mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			if rt.Topic == nil {
				mt.ErrorCode = kerr.UnknownTopicID.Code
			} else if err := metadata.ValidateTopicName(*rt.Topic); err != nil {
				mt.ErrorCode = kerr.InvalidTopicException.Code
			} else if err := createErrs[*rt.Topic]; err != nil {
				mt.ErrorCode = errorCode(err)
				if mt.ErrorCode == codeUnknownServerError {
					// The controller could not be reached: worth retrying.
					mt.ErrorCode = kerr.LeaderNotAvailable.Code
				}
			} else if autoCreate {
				// Being created: the client asks again.
				mt.ErrorCode = kerr.LeaderNotAvailable.Code
			}
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		resp.Topics = append(resp.Topics, metadataTopic(im, t, req))
	}
	return Result{Resp: resp}
}

func fillBrokers(resp *kmsg.MetadataResponse, im *metadata.Image, listener string) {
	for _, b := range liveBrokers(im, listener) {
		mb := kmsg.NewMetadataResponseBroker()
		mb.NodeID, mb.Host, mb.Port, mb.Rack = b.ID, b.Host, b.Port, rackOf(b)
		resp.Brokers = append(resp.Brokers, mb)
	}
}

// liveBrokers are the unfenced brokers, by id: what clients may connect to, at their
// addresses on the listener the client came in on (those without it are left out).
func liveBrokers(im *metadata.Image, listener string) []metadata.Broker {
	out := make([]metadata.Broker, 0, len(im.Brokers))
	for _, b := range im.Brokers {
		if b, ok := b.On(listener); ok && !b.Fenced {
			out = append(out, b)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// rackOf is a broker's rack as the protocol's nullable string.
func rackOf(b metadata.Broker) *string {
	if b.Rack == "" {
		return nil
	}
	rack := b.Rack
	return &rack
}

func topicByID(im *metadata.Image, id [16]byte) *metadata.Topic {
	for _, t := range im.Topics {
		if t.ID == id {
			return t
		}
	}
	return nil
}

func metadataTopic(im *metadata.Image, t *metadata.Topic, req *kmsg.MetadataRequest) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	mt.Topic, mt.TopicID = &name, t.ID
	mt.AuthorizedOperations = authorizedOpsUnset
	if req.IncludeTopicAuthorizedOperations {
		mt.AuthorizedOperations = topicAllOps
	}
	for _, p := range t.Partitions {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = p.Index
		mp.Leader = p.Leader
		// The real epoch even without a leader, so clients' KIP-320 checks keep working.
		mp.LeaderEpoch = p.LeaderEpoch
		mp.Replicas = append([]int32(nil), p.Replicas...)
		mp.ISR = append([]int32(nil), p.ISR...)
		for _, id := range p.Replicas {
			if b, ok := im.Brokers[id]; !ok || b.Fenced {
				mp.OfflineReplicas = append(mp.OfflineReplicas, id)
			}
		}
		if p.Leader < 0 {
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
		}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

// metadataAPI: v0 for kafka-python, which pipelines it with ApiVersions v0. v13 (a
// top-level error code, KIP-1102) is not served.
var metadataAPI = api{key: kmsg.Metadata, min: 0, max: 12, handle: (*Server).handleMetadata, errors: errorsOf(metadataError)}

func metadataError(req *kmsg.MetadataRequest, code int16) *kmsg.MetadataResponse {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewMetadataResponseTopic()
		rt.Topic, rt.TopicID, rt.ErrorCode = t.Topic, t.TopicID, code
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
