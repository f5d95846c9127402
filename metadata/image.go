package metadata

import "github.com/shalelog/shale/security/acl"

// Broker is one registered broker as the controller last committed it.
type Broker struct {
	ID   int32
	Host string // advertised Kafka listener host
	Port int32  // advertised Kafka listener port
	Rack string // broker.rack, "" when unset
	// Incarnation changes every time the broker process registers anew.
	Incarnation string
	// Epoch is the broker epoch the controller handed out at registration.
	Epoch int64
	// Fenced brokers hold no leadership and are left out of Metadata responses.
	Fenced bool
	// Listeners are every advertised listener, the inter-broker one (Host, Port) first.
	Listeners []Endpoint
}

// Partition is one partition's committed state.
type Partition struct {
	Topic       string
	Index       int32
	Replicas    []int32 // assigned replicas; the first is the preferred leader
	ISR         []int32
	Leader      int32 // -1 when no replica can lead
	LeaderEpoch int32
	// PartitionEpoch is bumped on every change of this partition's state (ISR, leader,
	// replicas); AlterPartition compares and sets it.
	PartitionEpoch int32
	// AddingReplicas and RemovingReplicas describe a reassignment in progress (KIP-455):
	// Replicas is then the target followed by the replicas it drops. Both are empty when
	// none is in progress.
	AddingReplicas   []int32
	RemovingReplicas []int32
}

// Reassigning reports whether a reassignment of the partition is in progress.
func (p *Partition) Reassigning() bool {
	return len(p.AddingReplicas) > 0 || len(p.RemovingReplicas) > 0
}

// Topic is one topic: its partitions and the configs set on it (defaults are not stored).
type Topic struct {
	Name       string
	ID         [16]byte
	Partitions []Partition // indexed by partition number
	Configs    map[string]string
}

// Image is an immutable snapshot of committed metadata. Holders must not modify it; a new
// Image is built for every change.
type Image struct {
	// Offset is the metadata log offset this image reflects (Raft index).
	Offset       uint64
	ClusterID    string
	ControllerID int32 // the active controller's node id, -1 when unknown
	Brokers      map[int32]Broker
	Topics       map[string]*Topic
	// Coordinators holds the group coordinator of each __consumer_offsets partition; its
	// length is offsets.topic.num.partitions as the cluster fixed it. Immutable.
	Coordinators []Coordinator
	// ACLs are the ACL bindings; nil when there are none. Immutable.
	ACLs *acl.Set
	// ClientQuotas are the client quota entities' values (quotas.go). Immutable.
	ClientQuotas ClientQuotas
	// SchemaRegistry is the built-in schema registry's state (schemaregistry.go); nil
	// when empty. Immutable.
	SchemaRegistry *SchemaRegistry
	// ClientMetrics are the client metrics subscriptions (clientmetrics.go). Immutable.
	ClientMetrics ClientMetrics
	// GroupConfigs are the groups' configs (groupconfigs.go). Immutable.
	GroupConfigs GroupConfigs
	// RemoteLogs are the partitions' remote logs (tiered storage, remotelog.go). Immutable.
	RemoteLogs RemoteLogs
	// RemotePurges are the partitions of deleted tiered topics whose remote objects are
	// still to be deleted (remotelog.go); nil when none. Immutable.
	RemotePurges RemotePurges
	// Links are the cluster links and Mirrors the mirror topics (links.go). Immutable.
	Links   ClusterLinks
	Mirrors MirrorTopics
}

// Topic returns the named topic, or nil.
func (im *Image) Topic(name string) *Topic {
	if im == nil {
		return nil
	}
	return im.Topics[name]
}

// Partition returns the partition, or nil when the topic or partition does not exist.
func (im *Image) Partition(topic string, index int32) *Partition {
	t := im.Topic(topic)
	if t == nil || index < 0 || int(index) >= len(t.Partitions) {
		return nil
	}
	return &t.Partitions[index]
}

// Contains reports whether id is in ids.
func Contains(ids []int32, id int32) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}
