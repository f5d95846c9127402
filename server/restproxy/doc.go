// Package restproxy is Shale's built-in HTTP proxy: the part of Confluent REST Proxy's v3
// API that people use (clusters, topics, partitions, topic configs, and producing records
// with POST /v3/clusters/{c}/topics/{t}/records, one record or a stream of them), with
// Confluent's JSON shapes and error codes, plus Shale's own endpoints, which Confluent's
// v3 API lacks: a partition's committed records by offset, and a tiered partition's
// remote log (its offsets, size and segments, remotelog.go). Every broker serves it on
// rest.proxy.listener.
//
// Metadata (clusters, topics, partitions) is answered from the broker's metadata image.
// Everything that touches data or changes topics goes through an in-process franz-go
// client dialling this node's own Kafka listener, so that produced records get what any
// Kafka producer gets (acks=all, idempotence, partitioning by key with murmur2) and every
// broker-side check (quotas, limits, schema ID validation, topic policies). AVRO,
// PROTOBUF and JSONSCHEMA data is serialized with schemas from the built-in schema
// registry (the registry's state is in the same image), in the wire format of
// Confluent's serializers.
//
// The Kafka client connects as the broker itself (the inter-broker listener's TLS and
// SASL login), so the Kafka-side principal is the broker's; the HTTP caller's principal
// (httpauth.Principal) is authorized by the proxy with the cluster's ACLs before each
// operation, as the broker would authorize it.
package restproxy
