package metadata

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Group configs are Kafka's GROUP config resources (KIP-848, KIP-932): per-group values
// of settings whose broker-wide defaults are the group.consumer.* and group.share.*
// broker configs. They live in the image, changed through the controller like client
// metrics subscriptions, and are keyed by group id; a group need not exist to have them.

// The GROUP config keys (Kafka 4.x's GroupConfig).
const (
	GroupConsumerSessionTimeout    = "consumer.session.timeout.ms"
	GroupConsumerHeartbeatInterval = "consumer.heartbeat.interval.ms"
	GroupShareSessionTimeout       = "share.session.timeout.ms"
	GroupShareHeartbeatInterval    = "share.heartbeat.interval.ms"
	GroupShareRecordLockDuration   = "share.record.lock.duration.ms"
	GroupShareAutoOffsetReset      = "share.auto.offset.reset"
	GroupShareIsolationLevel       = "share.isolation.level"
	GroupStreamsSessionTimeout     = "streams.session.timeout.ms"
	GroupStreamsHeartbeatInterval  = "streams.heartbeat.interval.ms"
	GroupStreamsNumStandbyReplicas = "streams.num.standby.replicas"
)

// GroupConfigKey describes one GROUP config key.
type GroupConfigKey struct {
	Name string
	// Int is true for integer keys, false for strings.
	Int bool
	// Default is Kafka's default, used where the broker sets no default of its own.
	Default string
	// AtLeast is the smallest value an integer key's ConfigDef accepts.
	AtLeast int64
	Doc     string
}

// GroupConfigKeys are the GROUP config keys in name order, as Kafka lists them.
var GroupConfigKeys = []GroupConfigKey{
	{Name: GroupConsumerHeartbeatInterval, Int: true, Default: "5000", AtLeast: 1,
		Doc: "The heartbeat interval given to the members of this consumer group (KIP-848)."},
	{Name: GroupConsumerSessionTimeout, Int: true, Default: "45000", AtLeast: 1,
		Doc: "How long a member of this consumer group (KIP-848) may go without a heartbeat before it is removed."},
	{Name: GroupShareAutoOffsetReset, Default: "latest",
		Doc: "Where this share group starts on a partition it has no state for: latest, earliest, or by_duration:<ISO-8601 duration> (the first record no older than that)."},
	{Name: GroupShareHeartbeatInterval, Int: true, Default: "5000", AtLeast: 1,
		Doc: "The heartbeat interval given to the members of this share group."},
	{Name: GroupShareIsolationLevel, Default: "read_uncommitted",
		Doc: "Which records this share group reads: read_uncommitted, or read_committed (committed transactional records only, up to the last stable offset)."},
	{Name: GroupShareRecordLockDuration, Int: true, Default: "30000", AtLeast: 1000,
		Doc: "How long a member of this share group holds a record it acquired before it is released."},
	{Name: GroupShareSessionTimeout, Int: true, Default: "45000", AtLeast: 1,
		Doc: "How long a member of this share group may go without a heartbeat before it is removed."},
	{Name: GroupStreamsHeartbeatInterval, Int: true, Default: "5000", AtLeast: 1,
		Doc: "The heartbeat interval given to the members of this streams group (KIP-1071)."},
	{Name: GroupStreamsNumStandbyReplicas, Int: true, Default: "0", AtLeast: 0,
		Doc: "The number of standby replicas of each task of this streams group (KIP-1071)."},
	{Name: GroupStreamsSessionTimeout, Int: true, Default: "45000", AtLeast: 1,
		Doc: "How long a member of this streams group (KIP-1071) may go without a heartbeat before it is removed."},
}

// LookupGroupConfig returns the named GROUP config key.
func LookupGroupConfig(name string) (GroupConfigKey, bool) {
	i := slices.IndexFunc(GroupConfigKeys, func(k GroupConfigKey) bool { return k.Name == name })
	if i < 0 {
		return GroupConfigKey{}, false
	}
	return GroupConfigKeys[i], true
}

// GroupConfigs maps each group id to the configs set on it. Immutable once in an image.
type GroupConfigs map[string]map[string]string

// With returns a copy with group's configs replaced (nil or empty: removed).
func (g GroupConfigs) With(group string, configs map[string]string) GroupConfigs {
	out := maps.Clone(g)
	if out == nil {
		out = GroupConfigs{}
	}
	if len(configs) == 0 {
		delete(out, group)
	} else {
		out[group] = configs
	}
	return out
}

