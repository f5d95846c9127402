// Package metadata is the broker's view of cluster metadata: the committed image of
// brokers, topics, partitions and configs, and the operations a broker proposes to the
// controller. The controller package implements Store over gRPC and Raft; brokers and
// protocol handlers only ever see this interface.
//
// It is a top-level package because it is the contract between the two sides of the
// cluster: the controller implements it, and everything on the broker side (the replica
// manager, the coordinators, the protocol handlers, the server) imports it. It imports
// none of them, so either side can change behind it; its subpackage topicconfig holds
// the topic-level config definitions both sides validate and resolve with.
package metadata
