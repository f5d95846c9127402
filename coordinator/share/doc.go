// Package share is Shale's share-group coordinator (KIP-932), the broker side of
// ShareGroupHeartbeat, ShareGroupDescribe and the share-group offset admin APIs
// (DescribeShareGroupOffsets, AlterShareGroupOffsets, DeleteShareGroupOffsets); the
// share-partition leader's side, ShareFetch and ShareAcknowledge, is replication/share.
//
// It is apart from the classic group coordinator (coordinator/group) because the two
// share nothing but the namespace of group ids: share groups have their own membership
// protocol (no JoinGroup/SyncGroup rounds, the coordinator assigns), their own timers
// and their own persisted state (share-partition state, not committed offsets). With
// its own lock a share heartbeat never waits behind a classic rebalance, and each
// coordinator can be read and tested alone. The one namespace is kept through two small
// interfaces wired by the broker: the share coordinator asks Classic.HasGroup before a
// share group takes an id, and the classic coordinator asks IsGroup before a classic
// group does, so that each kind is refused an id the other holds, with Kafka's errors.
// Lock order: the share coordinator's lock, then the classic one's, then the share
// coordinator's ids lock (IsGroup takes only that).
//
// As for classic groups, a share group's membership lives only in the memory of the
// broker the controller chose to coordinate the group id, and is dropped when the
// group moves; its members rejoin at the new coordinator, which reads the group's
// share-partition state back through the controller.
package share
