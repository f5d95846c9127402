package restproxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/client"
	"github.com/shalelog/shale/metadata"
)

// Cluster links and mirror topics (issue 29) with the paths and bodies of Confluent's
// Cluster Linking REST API v3 (/v3/clusters/{cluster}/links...), which `shale link`
// uses. Writes go to the controller through Options.Links; creating a mirror and
// promoting one also read the source cluster, as a client with the link's configs.

type linkConfig struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

type createLinkRequest struct {
	Configs      []linkConfig `json:"configs"`
	ValidateOnly bool         `json:"validate_only,omitempty"`
}

type linkData struct {
	Kind     string       `json:"kind"`
	LinkName string       `json:"link_name"`
	LinkID   string       `json:"link_id"`
	Configs  []linkConfig `json:"configs"`
	Topics   []string     `json:"topic_names"`
}

type createMirrorRequest struct {
	SourceTopicName   string `json:"source_topic_name"`
	MirrorTopicName   string `json:"mirror_topic_name,omitempty"`
	ReplicationFactor int16  `json:"replication_factor,omitempty"`
	// Reverse makes the existing mirror_topic_name (not an active mirror) a mirror of
	// the source topic: failback, from where the two logs diverged.
	Reverse bool `json:"reverse,omitempty"`
}

type mirrorData struct {
	Kind            string        `json:"kind"`
	LinkName        string        `json:"link_name"`
	MirrorTopicName string        `json:"mirror_topic_name"`
	SourceTopicName string        `json:"source_topic_name"`
	MirrorStatus    string        `json:"mirror_status"`
	StateTimeMs     int64         `json:"state_time_ms"`
	Lags            []mirrorLag   `json:"mirror_lags,omitempty"`
	Error           *mirrorErrorT `json:"error,omitempty"`
	LagKnown        bool          `json:"lag_known"`
}

type mirrorErrorT struct {
	Code    int    `json:"error_code"`
	Message string `json:"message"`
}

// mirrorLag is what a mirror partition lacks of its source when it is promoted: what a
// failover loses.
type mirrorLag struct {
	Partition int32 `json:"partition"`
	// LastSourceFetchedOffset is the destination's log end; SourceEnd the source's high
	// watermark (-1 when the source was not reached).
	LastSourceFetchedOffset int64 `json:"last_source_fetched_offset"`
	SourceEnd               int64 `json:"source_end_offset"`
	Lag                     int64 `json:"lag"`       // records
	LagBytes                int64 `json:"lag_bytes"` // bytes of those records' batches
	// LagMs is how long ago the oldest record the destination lacks was written on the
	// source (its batch's timestamp), 0 when it lacks none.
	LagMs int64 `json:"lag_ms"`
}

type alterMirrorsRequest struct {
	MirrorTopicNames []string `json:"mirror_topic_names"`
}

func (s *Server) links() (metadata.LinkStore, error) {
	if s.linkStore == nil {
		return nil, errorf(codeNotFound, "cluster links are not available on this node")
	}
	return s.linkStore, nil
}

func linkToData(l *metadata.ClusterLink, im *metadata.Image) linkData {
	d := linkData{Kind: "KafkaLinkData", LinkName: l.Name, LinkID: fmt.Sprintf("%x", l.ID[:])}
	for _, k := range slices.Sorted(maps.Keys(l.Configs)) {
		v := l.Configs[k]
		if metadata.LinkSecretKeys[k] {
			v = "[hidden]"
		}
		d.Configs = append(d.Configs, linkConfig{Name: k, Value: v})
	}
	for _, name := range slices.Sorted(maps.Keys(im.Mirrors)) {
		if im.Mirrors[name].Link == l.Name {
			d.Topics = append(d.Topics, name)
		}
	}
	return d
}

func (s *Server) createLink(w http.ResponseWriter, r *http.Request) error {
	im, err := s.cluster(r)
	if err != nil {
		return err
	}
	ls, err := s.links()
	if err != nil {
		return err
	}
	if err := s.authorize(r, im, kmsg.ACLOperationAlter, kmsg.ACLResourceTypeCluster, "kafka-cluster"); err != nil {
		return err
	}
	name := r.URL.Query().Get("link_name")
	var req createLinkRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
		return errorf(codeBadRequest, "Bad Request: %v", err)
	}
	cfg := map[string]string{}
	for _, c := range req.Configs {
		cfg[c.Name] = c.Value
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.timeout)
	defer cancel()
	if err := ls.CreateClusterLink(ctx, name, cfg, req.ValidateOnly); err != nil {
		return toAPIError(err)
	}
	return reply(w, http.StatusNoContent, nil)
}

