package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/metadata/topicconfig"
)

// finish checks what spans keys and derives the defaults that depend on other keys
// (advertised listeners, the voter set).
func (c *Config) finish() error {
	var errs []error
	fail := func(key, format string, args ...any) {
		errs = append(errs, c.origins[key].errorf(format, args...))
	}

	c.finishSecurity(fail)
	controllerName := c.ControllerListenerNames[0]
	_, hasControllerListener := findListener(c.Listeners, controllerName)
	if c.IsController() && !hasControllerListener && len(c.ControllerQuorumVoters) == 0 {
		// This node alone is the quorum, and only its own broker dials the controller:
		// a loopback listener on a free port serves, and `serve --listeners=PLAINTEXT://...`
		// just works. The server logs the port it got.
		c.Listeners = append(c.Listeners, Listener{Name: controllerName, Host: "127.0.0.1"})
		c.derivedControllerListener, hasControllerListener = true, true
	}
	switch {
	case c.IsController() && !hasControllerListener:
		fail("listeners", "a controller needs a listener named %s (the first of controller.listener.names): add one, e.g. %s://127.0.0.1:9093, or set process.roles=broker with controller.quorum.voters", controllerName, controllerName)
	case !c.IsController():
		for _, l := range c.Listeners {
			if slices.Contains(c.ControllerListenerNames, l.Name) {
				fail("listeners", "listener %s is a controller listener, but this node is not a controller (process.roles=broker); remove it", l.Name)
			}
		}
	}
	if c.IsBroker() {
		switch _, ok := findListener(c.Listeners, c.InterBrokerListenerName); {
		case slices.Contains(c.ControllerListenerNames, c.InterBrokerListenerName):
			fail("inter.broker.listener.name", "%s is a controller listener; brokers need a Kafka listener", c.InterBrokerListenerName)
		case !ok:
			fail("inter.broker.listener.name", "no listener is named %s (listeners=%s)", c.InterBrokerListenerName, getListeners(func(c *Config) []Listener { return c.Listeners })(c))
		}
	} else {
		for _, l := range c.BrokerListeners() {
			fail("listeners", "listener %s serves Kafka clients, but this node is only a controller (process.roles=controller); list only controller listeners", l.Name)
		}
	}

	c.finishAdvertised(fail)
	c.finishVoters(fail)
	c.finishConsole()
	c.finishRemoteStorage(fail)

	if c.TransactionVersion > 2 {
		fail("transaction.version", "must be 0, 1 or 2, not %d", c.TransactionVersion)
	}
	if c.BrokerHeartbeatIntervalMs >= c.BrokerSessionTimeoutMs {
		fail("broker.heartbeat.interval.ms", "must be less than broker.session.timeout.ms (%d)", c.BrokerSessionTimeoutMs)
	}
	if c.GroupShareHeartbeatIntervalMs >= c.GroupShareSessionTimeoutMs {
		fail("group.share.heartbeat.interval.ms", "must be less than group.share.session.timeout.ms (%d)", c.GroupShareSessionTimeoutMs)
	}
	if c.GroupConsumerHeartbeatIntervalMs >= c.GroupConsumerSessionTimeoutMs {
		fail("group.consumer.heartbeat.interval.ms", "must be less than group.consumer.session.timeout.ms (%d)", c.GroupConsumerSessionTimeoutMs)
	}
	// Kafka's GroupCoordinatorConfig: the broker-wide defaults lie within the bounds
	// the group configs are held to.
	if c.GroupConsumerSessionTimeoutMs < c.GroupConsumerMinSessionTimeoutMs || c.GroupConsumerSessionTimeoutMs > c.GroupConsumerMaxSessionTimeoutMs {
		fail("group.consumer.session.timeout.ms", "must be within group.consumer.min.session.timeout.ms (%d) and group.consumer.max.session.timeout.ms (%d)",
			c.GroupConsumerMinSessionTimeoutMs, c.GroupConsumerMaxSessionTimeoutMs)
	}
	if c.GroupConsumerHeartbeatIntervalMs < c.GroupConsumerMinHeartbeatIntervalMs || c.GroupConsumerHeartbeatIntervalMs > c.GroupConsumerMaxHeartbeatIntervalMs {
		fail("group.consumer.heartbeat.interval.ms", "must be within group.consumer.min.heartbeat.interval.ms (%d) and group.consumer.max.heartbeat.interval.ms (%d)",
			c.GroupConsumerMinHeartbeatIntervalMs, c.GroupConsumerMaxHeartbeatIntervalMs)
	}
	if c.OffsetMetadataMaxBytes > metadata.MaxOffsetMetadataBytes {
		// The controller's bound on what it stores: above it, commits the coordinator
		// accepted would be refused by the controller.
		fail("offset.metadata.max.bytes", "must not exceed %d", metadata.MaxOffsetMetadataBytes)
	}
	if c.GroupMinSessionTimeoutMs > c.GroupMaxSessionTimeoutMs {
		fail("group.min.session.timeout.ms", "must not exceed group.max.session.timeout.ms (%d)", c.GroupMaxSessionTimeoutMs)
	}
	for _, b := range []struct {
		name     string
		min, max int32
	}{
		{"group.consumer.min.session.timeout.ms", c.GroupConsumerMinSessionTimeoutMs, c.GroupConsumerMaxSessionTimeoutMs},
		{"group.consumer.min.heartbeat.interval.ms", c.GroupConsumerMinHeartbeatIntervalMs, c.GroupConsumerMaxHeartbeatIntervalMs},
		{"group.share.min.session.timeout.ms", c.GroupShareMinSessionTimeoutMs, c.GroupShareMaxSessionTimeoutMs},
		{"group.share.min.heartbeat.interval.ms", c.GroupShareMinHeartbeatIntervalMs, c.GroupShareMaxHeartbeatIntervalMs},
		{"group.share.min.record.lock.duration.ms", c.GroupShareMinRecordLockDurationMs, c.GroupShareMaxRecordLockDurationMs},
	} {
		if b.min > b.max {
			fail(b.name, "must not exceed %s (%d)", strings.Replace(b.name, ".min.", ".max.", 1), b.max)
		}
	}
	switch c.GroupConsumerMigrationPolicy {
	case "disabled", "upgrade", "downgrade", "bidirectional":
	default:
		fail("group.consumer.migration.policy", "must be disabled, upgrade, downgrade or bidirectional")
	}
	if c.ShareAutoOffsetReset != "latest" && c.ShareAutoOffsetReset != "earliest" {
		fail("share.auto.offset.reset", "must be latest or earliest (Kafka's by_duration is not supported)")
	}
	if int64(c.ReplicaFetchWaitMaxMs) > c.ReplicaLagTimeMaxMs {
		fail("replica.fetch.wait.max.ms", "must not exceed replica.lag.time.max.ms (%d), or followers would drop out of the ISR while waiting", c.ReplicaLagTimeMaxMs)
	}

	// Broker settings that default topic configs obey the topic config's own rules.
	for _, d := range topicconfig.All() {
		ref, ok := keysByName[d.BrokerName]
		if d.BrokerName == "" || !ok {
			continue
		}
		if err := d.Validate(ref.def.get(c)); err != nil {
			fail(ref.def.name, "%w", err)
		}
	}
	return errors.Join(errs...)
}

