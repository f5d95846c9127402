// Package console is Shale's built-in web console: server-rendered pages, served on a
// node's http.listener, that show the whole cluster (brokers, the controller quorum,
// topics, consumer and share groups with their lag over time, messages, users, ACLs
// and quotas).
//
// The console reads the cluster only through the Kafka APIs that clients use, with a
// franz-go client dialled to the node's own Kafka listener, so that any node shows every
// node's view and, on a cluster that requires SASL, the logged-in principal's ACLs apply
// to everything shown and done. A sampler keeps a bounded in-memory history of the
// series the plots draw; each node serves its own at /console/api/history, and a page
// merges the histories of the peers it is told about with its own.
package console
