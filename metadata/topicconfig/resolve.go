package topicconfig

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Source says where an effective value comes from, numbered as DescribeConfigs v1+
// reports it.
type Source int8

const (
	SourceDynamicTopic Source = 1
	SourceStaticBroker Source = 4
	SourceDefault      Source = 5
)

// BrokerDefaults holds broker-level settings that replace Kafka's defaults for topics
// that do not set a config, keyed by the topic config's name (retention.ms, not
// log.retention.ms). Built once from the broker's configuration.
type BrokerDefaults map[string]string

// Validate checks a set of topic configs as CreateTopics and AlterConfigs do. Errors
// wrap kerr.InvalidConfig (or kerr.InvalidRequest for a null value).
func Validate(configs map[string]string) error {
	for name, v := range configs {
		if err := ValidateOne(name, v); err != nil {
			return err
		}
	}
	return nil
}

// ValidateOne checks one topic config.
func ValidateOne(name, value string) error {
	d, ok := Lookup(name)
	if !ok {
		return fmt.Errorf("%w: unknown topic config %q", kerr.InvalidConfig, name)
	}
	if err := d.Validate(value); err != nil {
		return fmt.Errorf("%w: %s: %w", kerr.InvalidConfig, name, err)
	}
	return nil
}

// Resolved is a topic's effective configuration.
type Resolved struct {
	topic  map[string]string
	broker BrokerDefaults
}

// Resolve combines a topic's own configs with the broker's defaults.
func Resolve(topic map[string]string, broker BrokerDefaults) Resolved {
	return Resolved{topic: topic, broker: broker}
}

// Get returns a config's effective value and where it comes from. Unknown names return
// ("", SourceDefault).
func (r Resolved) Get(name string) (string, Source) {
	if v, ok := r.topic[name]; ok {
		return v, SourceDynamicTopic
	}
	if v, ok := r.broker[name]; ok {
		return v, SourceStaticBroker
	}
	if d, ok := Lookup(name); ok {
		return d.Default, SourceDefault
	}
	return "", SourceDefault
}

// Int64 returns a numeric config's effective value; an unparsable stored value (which
// validation prevents) falls back to the default.
func (r Resolved) Int64(name string) int64 {
	v, _ := r.Get(name)
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		d, _ := Lookup(name)
		if d != nil {
			n, _ = strconv.ParseInt(d.Default, 10, 64)
		}
	}
	return n
}

// String returns a config's effective value.
func (r Resolved) String(name string) string {
	v, _ := r.Get(name)
	return v
}

// Bool returns a boolean config's effective value.
func (r Resolved) Bool(name string) bool {
	v, _ := r.Get(name)
	return v == "true"
}

func clamp(v, lo, hi int64) int64 { return max(lo, min(v, hi)) }

// Int32 returns an int-typed config's effective value, clamped into int32's range.
func (r Resolved) Int32(name string) int32 {
	return int32(clamp(r.Int64(name), math.MinInt32, math.MaxInt32))
}

// Float64 returns a double config's effective value; an unparsable stored value (which
// validation prevents) falls back to the default.
func (r Resolved) Float64(name string) float64 {
	v, _ := r.Get(name)
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		if d, _ := Lookup(name); d != nil {
			f, _ = strconv.ParseFloat(d.Default, 64)
		}
	}
	return f
}

// Policy is cleanup.policy parsed: whether old segments are deleted by retention and
// whether the log is compacted (both for compact,delete).
func (r Resolved) Policy() (deleteOld, compact bool) {
	for _, p := range strings.Split(r.String(CleanupPolicy), ",") {
		switch strings.TrimSpace(p) {
		case "delete":
			deleteOld = true
		case "compact":
			compact = true
		}
	}
	return deleteOld, compact
}
