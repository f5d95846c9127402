package topicconfig

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// ValidateRemote checks what tiered storage (KIP-405) adds to a topic's config set, as
// Kafka's LogConfig.validateTopicLogConfigValues does: cfg is the new set, previous the
// topic's current one (nil for a new topic), defaults the broker-level topic defaults and
// systemEnabled the cluster's remote.log.storage.system.enable. Errors wrap
// kerr.InvalidConfig. Call it after Validate: values are assumed well formed.
//
//   - remote.storage.enable=true needs the remote log storage system enabled;
//   - a compacted topic cannot enable it (remote segments are never rewritten);
//   - local.retention.ms (.bytes) other than -2 may not be -1 or exceed retention.ms
//     (.bytes) when that is bounded;
//   - once enabled it cannot be turned off (Kafka 3.7/3.8: the remote log would be left
//     with nothing deleting it; Kafka 3.9's remote.log.delete.on.disable is not served).
func ValidateRemote(previous, cfg map[string]string, defaults BrokerDefaults, systemEnabled bool) error {
	r := Resolve(cfg, defaults)
	if !r.Bool(RemoteStorageEnable) {
		if Resolve(previous, defaults).Bool(RemoteStorageEnable) {
			return fmt.Errorf("%w: %s: disabling remote storage on a topic is not supported", kerr.InvalidConfig, RemoteStorageEnable)
		}
		return nil
	}
	if !systemEnabled {
		return fmt.Errorf("%w: %s: tiered storage functionality is disabled in the broker (remote.log.storage.system.enable=false); topic cannot be configured with remote log storage",
			kerr.InvalidConfig, RemoteStorageEnable)
	}
	if _, compact := r.Policy(); compact {
		return fmt.Errorf("%w: %s: remote log storage is unsupported for compacted topics", kerr.InvalidConfig, RemoteStorageEnable)
	}
	for _, p := range [][2]string{{LocalRetentionMs, RetentionMs}, {LocalRetentionBytes, RetentionBytes}} {
		local, total := r.Int64(p[0]), r.Int64(p[1])
		if total <= -1 || local == -2 {
			continue
		}
		if local == -1 {
			return fmt.Errorf("%w: %s: value must not be -1 as %s value is set as %d", kerr.InvalidConfig, p[0], p[1], total)
		}
		if local > total {
			return fmt.Errorf("%w: %s: value must not be more than %s property value: %d", kerr.InvalidConfig, p[0], p[1], total)
		}
	}
	return nil
}

// RemoteStorage reports whether the topic uploads its closed segments (remote.storage.enable).
func (r Resolved) RemoteStorage() bool { return r.Bool(RemoteStorageEnable) }

// LocalRetentionMs is local.retention.ms resolved: -2 becomes retention.ms, so the
// result is -1 (no bound) or a duration in ms.
func (r Resolved) LocalRetentionMs() int64 {
	if v := r.Int64(LocalRetentionMs); v != -2 {
		return v
	}
	return r.Int64(RetentionMs)
}

// LocalRetentionBytes is local.retention.bytes resolved: -2 becomes retention.bytes, so
// the result is -1 (no bound) or a size.
func (r Resolved) LocalRetentionBytes() int64 {
	if v := r.Int64(LocalRetentionBytes); v != -2 {
		return v
	}
	return r.Int64(RetentionBytes)
}
