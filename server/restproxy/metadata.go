package restproxy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/metadata"
)

// related is a link to a related resource collection, Confluent's {"related": url}.
type related struct {
	Related string `json:"related"`
}

type resourceMeta struct {
	Self         string `json:"self"`
	ResourceName string `json:"resource_name,omitempty"`
}

type listMeta struct {
	Self string  `json:"self"`
	Next *string `json:"next"`
}

type list struct {
	Kind     string   `json:"kind"`
	Metadata listMeta `json:"metadata"`
	Data     any      `json:"data"`
}

// baseURL is the proxy's own URL as the client reached it.
func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

func clusterURL(r *http.Request, id string) string { return baseURL(r) + "/v3/clusters/" + id }

func topicURL(r *http.Request, c, t string) string { return clusterURL(r, c) + "/topics/" + t }

func crn(parts ...string) string { return "crn:///" + strings.Join(parts, "/") }

type clusterData struct {
	Kind                  string       `json:"kind"`
	Metadata              resourceMeta `json:"metadata"`
	ClusterID             string       `json:"cluster_id"`
	Controller            *related     `json:"controller,omitempty"`
	ACLs                  related      `json:"acls"`
	Brokers               related      `json:"brokers"`
	BrokerConfigs         related      `json:"broker_configs"`
	ConsumerGroups        related      `json:"consumer_groups"`
	Topics                related      `json:"topics"`
	PartitionReassignment related      `json:"partition_reassignments"`
}

func describeCluster(r *http.Request, im *metadata.Image) clusterData {
	u := clusterURL(r, im.ClusterID)
	d := clusterData{
		Kind:                  "KafkaCluster",
		Metadata:              resourceMeta{Self: u, ResourceName: crn("kafka=" + im.ClusterID)},
		ClusterID:             im.ClusterID,
		ACLs:                  related{u + "/acls"},
		Brokers:               related{u + "/brokers"},
		BrokerConfigs:         related{u + "/broker-configs"},
		ConsumerGroups:        related{u + "/consumer-groups"},
		Topics:                related{u + "/topics"},
		PartitionReassignment: related{u + "/topics/-/partitions/-/reassignment"},
	}
	if im.ControllerID >= 0 {
		d.Controller = &related{fmt.Sprintf("%s/brokers/%d", u, im.ControllerID)}
	}
	return d
}

func (s *Server) listClusters(w http.ResponseWriter, r *http.Request) error {
	im := s.image()
	return reply(w, 200, list{Kind: "KafkaClusterList", Metadata: listMeta{Self: baseURL(r) + "/v3/clusters"},
		Data: []clusterData{describeCluster(r, im)}})
}

func (s *Server) getCluster(w http.ResponseWriter, r *http.Request) error {
	im, err := s.cluster(r)
	if err != nil {
		return err
	}
	return reply(w, 200, describeCluster(r, im))
}

type topicData struct {
	Kind                   string       `json:"kind"`
	Metadata               resourceMeta `json:"metadata"`
	ClusterID              string       `json:"cluster_id"`
	TopicName              string       `json:"topic_name"`
	IsInternal             bool         `json:"is_internal"`
	ReplicationFactor      int          `json:"replication_factor"`
	PartitionsCount        int          `json:"partitions_count"`
	Partitions             related      `json:"partitions"`
	Configs                related      `json:"configs"`
	PartitionReassignments related      `json:"partition_reassignments"`
	AuthorizedOperations   []string     `json:"authorized_operations"`
}

// internalTopics are the topics Kafka marks internal.
var internalTopics = []string{"__consumer_offsets", "__transaction_state", "__share_group_state"}

func describeTopic(r *http.Request, im *metadata.Image, t *metadata.Topic) topicData {
	u := topicURL(r, im.ClusterID, t.Name)
	rf := 0
	if len(t.Partitions) > 0 {
		rf = len(t.Partitions[0].Replicas) - len(t.Partitions[0].AddingReplicas)
	}
	return topicData{
		Kind:                   "KafkaTopic",
		Metadata:               resourceMeta{Self: u, ResourceName: crn("kafka="+im.ClusterID, "topic="+t.Name)},
		ClusterID:              im.ClusterID,
		TopicName:              t.Name,
		IsInternal:             slices.Contains(internalTopics, t.Name),
		ReplicationFactor:      rf,
		PartitionsCount:        len(t.Partitions),
		Partitions:             related{u + "/partitions"},
		Configs:                related{u + "/configs"},
		PartitionReassignments: related{u + "/partitions/-/reassignment"},
		AuthorizedOperations:   []string{},
	}
}

