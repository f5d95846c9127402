package config

import (
	"fmt"
	"strings"
)

// The replica selectors replica.selector.class may name (KIP-392), by Kafka's class
// names; the replica manager implements them.
const (
	RackAwareReplicaSelector = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
	LeaderReplicaSelector    = "org.apache.kafka.common.replica.LeaderReplicaSelector"
)

// replicaSelectorField accepts Kafka's class names and their short forms (the simple
// class name, or rack-aware and leader), and stores the class name.
func replicaSelectorField(field func(*Config) *string) accessor {
	return accessor{
		set: func(c *Config, v string) error {
			switch strings.TrimSpace(v) {
			case "":
				*field(c) = ""
			case RackAwareReplicaSelector, "RackAwareReplicaSelector", "rack-aware":
				*field(c) = RackAwareReplicaSelector
			case LeaderReplicaSelector, "LeaderReplicaSelector", "leader":
				*field(c) = LeaderReplicaSelector
			default:
				return fmt.Errorf("unknown replica selector %q: expected %s or %s (or empty, to read from leaders only)", v, RackAwareReplicaSelector, LeaderReplicaSelector)
			}
			return nil
		},
		get: func(c *Config) string { return *field(c) },
	}
}
