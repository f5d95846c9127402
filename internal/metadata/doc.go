// Package metadata is the broker's view of cluster metadata: the committed image of
// brokers, topics, partitions and configs, and the operations a broker proposes to the
// controller. The controller package implements Store over gRPC and Raft; brokers and
// protocol handlers only ever see this interface.
package metadata