func (s *Server) listTopics(w http.ResponseWriter, r *http.Request) error {
	im, err := s.cluster(r)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(im.Topics))
	for name := range im.Topics {
		// As Kafka's Metadata: topics the principal may not describe are left out.
		if s.authorize(r, im, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, name) == nil {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	out := make([]topicData, 0, len(names))
	for _, name := range names {
		out = append(out, describeTopic(r, im, im.Topics[name]))
	}
	return reply(w, 200, list{Kind: "KafkaTopicList", Metadata: listMeta{Self: clusterURL(r, im.ClusterID) + "/topics"}, Data: out})
}

func (s *Server) getTopic(w http.ResponseWriter, r *http.Request) error {
	im, t, err := s.topic(r, kmsg.ACLOperationDescribe)
	if err != nil {
		return err
	}
	return reply(w, 200, describeTopic(r, im, t))
}

// createTopicRequest is Confluent's CreateTopicRequest.
type createTopicRequest struct {
	TopicName         string `json:"topic_name"`
	PartitionsCount   *int32 `json:"partitions_count"`
	ReplicationFactor *int16 `json:"replication_factor"`
	Configs           []struct {
		Name  string  `json:"name"`
		Value *string `json:"value"`
	} `json:"configs"`
	ValidateOnly bool `json:"validate_only"`
}

func (s *Server) createTopic(w http.ResponseWriter, r *http.Request) error {
	im, err := s.cluster(r)
	if err != nil {
		return err
	}
	var req createTopicRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	if err := dec.Decode(&req); err != nil {
		return errorf(codeBadRequest, "Bad Request: %v", err)
	}
	if req.TopicName == "" {
		return errorf(codeBadRequest, "Bad Request: topic_name is required")
	}
	// Kafka lets CREATE on the cluster or on the topic create it.
	if s.authorize(r, im, kmsg.ACLOperationCreate, kmsg.ACLResourceTypeCluster, "kafka-cluster") != nil {
		if err := s.authorize(r, im, kmsg.ACLOperationCreate, kmsg.ACLResourceTypeTopic, req.TopicName); err != nil {
			return err
		}
	}
	partitions, rf := int32(-1), int16(-1)
	if req.PartitionsCount != nil {
		partitions = *req.PartitionsCount
	}
	if req.ReplicationFactor != nil {
		rf = *req.ReplicationFactor
	}
	configs := map[string]*string{}
	for _, c := range req.Configs {
		configs[c.Name] = c.Value
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.timeout)
	defer cancel()
	var res kadm.CreateTopicResponse
	if req.ValidateOnly {
		var all kadm.CreateTopicResponses
		if all, err = s.adm.ValidateCreateTopics(ctx, partitions, rf, configs, req.TopicName); err == nil {
			res, err = all.On(req.TopicName, nil)
		}
	} else {
		res, err = s.adm.CreateTopic(ctx, partitions, rf, configs, req.TopicName)
	}
	if err == nil {
		err = res.Err
	}
	if err != nil {
		if ae := toAPIError(err); ae.code == codeKafkaBadRequest && strings.Contains(ae.msg, "TOPIC_ALREADY_EXISTS") {
			return errorf(codeKafkaBadRequest, "Topic '%s' already exists.", req.TopicName)
		}
		return fmt.Errorf("create topic %q: %w", req.TopicName, err)
	}
	if req.ValidateOnly {
		t := &metadata.Topic{Name: req.TopicName, Partitions: make([]metadata.Partition, res.NumPartitions)}
		for i := range t.Partitions {
			t.Partitions[i].Replicas = make([]int32, res.ReplicationFactor)
		}
		return reply(w, 201, describeTopic(r, im, t))
	}
	if err := s.waitImage(ctx, func(im *metadata.Image) bool { return im.Topic(req.TopicName) != nil }); err != nil {
		return err
	}
	now := s.image()
	return reply(w, 201, describeTopic(r, now, now.Topic(req.TopicName)))
}

func (s *Server) deleteTopic(w http.ResponseWriter, r *http.Request) error {
	_, t, err := s.topic(r, kmsg.ACLOperationDelete)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.timeout)
	defer cancel()
	res, err := s.adm.DeleteTopic(ctx, t.Name)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		return fmt.Errorf("delete topic %q: %w", t.Name, err)
	}
	id := t.ID
	if err := s.waitImage(ctx, func(im *metadata.Image) bool {
		now := im.Topic(t.Name)
		return now == nil || now.ID != id
	}); err != nil {
		return err
	}
	return reply(w, 204, nil)
}

type partitionData struct {
	Kind         string       `json:"kind"`
	Metadata     resourceMeta `json:"metadata"`
	ClusterID    string       `json:"cluster_id"`
	TopicName    string       `json:"topic_name"`
	PartitionID  int32        `json:"partition_id"`
	Leader       *related     `json:"leader"`
	Replicas     related      `json:"replicas"`
	Reassignment related      `json:"reassignment"`
}

