package controller

import (
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"google.golang.org/protobuf/proto"

	pb "github.com/shalelog/shale/controller/proto"
)

// heldReplicas lists the partitions that name broker id as a replica, as of c.
func heldReplicas(c *change, id int32) []string {
	var out []string
	for _, name := range c.topicNames() {
		n := c.partitionCount(name)
		for idx := int32(0); idx < n; idx++ {
			if p, ok := c.partition(name, idx); ok && slices.Contains(p.Replicas, id) {
				out = append(out, fmt.Sprintf("%s-%d", name, idx))
			}
		}
	}
	return out
}

// applyUnregisterBroker removes a broker's registration. Without force it is refused
// while the broker is a replica of any partition: scaling down must not strand data.
func (f *fsm) applyUnregisterBroker(c *change, r *pb.UnregisterBrokerRecord) applyResult {
	b := c.broker(r.BrokerId)
	if b == nil {
		return applyResult{err: kafkaErrorf(kerr.BrokerIDNotRegistered, "broker %d is not registered", r.BrokerId)}
	}
	held := heldReplicas(c, r.BrokerId)
	if len(held) > 0 && !r.Force {
		shown := held[:min(len(held), 5)]
		more := ""
		if len(held) > len(shown) {
			more = fmt.Sprintf(" and %d more", len(held)-len(shown))
		}
		return applyResult{err: kafkaErrorf(kerr.PolicyViolation,
			"broker %d still holds %d replicas (%s%s): move them off first (shale broker drain --node %d), or force it (--force)",
			r.BrokerId, len(held), strings.Join(shown, ", "), more, r.BrokerId)}
	}
	if !b.Fenced {
		// Its leaderships move and it leaves the ISRs, as when it is fenced.
		nb := proto.CloneOf(b)
		nb.Fenced, nb.InControlledShutdown = true, false
		c.setBroker(nb)
		f.fenceEffects(c, []int32{r.BrokerId})
	}
	if c.unregistered == nil {
		c.unregistered = map[int32]bool{}
	}
	c.unregistered[r.BrokerId] = true
	return applyResult{value: len(held)}
}
