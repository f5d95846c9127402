package metadata

// SharePartitionState is a share group's persisted state of one topic partition
// (KIP-932): the share-partition start offset (SPSO) and the in-flight records from it
// on. Records at or past the end of the last batch have never been delivered. The
// share-partition leaders write it and the share-group coordinator reads it, both
// through the controller, which stores it in its own (protobuf) form.
type SharePartitionState struct {
	Group       string
	Topic       string
	Partition   int32
	StartOffset int64
	// StateEpoch changes when an admin replaces or deletes the state, fencing the
	// partition leader's writes based on the older state (FENCED_STATE_EPOCH).
	StateEpoch int32
	// LeaderEpoch is the partition leader epoch of the writer: a write from an older
	// leader than the stored state's is FENCED_LEADER_EPOCH.
	LeaderEpoch int32
	Batches     []ShareStateBatch
	// Deleted marks a state an admin deleted: it has no start offset or batches, and
	// keeps the next state epoch, so that a leader's write based on the deleted state is
	// fenced instead of bringing it back. Only partition leaders read deleted states.
	Deleted bool
}

// ShareStateBatch is a run of in-flight records with the same delivery state and count.
type ShareStateBatch struct {
	FirstOffset   int64
	LastOffset    int64
	DeliveryState int32
	DeliveryCount int32
}