func describePartition(r *http.Request, im *metadata.Image, p *metadata.Partition) partitionData {
	u := fmt.Sprintf("%s/partitions/%d", topicURL(r, im.ClusterID, p.Topic), p.Index)
	d := partitionData{
		Kind:         "KafkaPartition",
		Metadata:     resourceMeta{Self: u, ResourceName: crn("kafka="+im.ClusterID, "topic="+p.Topic, fmt.Sprintf("partition=%d", p.Index))},
		ClusterID:    im.ClusterID,
		TopicName:    p.Topic,
		PartitionID:  p.Index,
		Replicas:     related{u + "/replicas"},
		Reassignment: related{u + "/reassignment"},
	}
	if p.Leader >= 0 {
		d.Leader = &related{fmt.Sprintf("%s/replicas/%d", u, p.Leader)}
	}
	return d
}

func (s *Server) listPartitions(w http.ResponseWriter, r *http.Request) error {
	im, t, err := s.topic(r, kmsg.ACLOperationDescribe)
	if err != nil {
		return err
	}
	out := make([]partitionData, 0, len(t.Partitions))
	for i := range t.Partitions {
		p := t.Partitions[i]
		p.Topic, p.Index = t.Name, int32(i)
		out = append(out, describePartition(r, im, &p))
	}
	return reply(w, 200, list{Kind: "KafkaPartitionList", Metadata: listMeta{Self: topicURL(r, im.ClusterID, t.Name) + "/partitions"}, Data: out})
}

func (s *Server) getPartition(w http.ResponseWriter, r *http.Request) error {
	im, _, p, err := s.partition(r, kmsg.ACLOperationDescribe)
	if err != nil {
		return err
	}
	return reply(w, 200, describePartition(r, im, p))
}

type configSynonym struct {
	Name   string  `json:"name"`
	Value  *string `json:"value"`
	Source string  `json:"source"`
}

type topicConfigData struct {
	Kind        string          `json:"kind"`
	Metadata    resourceMeta    `json:"metadata"`
	ClusterID   string          `json:"cluster_id"`
	TopicName   string          `json:"topic_name"`
	Name        string          `json:"name"`
	Value       *string         `json:"value"`
	IsDefault   bool            `json:"is_default"`
	IsReadOnly  bool            `json:"is_read_only"`
	IsSensitive bool            `json:"is_sensitive"`
	Source      string          `json:"source"`
	Synonyms    []configSynonym `json:"synonyms"`
}

// configSource is Confluent's name of a config source (the Java enum's names).
func configSource(s kmsg.ConfigSource) string {
	switch s {
	case kmsg.ConfigSourceDynamicTopicConfig:
		return "DYNAMIC_TOPIC_CONFIG"
	case kmsg.ConfigSourceDynamicBrokerConfig:
		return "DYNAMIC_BROKER_CONFIG"
	case kmsg.ConfigSourceDynamicDefaultBrokerConfig:
		return "DYNAMIC_DEFAULT_BROKER_CONFIG"
	case kmsg.ConfigSourceStaticBrokerConfig:
		return "STATIC_BROKER_CONFIG"
	case kmsg.ConfigSourceDefaultConfig:
		return "DEFAULT_CONFIG"
	case kmsg.ConfigSourceDynamicBrokerLoggerConfig:
		return "DYNAMIC_BROKER_LOGGER_CONFIG"
	}
	return "UNKNOWN"
}

func (s *Server) listTopicConfigs(w http.ResponseWriter, r *http.Request) error {
	im, t, err := s.topic(r, kmsg.ACLOperationDescribeConfigs)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.timeout)
	defer cancel()
	rcs, err := s.adm.DescribeTopicConfigs(ctx, t.Name)
	if err != nil {
		return fmt.Errorf("describe configs of %q: %w", t.Name, err)
	}
	var rc kadm.ResourceConfig
	if rc, err = rcs.On(t.Name, nil); err == nil {
		err = rc.Err
	}
	if err != nil {
		return fmt.Errorf("describe configs of %q: %w", t.Name, err)
	}
	u := topicURL(r, im.ClusterID, t.Name) + "/configs"
	out := make([]topicConfigData, 0, len(rc.Configs))
	for _, c := range rc.Configs {
		d := topicConfigData{
			Kind:        "KafkaTopicConfig",
			Metadata:    resourceMeta{Self: u + "/" + c.Key, ResourceName: crn("kafka="+im.ClusterID, "topic="+t.Name, "config="+c.Key)},
			ClusterID:   im.ClusterID,
			TopicName:   t.Name,
			Name:        c.Key,
			Value:       c.Value,
			IsDefault:   c.Source == kmsg.ConfigSourceDefaultConfig,
			IsSensitive: c.Sensitive,
			Source:      configSource(c.Source),
			Synonyms:    []configSynonym{},
		}
		for _, syn := range c.Synonyms {
			d.Synonyms = append(d.Synonyms, configSynonym{Name: syn.Key, Value: syn.Value, Source: configSource(syn.Source)})
		}
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return reply(w, 200, list{Kind: "KafkaTopicConfigList", Metadata: listMeta{Self: u}, Data: out})
}
