package metadata

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Cluster links and mirror topics (issue 29), after Confluent's Cluster Linking: a link,
// stored on the destination cluster, names a source cluster as a client would; a mirror
// topic on the destination copies one source topic through a link, partition for
// partition at the same offsets, and is read-only until it is promoted. The controller
// stores both in the image; the destination partitions' leaders do the copying
// (replication/mirror.go).

// ClusterLink is one link as the controller committed it.
type ClusterLink struct {
	Name string
	ID   [16]byte
	// Configs are the link's settings, by Kafka client names (LinkConfigKeys).
	Configs   map[string]string
	CreatedMs int64
}

// MirrorState is a mirror topic's state, as Cluster Linking names them.
type MirrorState int32

const (
	// MirrorActive: the topic copies its source and refuses producers.
	MirrorActive MirrorState = 0
	// MirrorStopped: promoted (or failed over); the topic is an ordinary, writable topic
	// and copies nothing more.
	MirrorStopped MirrorState = 1
)

func (s MirrorState) String() string {
	switch s {
	case MirrorActive:
		return "ACTIVE"
	case MirrorStopped:
		return "STOPPED"
	}
	return fmt.Sprintf("MirrorState(%d)", int32(s))
}

// MirrorTopic is one mirror topic's state.
type MirrorTopic struct {
	Topic          string
	Link           string
	SourceTopic    string
	State          MirrorState
	StateChangedMs int64
	// SourceEpochs holds, per partition, the highest source leader epoch a destination
	// replica may have in its log: the leader raises it through the controller before it
	// appends the first batch of a newer epoch, so that promotion can start the
	// destination's own epochs above every source epoch (see replication/mirror.go).
	SourceEpochs []int32
}

// Active reports whether the mirror copies and refuses producers.
func (m *MirrorTopic) Active() bool { return m != nil && m.State == MirrorActive }

// ClusterLinks are the links by name. Immutable once in an image.
type ClusterLinks map[string]*ClusterLink

// MirrorTopics are the mirror topics by destination topic name. Immutable once in an
// image.
type MirrorTopics map[string]*MirrorTopic

// Mirror returns the mirror state of topic, nil when it is no mirror.
func (im *Image) Mirror(topic string) *MirrorTopic {
	if im == nil {
		return nil
	}
	return im.Mirrors[topic]
}

// Link configs. The connection settings are a Kafka client's (client.Security's names);
// the rest are Cluster Linking's where it has one.
const (
	LinkBootstrapServers     = "bootstrap.servers"
	LinkSecurityProtocol     = "security.protocol"
	LinkSASLMechanism        = "sasl.mechanism"
	LinkSASLJAASConfig       = "sasl.jaas.config"
	LinkSASLUsername         = "sasl.username"
	LinkSASLPassword         = "sasl.password"
	LinkSSLTruststore        = "ssl.truststore.location"
	LinkSSLKeystore          = "ssl.keystore.location"
	LinkSSLEndpointIdent     = "ssl.endpoint.identification.algorithm"
	LinkClientID             = "client.id"
	LinkOffsetSyncEnable     = "consumer.offset.sync.enable"
	LinkOffsetSyncMs         = "consumer.offset.sync.ms"
	LinkOffsetGroupFilters   = "consumer.offset.group.filters"
	LinkFetchBytesPerSec     = "cluster.link.fetch.bytes.per.sec"
	LinkFetchMaxBytes        = "cluster.link.fetch.max.bytes"
	LinkTopicSyncMs          = "topic.config.sync.ms"
	defaultLinkOffsetSyncMs  = 30000
	defaultLinkTopicSyncMs   = 5000
	defaultLinkFetchMaxBytes = 1 << 20
)

type linkKey struct {
	kind  byte // 's' string, 'b' bool, 'i' positive integer, 'p' protocol, 'm' mechanism
	dflt  string
	check func(string) error
}

