// Package coordinator holds Kafka's coordinators, one package each: group (classic
// consumer groups), share (share groups, KIP-932, in the same namespace of group ids)
// and txn (transactions, with the producer-id allocator in txn/producerid), and the
// re-armable timer they share (timer). It has no code of its own.
//
// It earns its place at the top level because a coordinator is neither the data plane
// nor the controller: it owns some keys (group ids, transactional ids) in memory on the
// broker the controller chose for them, and commits its state through the metadata
// contract. So it imports metadata, never partition, replication or controller; the
// server wires it to the replica manager, and the protocol handlers call it. The import
// rule is enforced by internal/layering.
package coordinator
