// Package replication is the replica manager, as Kafka's ReplicaManager: the one owner of
// this broker's partition replicas and the only way protocol handlers reach them.
//
// It follows the committed metadata (applied strictly in offset order, each partition's
// state in epoch order, never backwards), makes replicas leaders or followers, appends
// produced batches with acks and min.insync.replicas, answers consumer and follower
// fetches and ListOffsets with the one fencing check (role and leader epoch,
// CheckLeaderEpoch) and the one read bound (read_bound.go), waits for DeleteRecords to
// reach the followers, runs the follower fetchers
// that copy leaders' logs (truncating by leader epoch first), and, on the leader side,
// tracks each follower's position to advance the high watermark and proposes ISR shrinks
// and expansions through AlterPartition. The leaders of mirror topics' partitions copy
// them from their source clusters over cluster links (mirror.go, whose comment gives the
// design of leader epochs and truncation across clusters).
package replication
