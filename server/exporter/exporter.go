// Package exporter publishes the cluster-wide series that kafka_exporter and Kafka's JMX
// exporter (with Strimzi's rules) publish, read from the controller's metadata at scrape
// time, so that the community Grafana dashboards built on those tools work with Shale
// unchanged. The per-partition and per-broker series live next to what they measure:
// the replica manager (replication) and the group coordinator (coordinator/group).
//
// Every series here comes from the active controller alone, so that sum() over all the
// nodes Prometheus scrapes counts the cluster once: kafka_exporter reports them once per
// cluster, and Kafka's controller gauges are non-zero only on the active controller.
package exporter

import (
	"net"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shalelog/shale/metadata"
)

// Controller is what the collector reads from the controller.
type Controller interface {
	IsActive() bool
	Image() *metadata.Image
}

type controllerCollector struct {
	c Controller

	active, offline, topics, partitions, imbalance, activeBrokers, fencedBrokers *prometheus.Desc
	brokers, brokerInfo, topicPartitions                                         *prometheus.Desc
}

// ControllerCollector returns the collector of kafka_controller_kafkacontroller_* (JMX)
// and kafka_brokers, kafka_broker_info and kafka_topic_partitions (kafka_exporter).
func ControllerCollector(c Controller) prometheus.Collector {
	d := prometheus.NewDesc
	return &controllerCollector{
		c:             c,
		active:        d("kafka_controller_kafkacontroller_activecontrollercount", "1 on the active controller, else 0.", nil, nil),
		offline:       d("kafka_controller_kafkacontroller_offlinepartitionscount", "Partitions without a leader (active controller only, else 0).", nil, nil),
		topics:        d("kafka_controller_kafkacontroller_globaltopiccount", "Topics in the cluster (active controller only, else 0).", nil, nil),
		partitions:    d("kafka_controller_kafkacontroller_globalpartitioncount", "Partitions in the cluster (active controller only, else 0).", nil, nil),
		imbalance:     d("kafka_controller_kafkacontroller_preferredreplicaimbalancecount", "Partitions not led by their preferred replica (active controller only, else 0).", nil, nil),
		activeBrokers: d("kafka_controller_kafkacontroller_activebrokercount", "Registered, unfenced brokers (active controller only, else 0).", nil, nil),
		fencedBrokers: d("kafka_controller_kafkacontroller_fencedbrokercount", "Registered, fenced brokers (active controller only, else 0).", nil, nil),

		brokers:         d("kafka_brokers", "Brokers in the cluster that clients can use (unfenced), from the active controller.", nil, nil),
		brokerInfo:      d("kafka_broker_info", "One series per unfenced broker, from the active controller.", []string{"id", "address"}, nil),
		topicPartitions: d("kafka_topic_partitions", "Partitions of a topic, from the active controller.", []string{"topic"}, nil),
	}
}

func (c *controllerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.active, c.offline, c.topics, c.partitions, c.imbalance, c.activeBrokers, c.fencedBrokers, c.brokers, c.brokerInfo, c.topicPartitions} {
		ch <- d
	}
}

func (c *controllerCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	if !c.c.IsActive() {
		// Zeros rather than nothing, as Kafka's standby controllers report, so that a
		// panel over one node shows 0 instead of "no data".
		for _, d := range []*prometheus.Desc{c.active, c.offline, c.topics, c.partitions, c.imbalance, c.activeBrokers, c.fencedBrokers} {
			gauge(d, 0)
		}
		return
	}
	im := c.c.Image()
	var offline, parts, imbalance, unfenced, fenced int
	for _, t := range im.Topics {
		parts += len(t.Partitions)
		gauge(c.topicPartitions, float64(len(t.Partitions)), t.Name)
		for _, p := range t.Partitions {
			if p.Leader < 0 {
				offline++
			} else if len(p.Replicas) > 0 && p.Leader != p.Replicas[0] {
				imbalance++
			}
		}
	}
	for _, b := range im.Brokers {
		if b.Fenced {
			fenced++
			continue
		}
		unfenced++
		gauge(c.brokerInfo, 1, strconv.Itoa(int(b.ID)), net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))))
	}
	gauge(c.active, 1)
	gauge(c.offline, float64(offline))
	gauge(c.topics, float64(len(im.Topics)))
	gauge(c.partitions, float64(parts))
	gauge(c.imbalance, float64(imbalance))
	gauge(c.activeBrokers, float64(unfenced))
	gauge(c.fencedBrokers, float64(fenced))
	gauge(c.brokers, float64(unfenced))
}