func (s *Server) listLinks(w http.ResponseWriter, r *http.Request) error {
	im, err := s.cluster(r)
	if err != nil {
		return err
	}
	if err := s.authorize(r, im, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeCluster, "kafka-cluster"); err != nil {
		return err
	}
	data := []linkData{}
	for _, name := range slices.Sorted(maps.Keys(im.Links)) {
		data = append(data, linkToData(im.Links[name], im))
	}
	return reply(w, 200, list{Kind: "KafkaLinkDataList", Metadata: listMeta{Self: clusterURL(r, im.ClusterID) + "/links"}, Data: data})
}

func (s *Server) getLink(w http.ResponseWriter, r *http.Request) error {
	im, err := s.cluster(r)
	if err != nil {
		return err
	}
	if err := s.authorize(r, im, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeCluster, "kafka-cluster"); err != nil {
		return err
	}
	l := im.Links[r.PathValue("link")]
	if l == nil {
		return errorf(codeNotFound, "Cluster link %s cannot be found.", r.PathValue("link"))
	}
	return reply(w, 200, linkToData(l, im))
}

func (s *Server) deleteLink(w http.ResponseWriter, r *http.Request) error {
	im, err := s.cluster(r)
	if err != nil {
		return err
	}
	ls, err := s.links()
	if err != nil {
		return err
	}
	if err := s.authorize(r, im, kmsg.ACLOperationAlter, kmsg.ACLResourceTypeCluster, "kafka-cluster"); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.timeout)
	defer cancel()
	if err := ls.DeleteClusterLink(ctx, r.PathValue("link"), r.URL.Query().Get("force") == "true"); err != nil {
		return toAPIError(err)
	}
	return reply(w, http.StatusNoContent, nil)
}

// sourceClient is a client of a link's source cluster.
func sourceClient(l *metadata.ClusterLink) (*kgo.Client, error) {
	sec, err := client.SecurityFrom(l.Configs).KgoOpts()
	if err != nil {
		return nil, err
	}
	var seeds []string
	for _, s := range strings.Split(l.Config(metadata.LinkBootstrapServers), ",") {
		if s = strings.TrimSpace(s); s != "" {
			seeds = append(seeds, s)
		}
	}
	return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ClientID("shale-link-admin-" + l.Name),
		kgo.DialTimeout(5 * time.Second), kgo.RetryTimeout(5 * time.Second)}, sec...)...)
}

func (s *Server) createMirror(w http.ResponseWriter, r *http.Request) error {
	im, err := s.cluster(r)
	if err != nil {
		return err
	}
	ls, err := s.links()
	if err != nil {
		return err
	}
	l := im.Links[r.PathValue("link")]
	if l == nil {
		return errorf(codeNotFound, "Cluster link %s cannot be found.", r.PathValue("link"))
	}
	var req createMirrorRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
		return errorf(codeBadRequest, "Bad Request: %v", err)
	}
	if req.SourceTopicName == "" {
		return errorf(codeBadRequest, "Bad Request: source_topic_name is required")
	}
	if req.MirrorTopicName == "" {
		req.MirrorTopicName = req.SourceTopicName
	}
	if s.authorize(r, im, kmsg.ACLOperationCreate, kmsg.ACLResourceTypeCluster, "kafka-cluster") != nil {
		if err := s.authorize(r, im, kmsg.ACLOperationCreate, kmsg.ACLResourceTypeTopic, req.MirrorTopicName); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.timeout)
	defer cancel()
	src, err := sourceClient(l)
	if err != nil {
		return errorf(codeKafkaBadRequest, "cluster link %s: %v", l.Name, err)
	}
	defer src.Close()
	adm := kadm.NewClient(src)
	details, err := adm.ListTopics(ctx, req.SourceTopicName)
	if err != nil {
		return errorf(codeKafkaRetriable, "cluster link %s: source cluster: %v", l.Name, err)
	}
	td, ok := details[req.SourceTopicName]
	if !ok || td.Err != nil {
		return errorf(codeUnknownTopic, "source topic %s cannot be found through cluster link %s: %v", req.SourceTopicName, l.Name, td.Err)
	}
	configs := map[string]string{}
	if rcs, err := adm.DescribeTopicConfigs(ctx, req.SourceTopicName); err == nil && len(rcs) == 1 && rcs[0].Err == nil {
		for _, c := range rcs[0].Configs {
			if c.Value != nil && c.Source == kmsg.ConfigSourceDynamicTopicConfig && slices.Contains(metadata.MirroredConfigs, c.Key) {
				configs[c.Key] = *c.Value
			}
		}
	}
	rf := req.ReplicationFactor
	if rf == 0 {
		rf = -1
	}
	spec := metadata.MirrorSpec{Topic: req.MirrorTopicName, Link: l.Name, SourceTopic: req.SourceTopicName,
		Partitions: int32(len(td.Partitions)), ReplicationFactor: rf, Configs: configs, Existing: req.Reverse}
	if err := ls.CreateMirrorTopic(ctx, spec); err != nil {
		return toAPIError(err)
	}
	return reply(w, http.StatusCreated, mirrorData{Kind: "KafkaMirrorData", LinkName: l.Name, MirrorTopicName: req.MirrorTopicName,
		SourceTopicName: req.SourceTopicName, MirrorStatus: "ACTIVE"})
}