// linkKeys are the link configs Shale knows, with their defaults.
var linkKeys = map[string]linkKey{
	LinkBootstrapServers:   {kind: 's'},
	LinkSecurityProtocol:   {kind: 'p', dflt: "PLAINTEXT"},
	LinkSASLMechanism:      {kind: 'm', dflt: "SCRAM-SHA-512"},
	LinkSASLJAASConfig:     {kind: 's'},
	LinkSASLUsername:       {kind: 's'},
	LinkSASLPassword:       {kind: 's'},
	LinkSSLTruststore:      {kind: 's'},
	LinkSSLKeystore:        {kind: 's'},
	LinkSSLEndpointIdent:   {kind: 's', dflt: "https"},
	LinkClientID:           {kind: 's'},
	LinkOffsetSyncEnable:   {kind: 'b', dflt: "false"},
	LinkOffsetSyncMs:       {kind: 'i', dflt: strconv.Itoa(defaultLinkOffsetSyncMs)},
	LinkOffsetGroupFilters: {kind: 's', check: checkGroupFilters},
	LinkFetchBytesPerSec:   {kind: 'i', dflt: "0"},
	LinkFetchMaxBytes:      {kind: 'i', dflt: strconv.Itoa(defaultLinkFetchMaxBytes)},
	LinkTopicSyncMs:        {kind: 'i', dflt: strconv.Itoa(defaultLinkTopicSyncMs)},
}

// LinkConfigKeys returns the names of the link configs, sorted.
func LinkConfigKeys() []string {
	out := make([]string, 0, len(linkKeys))
	for k := range linkKeys {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// LinkSecretKeys are the link configs that describe hides.
var LinkSecretKeys = map[string]bool{LinkSASLJAASConfig: true, LinkSASLPassword: true}

// ValidateLinkName checks a link name as Kafka checks topic names (the same characters).
func ValidateLinkName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: a cluster link needs a name", kerr.InvalidRequest)
	}
	if len(name) > 249 {
		return fmt.Errorf("%w: cluster link name %q is longer than 249 characters", kerr.InvalidRequest, name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("%w: cluster link name %q has a character other than ASCII alphanumerics, '.', '_' and '-'", kerr.InvalidRequest, name)
		}
	}
	return nil
}

// ValidateLinkConfigs checks a link's configs: known names, well-formed values, and
// bootstrap.servers set. Errors are INVALID_CONFIG, as Kafka's for a bad config.
func ValidateLinkConfigs(cfg map[string]string) error {
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(cfg)) {
		v := cfg[k]
		key, ok := linkKeys[k]
		if !ok {
			errs = append(errs, fmt.Errorf("unknown cluster link config %q", k))
			continue
		}
		switch key.kind {
		case 'b':
			if v != "true" && v != "false" {
				errs = append(errs, fmt.Errorf("%s=%q: want true or false", k, v))
			}
		case 'i':
			if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err != nil || n < 0 {
				errs = append(errs, fmt.Errorf("%s=%q: want a non-negative integer", k, v))
			}
		case 'p':
			switch strings.ToUpper(v) {
			case "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL":
			default:
				errs = append(errs, fmt.Errorf("%s=%q: want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", k, v))
			}
		case 'm':
			switch strings.ToUpper(v) {
			case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
			default:
				errs = append(errs, fmt.Errorf("%s=%q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", k, v))
			}
		}
		if key.check != nil {
			if err := key.check(v); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", k, err))
			}
		}
	}
	if strings.TrimSpace(cfg[LinkBootstrapServers]) == "" {
		errs = append(errs, fmt.Errorf("%s must name the source cluster", LinkBootstrapServers))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", kerr.InvalidConfig, err)
	}
	return nil
}

// Config returns a link config's value, or its default.
func (l *ClusterLink) Config(key string) string {
	if v, ok := l.Configs[key]; ok {
		return v
	}
	return linkKeys[key].dflt
}

// ConfigInt returns an integer link config, or its default.
func (l *ClusterLink) ConfigInt(key string) int64 {
	n, err := strconv.ParseInt(strings.TrimSpace(l.Config(key)), 10, 64)
	if err != nil {
		n, _ = strconv.ParseInt(linkKeys[key].dflt, 10, 64)
	}
	return n
}