// Value returns the value set on group for key, or def when none is set.
func (g GroupConfigs) Value(group, key, def string) string {
	if v, ok := g[group][key]; ok {
		return v
	}
	return def
}

// Int returns the integer set on group for key, or def when none is set (or, which
// validation prevents, it is not an integer).
func (g GroupConfigs) Int(group, key string, def int64) int64 {
	v, ok := g[group][key]
	if !ok {
		return def
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
	if err != nil {
		return def
	}
	return n
}

// GroupConfigStore is the part of a Store that changes group configs through the
// controller.
type GroupConfigStore interface {
	// AlterGroupConfigs changes one group's configs; with incremental false the ops are
	// its whole new set (Kafka's AlterConfigs). A group left with no configs is removed.
	AlterGroupConfigs(ctx context.Context, group string, ops []ConfigOp, incremental, validateOnly bool) error
}

// GroupConfigBounds are the broker's limits on group config values and its defaults for
// the keys a group does not set: the group.consumer.{min,max}.*, group.share.{min,max}.*
// and group.streams.* broker configs Kafka's GroupConfig.validate checks against.
type GroupConfigBounds struct {
	// Defaults maps a GROUP key to the broker's value for groups that do not set it
	// (e.g. share.session.timeout.ms to group.share.session.timeout.ms); keys it lacks
	// take GroupConfigKey.Default.
	Defaults map[string]string
	// Min and Max bound integer keys, by GROUP key; a key absent from one is unbounded
	// on that side (beyond its AtLeast).
	Min, Max map[string]int64
}

// KafkaGroupConfigBounds are Kafka 4.x's default bounds (group.consumer.min.session.
// timeout.ms 45000, ...), for brokers that configure none of their own.
func KafkaGroupConfigBounds() *GroupConfigBounds {
	return &GroupConfigBounds{
		Min: map[string]int64{
			GroupConsumerSessionTimeout: 45000, GroupConsumerHeartbeatInterval: 5000,
			GroupShareSessionTimeout: 45000, GroupShareHeartbeatInterval: 5000, GroupShareRecordLockDuration: 15000,
			GroupStreamsSessionTimeout: 45000, GroupStreamsHeartbeatInterval: 5000,
		},
		Max: map[string]int64{
			GroupConsumerSessionTimeout: 60000, GroupConsumerHeartbeatInterval: 15000,
			GroupShareSessionTimeout: 60000, GroupShareHeartbeatInterval: 15000, GroupShareRecordLockDuration: 60000,
			GroupStreamsSessionTimeout: 60000, GroupStreamsHeartbeatInterval: 15000, GroupStreamsNumStandbyReplicas: 2,
		},
	}
}

// groupConfigBoundKeys are the broker configs each bounded key's limits come from, for errors.
var groupConfigBoundKeys = map[string][2]string{
	GroupConsumerSessionTimeout:    {"group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms"},
	GroupConsumerHeartbeatInterval: {"group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms"},
	GroupShareSessionTimeout:       {"group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms"},
	GroupShareHeartbeatInterval:    {"group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms"},
	GroupShareRecordLockDuration:   {"group.share.min.record.lock.duration.ms", "group.share.max.record.lock.duration.ms"},
	GroupStreamsSessionTimeout:     {"group.streams.min.session.timeout.ms", "group.streams.max.session.timeout.ms"},
	GroupStreamsHeartbeatInterval:  {"group.streams.min.heartbeat.interval.ms", "group.streams.max.heartbeat.interval.ms"},
	GroupStreamsNumStandbyReplicas: {"", "group.streams.max.standby.replicas"},
}

// GroupConfigBrokerKeys maps each GROUP key to the broker config whose value a group
// that does not set the key has (share.isolation.level has none).
var GroupConfigBrokerKeys = map[string]string{
	GroupConsumerSessionTimeout:    "group.consumer.session.timeout.ms",
	GroupConsumerHeartbeatInterval: "group.consumer.heartbeat.interval.ms",
	GroupShareSessionTimeout:       "group.share.session.timeout.ms",
	GroupShareHeartbeatInterval:    "group.share.heartbeat.interval.ms",
	GroupShareRecordLockDuration:   "group.share.record.lock.duration.ms",
	GroupShareAutoOffsetReset:      "share.auto.offset.reset",
	GroupStreamsSessionTimeout:     "group.streams.session.timeout.ms",
	GroupStreamsHeartbeatInterval:  "group.streams.heartbeat.interval.ms",
	GroupStreamsNumStandbyReplicas: "group.streams.num.standby.replicas",
}

// GroupConfigBoundsFrom returns the bounds and defaults of a broker whose configs are
// broker (name -> value): Kafka's defaults, overridden by the group.*.min/max.* and
// default configs the broker has.
func GroupConfigBoundsFrom(broker map[string]string) *GroupConfigBounds {
	b := KafkaGroupConfigBounds()
	b.Defaults = map[string]string{}
	for k, bk := range GroupConfigBrokerKeys {
		if v, ok := broker[bk]; ok {
			b.Defaults[k] = v
		}
	}
	for k, names := range groupConfigBoundKeys {
		for i, m := range []map[string]int64{b.Min, b.Max} {
			if n, err := strconv.ParseInt(broker[names[i]], 10, 64); names[i] != "" && err == nil {
				m[k] = n
			}
		}
	}
	return b
}

// ParseShareAutoOffsetReset parses a share.auto.offset.reset value: latest, earliest or
// by_duration:<ISO-8601 duration>. For by_duration it returns the duration.
func ParseShareAutoOffsetReset(v string) (string, time.Duration, error) {
	switch s := strings.ToLower(strings.TrimSpace(v)); {
	case s == "latest" || s == "earliest":
		return s, 0, nil
	case strings.HasPrefix(s, "by_duration:"):
		d, err := parseISODuration(strings.TrimSpace(v[strings.Index(v, ":")+1:]))
		if err != nil {
			return "", 0, fmt.Errorf("%w: invalid value %s for %s: %w", kerr.InvalidConfig, v, GroupShareAutoOffsetReset, err)
		}
		return "by_duration", d, nil
	}
	return "", 0, fmt.Errorf("%w: invalid value %s for %s: must be latest, earliest or by_duration:<ISO-8601 duration>",
		kerr.InvalidConfig, v, GroupShareAutoOffsetReset)
}

// parseISODuration parses what Java's Duration.parse accepts of PnDTnHnMn.nS (days,
// hours, minutes, seconds; no sign), as Kafka's by_duration does, refusing negatives.
func parseISODuration(s string) (time.Duration, error) {
	u := strings.ToUpper(s)
	if !strings.HasPrefix(u, "P") || len(u) < 3 {
		return 0, fmt.Errorf("not an ISO-8601 duration")
	}
	u = u[1:]
	var total time.Duration
	inTime := false
	for u != "" {
		if u[0] == 'T' {
			if inTime || len(u) == 1 {
				return 0, fmt.Errorf("not an ISO-8601 duration")
			}
			inTime, u = true, u[1:]
			continue
		}
		i := strings.IndexFunc(u, func(r rune) bool { return r != '.' && (r < '0' || r > '9') })
		if i <= 0 {
			return 0, fmt.Errorf("not an ISO-8601 duration")
		}
		n, err := strconv.ParseFloat(u[:i], 64)
		if err != nil {
			return 0, fmt.Errorf("not an ISO-8601 duration")
		}
		var unit time.Duration
		switch {
		case u[i] == 'D' && !inTime:
			unit = 24 * time.Hour
		case u[i] == 'H' && inTime:
			unit = time.Hour
		case u[i] == 'M' && inTime:
			unit = time.Minute
		case u[i] == 'S' && inTime:
			unit = time.Second
		default:
			return 0, fmt.Errorf("not an ISO-8601 duration")
		}
		total += time.Duration(n * float64(unit))
		u = u[i+1:]
	}
	return total, nil
}

// ValidateGroupConfigs checks a group's complete configs as Kafka's GroupConfig.validate
// does: unknown names, values of the wrong type or outside the bounds, and session
// timeouts not above their heartbeat intervals are INVALID_CONFIG. With b nil only what
// needs no broker configs is checked (names, types, AtLeast): the controller, which
// does not have the brokers' group.* configs, checks that much; the broker the request
// reached checks the rest before it asks the controller.
func ValidateGroupConfigs(configs map[string]string, b *GroupConfigBounds) error {
	for _, k := range slices.Sorted(maps.Keys(configs)) {
		def, ok := LookupGroupConfig(k)
		if !ok {
			return fmt.Errorf("%w: unknown group config name: %s", kerr.InvalidConfig, k)
		}
		v := strings.TrimSpace(configs[k])
		switch {
		case def.Int:
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil {
				return fmt.Errorf("%w: invalid value %s for configuration %s: not a number of type INT", kerr.InvalidConfig, configs[k], k)
			}
			if n < def.AtLeast {
				return fmt.Errorf("%w: invalid value %d for configuration %s: value must be at least %d", kerr.InvalidConfig, n, k, def.AtLeast)
			}
		case k == GroupShareAutoOffsetReset:
			if _, _, err := ParseShareAutoOffsetReset(v); err != nil {
				return err
			}
		case k == GroupShareIsolationLevel:
			if v != "read_committed" && v != "read_uncommitted" {
				return fmt.Errorf("%w: invalid value %s for configuration %s: must be read_committed or read_uncommitted", kerr.InvalidConfig, configs[k], k)
			}
		}
	}
	if b == nil {
		return nil
	}
	val := func(k string) int64 {
		v, ok := configs[k]
		if !ok {
			if v, ok = b.Defaults[k]; !ok {
				def, _ := LookupGroupConfig(k)
				v = def.Default
			}
		}
		n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		return n
	}
	// Kafka checks the bounds of every key, set or defaulted, in this order.
	for _, k := range []string{GroupConsumerHeartbeatInterval, GroupConsumerSessionTimeout, GroupShareHeartbeatInterval,
		GroupShareSessionTimeout, GroupShareRecordLockDuration, GroupStreamsHeartbeatInterval, GroupStreamsSessionTimeout,
		GroupStreamsNumStandbyReplicas} {
		if _, set := configs[k]; !set {
			// An unset key takes the broker's own value, which the broker's bounds
			// already admitted; checking it would refuse every change on a broker
			// configured outside Kafka's default bounds.
			continue
		}
		n := val(k)
		if lo, ok := b.Min[k]; ok && n < lo {
			return fmt.Errorf("%w: %s must be greater than or equal to %s (%d)", kerr.InvalidConfig, k, groupConfigBoundKeys[k][0], lo)
		}
		if hi, ok := b.Max[k]; ok && n > hi {
			return fmt.Errorf("%w: %s must be less than or equal to %s (%d)", kerr.InvalidConfig, k, groupConfigBoundKeys[k][1], hi)
		}
	}
	for _, p := range [][2]string{{GroupConsumerSessionTimeout, GroupConsumerHeartbeatInterval},
		{GroupShareSessionTimeout, GroupShareHeartbeatInterval}, {GroupStreamsSessionTimeout, GroupStreamsHeartbeatInterval}} {
		_, s1 := configs[p[0]]
		_, s2 := configs[p[1]]
		if (s1 || s2) && val(p[0]) <= val(p[1]) {
			return fmt.Errorf("%w: %s must be greater than %s", kerr.InvalidConfig, p[0], p[1])
		}
	}
	return nil
}

// groupKeys: GROUP configs has no list keys.
type groupKeys struct{}

func (groupKeys) list(string) (string, bool) { return "", false }

// ApplyGroupConfigOps computes a group's new configs from Alter or
// IncrementalAlterConfigs ops and validates them (ValidateGroupConfigs, with b). DELETE
// of a key not set is a no-op, as in Kafka; APPEND and SUBTRACT do not apply (no GROUP
// config is a list).
func ApplyGroupConfigOps(group string, current map[string]string, ops []ConfigOp, incremental bool, b *GroupConfigBounds) (map[string]string, error) {
	if group == "" {
		return nil, fmt.Errorf("%w: group id can't be empty", kerr.InvalidRequest)
	}
	if err := checkConfigOps(ops, incremental); err != nil {
		return nil, err
	}
	for _, op := range ops {
		if _, ok := LookupGroupConfig(op.Name); !ok {
			return nil, fmt.Errorf("%w: unknown group config name: %s", kerr.InvalidConfig, op.Name)
		}
	}
	out, err := applyConfigOps(current, ops, incremental, groupKeys{})
	if err != nil {
		return nil, err
	}
	if err := ValidateGroupConfigs(out, b); err != nil {
		return nil, err
	}
	return out, nil
}
