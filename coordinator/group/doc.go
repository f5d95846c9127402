// Package group is Shale's consumer-group coordinator: classic groups (JoinGroup,
// SyncGroup, Heartbeat, LeaveGroup), consumer groups of KIP-848's protocol
// (ConsumerGroupHeartbeat, ConsumerGroupDescribe: consumer.go), the offset APIs and the
// group admin APIs.
//
// Consumer groups share the classic groups' map, lock, offsets and fences (a group with
// cg set is one), so that the offset and admin APIs and the one namespace of group ids
// apply to both. An empty group converts from one protocol to the other; a live one does
// as group.consumer.migration.policy allows, and classic members may take part in a
// consumer group (consumer_classic.go). Unlike classic
// groups, whose membership lives only in memory, a consumer group's whole state (epochs,
// subscriptions, target and current assignments) goes through the controller quorum
// before a heartbeat that changed it is answered (consumer_store.go), so a coordinator
// taking the group over continues it without a rejoin, as Kafka's does.
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
