package restproxy

import (
	"fmt"
	"net/http"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/metadata"
)

// A partition's remote log (tiered storage, KIP-405) is Shale's own resource: no Kafka API
// carries the remote log's size (Kafka has it only as the RemoteLogSizeBytes metric of
// KIP-963), and Confluent's v3 API has no such resource. It is read-only, answered from
// the broker's metadata image, where the controller keeps every partition's committed
// remote segments: GET .../topics/{t}/partitions/-/remote-log lists every partition's,
// GET .../topics/{t}/partitions/{p}/remote-log one partition's, in the shape of
// Confluent's partition-scoped resources (as .../partitions/-/reassignment).

// remoteLogRoutes are the resource's routes, by pattern.
func (s *Server) remoteLogRoutes() map[string]func(http.ResponseWriter, *http.Request) error {
	return map[string]func(http.ResponseWriter, *http.Request) error{
		"GET /v3/clusters/{cluster}/topics/{topic}/partitions/-/remote-log":           s.listRemoteLogs,
		"GET /v3/clusters/{cluster}/topics/{topic}/partitions/{partition}/remote-log": s.getRemoteLog,
	}
}

type remoteLogData struct {
	Kind        string       `json:"kind"`
	Metadata    resourceMeta `json:"metadata"`
	ClusterID   string       `json:"cluster_id"`
	TopicName   string       `json:"topic_name"`
	PartitionID int32        `json:"partition_id"`
	// StartOffset is the first offset the remote log serves; HighestOffset is the last
	// offset of its last segment (ListOffsets -5). Both are -1 for an empty remote log.
	StartOffset   int64 `json:"start_offset"`
	HighestOffset int64 `json:"highest_offset"`
	// SizeBytes and SegmentsCount are the committed segments still part of the log
	// (metadata.RemoteLog.Size).
	SizeBytes     int64 `json:"size_bytes"`
	SegmentsCount int   `json:"segments_count"`
}

func describeRemoteLog(r *http.Request, im *metadata.Image, t *metadata.Topic, p int32) remoteLogData {
	u := fmt.Sprintf("%s/partitions/%d/remote-log", topicURL(r, im.ClusterID, t.Name), p)
	d := remoteLogData{
		Kind:        "ShaleRemoteLog",
		Metadata:    resourceMeta{Self: u, ResourceName: crn("kafka="+im.ClusterID, "topic="+t.Name, fmt.Sprintf("partition=%d", p), "remote-log")},
		ClusterID:   im.ClusterID,
		TopicName:   t.Name,
		PartitionID: p,
		StartOffset: -1, HighestOffset: -1,
	}
	// A remote log under another topic id is a deleted namesake's, not this topic's.
	if rl := im.RemoteLog(t.Name, p); rl != nil && rl.TopicID == t.ID {
		d.StartOffset, d.HighestOffset = rl.StartOffset, rl.HighestOffset
		d.SizeBytes, d.SegmentsCount = rl.Size()
	}
	return d
}

func (s *Server) listRemoteLogs(w http.ResponseWriter, r *http.Request) error {
	im, t, err := s.topic(r, kmsg.ACLOperationDescribe)
	if err != nil {
		return err
	}
	out := make([]remoteLogData, 0, len(t.Partitions))
	for i := range t.Partitions {
		out = append(out, describeRemoteLog(r, im, t, int32(i)))
	}
	return reply(w, 200, list{Kind: "ShaleRemoteLogList", Metadata: listMeta{Self: topicURL(r, im.ClusterID, t.Name) + "/partitions/-/remote-log"}, Data: out})
}

func (s *Server) getRemoteLog(w http.ResponseWriter, r *http.Request) error {
	im, t, p, err := s.partition(r, kmsg.ACLOperationDescribe)
	if err != nil {
		return err
	}
	return reply(w, 200, describeRemoteLog(r, im, t, p.Index))
}