// GroupFilter is one entry of consumer.offset.group.filters, Cluster Linking's JSON
// shape reduced to Shale's: a group name pattern (a literal, or a glob with '*') to
// include or exclude.
type GroupFilter struct {
	Pattern string
	Exclude bool
}

// ParseGroupFilters reads consumer.offset.group.filters. Shale takes a comma-separated
// list of patterns, each a literal group id or a path.Match glob, a leading '!'
// excluding; an empty value matches no group. A group is synced when an include matches
// it and no exclude does.
func ParseGroupFilters(v string) ([]GroupFilter, error) {
	var out []GroupFilter
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		gf := GroupFilter{Pattern: f}
		if strings.HasPrefix(f, "!") {
			gf = GroupFilter{Pattern: f[1:], Exclude: true}
		}
		if _, err := path.Match(gf.Pattern, ""); err != nil {
			return nil, fmt.Errorf("pattern %q: %w", gf.Pattern, err)
		}
		out = append(out, gf)
	}
	return out, nil
}

func checkGroupFilters(v string) error {
	_, err := ParseGroupFilters(v)
	return err
}

// MatchGroup reports whether the filters select group.
func MatchGroup(filters []GroupFilter, group string) bool {
	in := false
	for _, f := range filters {
		if ok, _ := path.Match(f.Pattern, group); ok {
			if f.Exclude {
				return false
			}
			in = true
		}
	}
	return in
}

// MirrorSpec asks for a new mirror topic.
type MirrorSpec struct {
	Topic             string // the destination topic; "" is SourceTopic
	Link              string
	SourceTopic       string
	Partitions        int32 // the source's partition count
	ReplicationFactor int16 // -1: default.replication.factor
	// Configs are the source topic's configs that matter to consumers (MirroredConfigs).
	Configs map[string]string
	ID      [16]byte // the destination topic's id, fixed so that a retry is idempotent
	// Existing makes an existing topic, of the same partition count, a mirror (failback:
	// its log is truncated to where it and the source's diverge, then copies on).
	Existing bool
}

// MirroredConfigs are the topic configs a mirror copies from its source: those that
// decide what a consumer reads (retention, compaction, timestamps, sizes).
var MirroredConfigs = []string{
	"cleanup.policy", "retention.ms", "retention.bytes", "delete.retention.ms", "max.message.bytes",
	"message.timestamp.type", "min.compaction.lag.ms", "max.compaction.lag.ms", "segment.bytes", "segment.ms",
	"compression.type", "message.timestamp.difference.max.ms",
}

// ErrMirrorReadOnly refuses a produce to an active mirror topic: INVALID_REQUEST (not
// retriable: retrying cannot succeed until an operator promotes the topic), with a
// message that names the link. Confluent documents only that such a produce fails.
func ErrMirrorReadOnly(m *MirrorTopic) error {
	return fmt.Errorf("%w: topic %q is a mirror of %q over cluster link %q and is read-only until it is promoted",
		kerr.InvalidRequest, m.Topic, m.SourceTopic, m.Link)
}

// LinkStore is the part of a Store that changes cluster links and mirror topics through
// the controller (controller.BrokerClient implements it).
type LinkStore interface {
	// CreateClusterLink stores a new link: INVALID_CONFIG for bad configs,
	// INVALID_REQUEST for a name in use.
	CreateClusterLink(ctx context.Context, name string, configs map[string]string, validateOnly bool) error
	// DeleteClusterLink removes a link; without force it refuses (INVALID_REQUEST) while
	// an active mirror topic uses it, with force those mirrors are stopped.
	DeleteClusterLink(ctx context.Context, name string, force bool) error
	// CreateMirrorTopic creates the destination topic of a mirror with its state.
	CreateMirrorTopic(ctx context.Context, spec MirrorSpec) error
	// StopMirrors promotes mirror topics: they copy nothing more and become writable.
	// One error per topic.
	StopMirrors(ctx context.Context, topics []string) []error
	// RaiseMirrorEpoch raises a mirror partition's source epoch floor to epoch.
	RaiseMirrorEpoch(ctx context.Context, topic string, partition, epoch int32) error
}
