// Package group is Shale's classic (pre-KIP-848) consumer-group coordinator, the broker
// side of JoinGroup, SyncGroup, Heartbeat, LeaveGroup, the offset APIs and the group
// admin APIs.
//
// As in Kafka's GroupCoordinator, a group's membership, generation and rebalance state
// live only in the memory of the broker that coordinates the group; a broker picked
// deterministically from the group id over the live brokers (rendezvous hashing, so that
// a broker's death moves only its own groups). Committed offsets go through the
// metadata store, which commits them through the controller quorum, so a broker that
// takes a group over starts with no members (the clients rejoin) but reads the group's
// offsets back.
//
// The state machine follows Kafka's: Empty -> PreparingRebalance (members join, up to
// the rebalance timeout) -> CompletingRebalance (the leader computes the assignment and
// sends it in SyncGroup) -> Stable, and Dead for a group being deleted or moved away.
// All group state is guarded by one mutex per Coordinator; timers (session, rebalance,
// sync, new-member timeouts, from coordinator/timer) re-take it and check a sequence
// number so that a timer that fires late, after being replaced, does nothing.
package group
