package config

import (
	"fmt"
	"strings"
)

// consumerAssignorsField parses group.consumer.assignors: a comma-separated list of the
// server-side assignors consumer groups (KIP-848) may use, the first the default. Each
// is uniform or range, by name or by Kafka's class name.
func consumerAssignorsField(field func(*Config) *[]string) accessor {
	return accessor{
		set: func(c *Config, v string) error {
			var out []string
			for _, a := range strings.Split(v, ",") {
				switch strings.TrimSpace(a) {
				case "":
					continue
				case "uniform", "org.apache.kafka.coordinator.group.assignor.UniformAssignor":
					a = "uniform"
				case "range", "org.apache.kafka.coordinator.group.assignor.RangeAssignor":
					a = "range"
				default:
					return fmt.Errorf("unknown consumer group assignor %q: expected uniform or range", strings.TrimSpace(a))
				}
				dup := false
				for _, x := range out {
					dup = dup || x == a
				}
				if !dup {
					out = append(out, a)
				}
			}
			if len(out) == 0 {
				return fmt.Errorf("group.consumer.assignors must name at least one assignor")
			}
			*field(c) = out
			return nil
		},
		get: func(c *Config) string { return strings.Join(*field(c), ",") },
	}
}
