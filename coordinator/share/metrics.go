package share

import "github.com/prometheus/client_golang/prometheus"

type collector struct {
	c              *Coordinator
	members, epoch *prometheus.Desc
}

// Collector returns a Prometheus collector of the members and group epoch of the share
// groups this broker coordinates.
func (c *Coordinator) Collector() prometheus.Collector {
	return &collector{
		c:       c,
		members: prometheus.NewDesc("shale_share_group_members", "Members of a share group this broker coordinates.", []string{"group", "state"}, nil),
		epoch:   prometheus.NewDesc("shale_share_group_epoch", "Group epoch of a share group this broker coordinates: it counts the assignment's changes.", []string{"group"}, nil),
	}
}

func (l *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- l.members
	ch <- l.epoch
}

func (l *collector) Collect(ch chan<- prometheus.Metric) {
	c := l.c
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, sg := range c.shares {
		if sg.state != Dead {
			ch <- prometheus.MustNewConstMetric(l.members, prometheus.GaugeValue, float64(len(sg.members)), sg.id, sg.state.String())
			ch <- prometheus.MustNewConstMetric(l.epoch, prometheus.GaugeValue, float64(sg.epoch), sg.id)
		}
	}
}