func mirrorToData(m *metadata.MirrorTopic) mirrorData {
	return mirrorData{Kind: "KafkaMirrorData", LinkName: m.Link, MirrorTopicName: m.Topic, SourceTopicName: m.SourceTopic,
		MirrorStatus: m.State.String(), StateTimeMs: m.StateChangedMs}
}

func (s *Server) listMirrors(w http.ResponseWriter, r *http.Request) error {
	im, err := s.cluster(r)
	if err != nil {
		return err
	}
	if err := s.authorize(r, im, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeCluster, "kafka-cluster"); err != nil {
		return err
	}
	link := r.PathValue("link")
	if im.Links[link] == nil {
		return errorf(codeNotFound, "Cluster link %s cannot be found.", link)
	}
	data := []mirrorData{}
	for _, name := range slices.Sorted(maps.Keys(im.Mirrors)) {
		if m := im.Mirrors[name]; m.Link == link {
			data = append(data, mirrorToData(m))
		}
	}
	return reply(w, 200, list{Kind: "KafkaMirrorDataList", Metadata: listMeta{Self: clusterURL(r, im.ClusterID) + "/links/" + link + "/mirrors"}, Data: data})
}

// promoteMirrors is mirrors:promote (failover false: the source must answer, and the
// lag is measured against it) and mirrors:failover (the source is not asked).
func (s *Server) promoteMirrors(failover bool) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		im, err := s.cluster(r)
		if err != nil {
			return err
		}
		ls, err := s.links()
		if err != nil {
			return err
		}
		if err := s.authorize(r, im, kmsg.ACLOperationAlter, kmsg.ACLResourceTypeCluster, "kafka-cluster"); err != nil {
			return err
		}
		link := im.Links[r.PathValue("link")]
		if link == nil {
			return errorf(codeNotFound, "Cluster link %s cannot be found.", r.PathValue("link"))
		}
		var req alterMirrorsRequest
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
			return errorf(codeBadRequest, "Bad Request: %v", err)
		}
		topics := req.MirrorTopicNames
		if len(topics) == 0 {
			for _, name := range slices.Sorted(maps.Keys(im.Mirrors)) {
				if m := im.Mirrors[name]; m.Link == link.Name && m.Active() {
					topics = append(topics, name)
				}
			}
		}
		ctx, cancel := context.WithTimeout(r.Context(), s.timeout)
		defer cancel()
		var src *kgo.Client
		if !failover {
			if src, err = sourceClient(link); err != nil {
				return errorf(codeKafkaBadRequest, "cluster link %s: %v", link.Name, err)
			}
			defer src.Close()
		}
		out := make([]mirrorData, len(topics))
		for i, topic := range topics {
			out[i] = mirrorData{Kind: "KafkaMirrorData", LinkName: link.Name, MirrorTopicName: topic}
			m := im.Mirrors[topic]
			if m == nil || m.Link != link.Name {
				out[i].Error = &mirrorErrorT{Code: codeNotFound, Message: fmt.Sprintf("topic %s is not a mirror of cluster link %s", topic, link.Name)}
				continue
			}
			out[i].SourceTopicName = m.SourceTopic
			// Measured before the stop: what the destination has then is what it keeps.
			lags, known, err := s.mirrorLags(ctx, src, m, im)
			if err != nil && !failover {
				out[i].Error = &mirrorErrorT{Code: codeKafkaRetriable, Message: fmt.Sprintf(
					"the source cluster did not answer (%v): promote needs it; failover promotes without it", err)}
				continue
			}
			out[i].Lags, out[i].LagKnown = lags, known
		}
		var todo []string
		var pos []int
		for i := range out {
			if out[i].Error == nil {
				todo = append(todo, topics[i])
				pos = append(pos, i)
			}
		}
		if len(todo) > 0 {
			for j, err := range ls.StopMirrors(ctx, todo) {
				if err != nil {
					ae := toAPIError(err)
					out[pos[j]].Error = &mirrorErrorT{Code: ae.code, Message: ae.msg}
				} else {
					out[pos[j]].MirrorStatus = metadata.MirrorStopped.String()
				}
			}
		}
		return reply(w, 200, list{Kind: "AlterMirrorStatusResponseDataList", Metadata: listMeta{Self: r.URL.String()}, Data: out})
	}
}

