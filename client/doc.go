// Package client is a thin layer over franz-go (kgo and kadm) for Shale's command line,
// its benchmarks and its tests: connection options, topic administration, and helpers to
// produce and consume. It speaks only the Kafka protocol, so it works against any Kafka
// cluster, not just Shale. Anything it does not cover is reachable through Kgo and Admin.
package client
