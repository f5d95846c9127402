// Package txn is the transaction coordinator (Kafka's TransactionCoordinator): for each
// transactional id this broker coordinates it keeps the producer id and epoch, the
// transaction's state and partitions, and drives a transaction to completion by writing
// commit or abort markers to the leaders of its partitions.
//
// Transactional ids hash to coordinators as group ids do (the __consumer_offsets
// partitions the controller assigns to brokers), and every transition is committed
// through the controller quorum before the coordinator answers, in place of Kafka's
// __transaction_state topic. A broker that takes over a partition loads its transactions
// from the controller and completes those left half-way (PrepareCommit, PrepareAbort).
// The coordinator epoch of that partition fences a stale coordinator at the controller
// and, through WriteTxnMarkers, at the partition leaders.
package txn