// mirrorLags measures what each partition of a mirror lacks of its source: the
// destination's end offsets (its leaders' log ends, which a promotion keeps) against
// the source's high watermarks, with the bytes and age of the missing batches. src nil
// (failover) reports the destination's side only (known false).
func (s *Server) mirrorLags(ctx context.Context, src *kgo.Client, m *metadata.MirrorTopic, im *metadata.Image) ([]mirrorLag, bool, error) {
	dst, err := s.adm.ListEndOffsets(ctx, m.Topic)
	if err != nil {
		return nil, false, err
	}
	var out []mirrorLag
	t := im.Topic(m.Topic)
	if t == nil {
		return nil, false, errors.New("mirror topic not in the metadata")
	}
	for i := range t.Partitions {
		l := mirrorLag{Partition: int32(i), LastSourceFetchedOffset: -1, SourceEnd: -1}
		if o, ok := dst.Lookup(m.Topic, int32(i)); ok && o.Err == nil {
			l.LastSourceFetchedOffset = o.Offset
		}
		out = append(out, l)
	}
	if src == nil {
		return out, false, nil
	}
	sadm := kadm.NewClient(src)
	ends, err := sadm.ListEndOffsets(ctx, m.SourceTopic)
	if err != nil {
		return out, false, err
	}
	if err := ends.Error(); err != nil {
		return out, false, err
	}
	md, err := sadm.Metadata(ctx, m.SourceTopic)
	if err != nil {
		return out, false, err
	}
	smt := md.Topics[m.SourceTopic]
	for i := range out {
		o, ok := ends.Lookup(m.SourceTopic, out[i].Partition)
		if !ok {
			continue
		}
		out[i].SourceEnd = o.Offset
		out[i].Lag = max(0, o.Offset-out[i].LastSourceFetchedOffset)
		if out[i].Lag > 0 {
			if sp, ok := smt.Partitions[out[i].Partition]; ok && sp.Leader >= 0 {
				out[i].LagBytes, out[i].LagMs = missingBytes(ctx, src.Broker(int(sp.Leader)), m.SourceTopic, smt.ID,
					out[i].Partition, out[i].LastSourceFetchedOffset, o.Offset)
			}
		}
	}
	return out, true, nil
}

// missingBytes reads the source partition's leader from..to (bounded by 64 MiB of fetching) and returns
// the batches' bytes and the age of the first one.
func missingBytes(ctx context.Context, leader *kgo.Broker, topic string, id [16]byte, partition int32, from, to int64) (bytes, ageMs int64) {
	const budget = 64 << 20
	off := from
	for off < to && bytes < budget {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxWaitMillis, req.MaxBytes, req.SessionEpoch = -1, 0, 8<<20, -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, id
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = partition, off, 8<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, leader)
		if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return bytes, ageMs
		}
		b := resp.Topics[0].Partitions[0].RecordBatches
		progressed := false
		for len(b) >= 61 {
			var h kmsg.RecordBatch
			if h.ReadFrom(b) != nil || int(h.Length)+12 > len(b) {
				break
			}
			last := h.FirstOffset + int64(h.LastOffsetDelta)
			if last >= off {
				if ageMs == 0 {
					ageMs = max(0, time.Now().UnixMilli()-h.FirstTimestamp)
				}
				bytes += int64(h.Length) + 12
				off, progressed = last+1, true
			}
			b = b[int(h.Length)+12:]
		}
		if !progressed {
			break
		}
	}
	return bytes, ageMs
}
