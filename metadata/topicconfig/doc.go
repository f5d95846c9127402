// Package topicconfig defines Kafka's topic-level configs that Shale understands: their
// names, types, defaults, validation, and the broker-level settings (log.retention.ms,
// log.segment.bytes, ...) that override the defaults for topics that do not set them.
//
// The controller validates proposed configs with it, the broker resolves a topic's
// effective settings with it, and DescribeConfigs reports values and their sources.
package topicconfig
