package config

import (
	"strings"
	"testing"
)

// TestReplicaSelectorClass: replica.selector.class takes Kafka's class names and their
// short forms, stores the class name, defaults to none, and refuses anything else.
func TestReplicaSelectorClass(t *testing.T) {
	for in, want := range map[string]string{
		"": "",
		"org.apache.kafka.common.replica.RackAwareReplicaSelector": RackAwareReplicaSelector,
		"RackAwareReplicaSelector":                                 RackAwareReplicaSelector,
		"rack-aware":                                               RackAwareReplicaSelector,
		"org.apache.kafka.common.replica.LeaderReplicaSelector":    LeaderReplicaSelector,
		"leader": LeaderReplicaSelector,
	} {
		c, err := Load([]string{"--replica.selector.class=" + in}, nil)
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if c.ReplicaSelectorClass != want {
			t.Errorf("%q: stored %q, want %q", in, c.ReplicaSelectorClass, want)
		}
	}
	c, err := Load(nil, nil)
	if err != nil || c.ReplicaSelectorClass != "" {
		t.Fatalf("default: %q, %v; want none", c.ReplicaSelectorClass, err)
	}
	if _, err := Load([]string{"--replica.selector.class=com.example.MySelector"}, nil); err == nil || !strings.Contains(err.Error(), "replica.selector.class") {
		t.Fatalf("unknown selector: %v, want an error naming replica.selector.class", err)
	}
}
