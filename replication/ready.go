package replication

import (
	"fmt"
	"slices"
	"strings"

	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/partition"
)

// InSync answers a readiness probe: this broker is registered in the applied metadata
// under its current registration, unfenced, holds every replica assigned to it, and is in
// the ISR of every partition it follows. A restarted broker registers anew and the
// controller takes it out of every ISR, so this stays false until the leaders have seen it
// catch up and added it back: a rolling restart that waits for it never stops a second
// in-sync replica of any partition. A partition without a leader does not count: there is
// nothing to catch up to, and holding the probe down would not bring the leader back.
// When not in sync, the reason names the first partitions that are behind.
func (m *Manager) InSync() (bool, string) {
	im := m.Image()
	id := m.cfg.NodeID
	if !m.store.LeaseValid() {
		return false, "not registered with the controller"
	}
	self, ok := im.Brokers[id]
	if !ok || self.Fenced || self.Epoch != m.store.BrokerEpoch() {
		// The applied image predates this registration (or the unfencing): its ISRs say
		// nothing about this incarnation yet.
		return false, "metadata does not show this broker's registration yet"
	}
	var behind []string
	for _, t := range im.Topics {
		for _, mp := range t.Partitions {
			if !metadata.Contains(mp.Replicas, id) {
				continue
			}
			tp := partition.TopicPartition{Topic: t.Name, Index: mp.Index}
			switch {
			case m.parts.Get(t.Name, mp.Index) == nil:
				// Assigned here but not open (a failed open is retried every second).
			case mp.Leader < 0 || mp.Leader == id || metadata.Contains(mp.ISR, id):
				continue
			}
			behind = append(behind, fmt.Sprintf("%s-%d", tp.Topic, tp.Index))
		}
	}
	if len(behind) == 0 {
		return true, ""
	}
	slices.Sort(behind)
	n := len(behind)
	if n > 5 {
		behind = append(behind[:5], "...")
	}
	return false, fmt.Sprintf("not in the ISR of %d partitions (%s)", n, strings.Join(behind, ", "))
}
