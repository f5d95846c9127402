// Package share is the partition-leader half of share groups (KIP-932, "queues for
// Kafka"): Kafka's SharePartition and SharePartitionManager. It sits with the replica
// manager (package replication) because it is built on the leader's Fetch and Append;
// the share-group coordinator, which assigns members to partitions, is in
// coordinator/share.
//
// Many members of a share group read one partition at once. For each (group, topic
// partition) this broker leads, a Partition keeps the share-partition start offset
// (SPSO) and the records in flight after it, each AVAILABLE, ACQUIRED (by one member,
// until a lock deadline), ACKNOWLEDGED or ARCHIVED, with its delivery count. A fetch
// acquires available committed records (below the high watermark); ACCEPT acknowledges
// them, RELEASE or a lock expiry makes them available again with their delivery count
// kept, REJECT archives them, and a record delivered group.share.delivery.count.limit
// times is archived. The SPSO advances over completed records, and the in-flight window
// is bounded by group.share.partition.max.record.locks.
//
// The state is committed through the controller quorum (Store), as committed offsets
// are: one flusher goroutine gathers every partition changed while its previous write
// was in flight into one write (group commit), and an acknowledgement is answered only
// after a write containing it committed. A broker that becomes leader reads the state
// back; what was acquired then comes back available with its delivery count, so a
// failover loses no acknowledgement and redelivers only what was in flight. Writes carry
// the partition leader epoch and the state epoch, so a deposed leader or a state an
// admin replaced is fenced.
//
// Beyond KIP-932, records archived by REJECT or by the delivery limit are written to
// the topic that the source topic's share.dead.letter.topic config names (deadletter.go).
package share
