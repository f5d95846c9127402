// Package interop drives real Kafka clients against a broker and checks that what they
// produce comes back intact: franz-go, sarama and segmentio/kafka-go in process, and
// kcat (librdkafka), confluent-kafka-python, kafka-python and kafkajs as subprocesses
// running the scripts in python/ and node/.
//
// Every client produces the same shape of record set under each compression codec it
// supports, into a fresh topic of its own, and consumes it back. The tests check content
// (null and empty keys and values kept apart), headers, timestamps, per-partition order,
// contiguous offsets, the offsets the producer was acknowledged with, and that every key
// lands on the partition the client's default partitioner computes.
//
// The target broker comes from the environment (see TestMain): SHALE_BOOTSTRAP for a
// running broker, SHALE_INTEROP_TARGET=kfake for an in-process franz-go kfake cluster,
// or by default a Shale node started from bin/shale (built when missing). MATRIX.md
// records which client and codec combinations passed against which target.
//
// registry_test.go drives schema registry clients (confluent-kafka-python's serializers,
// npm's @kafkajs/confluent-schema-registry) against the node's built-in registry.
package interop
