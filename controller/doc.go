// Package controller is Shale's metadata quorum, modelled on Kafka's KRaft: a hashicorp/raft
// cluster of controllers whose replicated state machine holds the cluster metadata
// (brokers and their leases, topics, partition leaders, ISRs and epochs, topic configs,
// producer-id blocks and committed consumer-group offsets), the gRPC service brokers call,
// and BrokerClient, the broker-side implementation of metadata.Store over that service.
//
// The active controller (the Raft leader) is the only writer: it validates a request,
// fixes every non-deterministic input (topic ids, timestamps, placement seeds), proposes a
// record, and answers once the record is applied. Every controller applies the same log
// into the same state; each applied record that changes the image yields a delta, and
// brokers follow those deltas (WatchMetadata) into a local cache.
//
// One TCP port per controller carries both Raft and gRPC: see mux.go.
//
// Where code lives: each record family F (brokers, topics, offsets, coordinators, txn,
// share, acls, quotas, scram, schemas, clientmetrics, groupconfigs, consumergroups, links, reassign,
// unregister, quorum, watch, remotelog) keeps its FSM apply (the apply* methods and the state they touch) in fsm_F.go,
// its gRPC handlers (methods of service) in service_F.go, and its BrokerClient methods
// in broker_F.go; a family's FSM tests go in fsm_F_test.go. What the families share
// stays outside them: the FSM core and dispatch (fsm.go, change.go), the service type
// and its error mapping (service.go), the shape of the named-configs families
// (namedconfigs.go), BrokerClient itself (broker_client.go), and how a
// call reaches the active controller, follows leader changes and maps the answer
// (broker_conn.go: send, rpc, perItem, errorList).
package controller