func (c *Config) finishAdvertised(fail func(key, format string, args ...any)) {
	if len(c.AdvertisedListeners) == 0 {
		c.derivedAdvertised = true
		for _, l := range c.BrokerListeners() {
			if isWildcard(l.Host) {
				c.Warnings = append(c.Warnings, fmt.Sprintf(
					"listener %s binds every interface; advertising it as 127.0.0.1:%d, which only clients on this machine can reach: set advertised.listeners for others",
					l.Name, l.Port))
				l.Host = "127.0.0.1"
			}
			c.AdvertisedListeners = append(c.AdvertisedListeners, l)
		}
		return
	}
	for _, a := range c.AdvertisedListeners {
		switch _, ok := findListener(c.Listeners, a.Name); {
		case !ok:
			fail("advertised.listeners", "%s is not one of the listeners", a.Name)
		case isWildcard(a.Host):
			fail("advertised.listeners", "%s needs a host clients can reach, not %q", a.Name, a.Host)
		case a.Port == 0:
			fail("advertised.listeners", "%s needs a port", a.Name)
		case !c.IsController() && slices.Contains(c.ControllerListenerNames, a.Name):
			fail("advertised.listeners", "%s is a controller listener, but this node is not a controller", a.Name)
		}
	}
	if c.IsBroker() {
		if _, ok := c.Advertised(c.InterBrokerListenerName); !ok {
			fail("advertised.listeners", "must include the inter-broker listener %s", c.InterBrokerListenerName)
		}
	}
}

func (c *Config) finishVoters(fail func(key, format string, args ...any)) {
	has := slices.ContainsFunc(c.ControllerQuorumVoters, func(v Voter) bool { return v.ID == c.NodeID })
	switch {
	case len(c.ControllerQuorumVoters) == 0 && c.IsController():
		host, port := c.ControllerListener()
		if isWildcard(host) {
			host = "127.0.0.1"
		}
		c.ControllerQuorumVoters = []Voter{{ID: c.NodeID, Host: host, Port: port}}
		c.derivedVoters = true
	case len(c.ControllerQuorumVoters) == 0 && len(c.ControllerQuorumBootstrapServers) == 0:
		fail("controller.quorum.voters", "a broker-only node must be told the controllers: set controller.quorum.bootstrap.servers to host:port,... or controller.quorum.voters to id@host:port,...")
	case len(c.ControllerQuorumVoters) == 0:
		// A broker that finds the controllers through controller.quorum.bootstrap.servers.
	case c.IsController() && !has:
		// A controller outside the voters joins the running quorum they form, once an
		// operator adds it (shale controller add); it never bootstraps a quorum of its own.
	case !c.IsController() && has:
		fail("controller.quorum.voters", "node.id %d is listed as a voter, but process.roles=%s does not include controller", c.NodeID, strings.Join(c.ProcessRoles, ","))
	}
}
