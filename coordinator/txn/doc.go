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
//
// Transactions v2 (KIP-890 part 2, EndTxn v5+, served when transaction.version is 2)
// bump the producer epoch in the same controller write that ends a transaction, so
// the markers fence the ended transaction's late writes and a new coordinator completes
// with the bumped epoch; Produce v12 joins the transaction through the partition
// leader's Verifier.AddToTxn. EndTxn v0-4 keep the epoch (transactions v1).
package txn
