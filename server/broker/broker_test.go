package broker_test

import (
	"testing"

	"github.com/shalelog/shale/coordinator/group"
	"github.com/shalelog/shale/coordinator/txn"
	"github.com/shalelog/shale/protocol"
	"github.com/shalelog/shale/replication"
	"github.com/shalelog/shale/server/broker"
)

// A component configured for another node is refused rather than silently renumbered;
// nothing is built (the nil store is never touched).
func TestNewRefusesAnotherNodeID(t *testing.T) {
	for name, opts := range map[string]broker.Options{
		"replication": {NodeID: 1, Replication: replication.Config{NodeID: 2}},
		"protocol":    {NodeID: 1, Protocol: protocol.Config{NodeID: 2}},
		"groups":      {NodeID: 1, Groups: &group.Config{NodeID: 2}},
		"txn":         {NodeID: 0, Txn: &txn.Config{NodeID: 1}},
	} {
		if _, err := broker.New(nil, opts); err == nil {
			t.Errorf("%s: New accepted a component configured for another node", name)
		}
	}
}
