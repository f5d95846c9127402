package metadata

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Client metrics subscriptions (KIP-714) are Kafka's CLIENT_METRICS config resources: a
// named set of configs that says which metrics (by name prefix) which clients (by match
// selectors) push, and how often. They live in the image, changed through the controller
// like topic configs.

// The CLIENT_METRICS config keys and Kafka's defaults and bounds (ClientMetricsConfigs).
const (
	ClientMetricsMetrics  = "metrics"
	ClientMetricsInterval = "interval.ms"
	ClientMetricsMatch    = "match"

	ClientMetricsDefaultInterval = 300000
	ClientMetricsMinInterval     = 100
	ClientMetricsMaxInterval     = 3600000
)

// ClientMetricsKeys are the CLIENT_METRICS config keys in Kafka's order.
var ClientMetricsKeys = []string{ClientMetricsMetrics, ClientMetricsInterval, ClientMetricsMatch}

// The match selectors a subscription may use (KIP-714's client matching).
const (
	MatchClientInstanceID      = "client_instance_id"
	MatchClientID              = "client_id"
	MatchClientSoftwareName    = "client_software_name"
	MatchClientSoftwareVersion = "client_software_version"
	MatchClientSourceAddress   = "client_source_address"
	MatchClientSourcePort      = "client_source_port"
)

var matchSelectors = []string{MatchClientInstanceID, MatchClientID, MatchClientSoftwareName,
	MatchClientSoftwareVersion, MatchClientSourceAddress, MatchClientSourcePort}

// ClientMetrics maps each subscription's name to the configs set on it. Immutable once in
// an image.
type ClientMetrics map[string]map[string]string

// With returns a copy with name's configs replaced (nil or empty: removed).
func (c ClientMetrics) With(name string, configs map[string]string) ClientMetrics {
	out := maps.Clone(c)
	if out == nil {
		out = ClientMetrics{}
	}
	if len(configs) == 0 {
		delete(out, name)
	} else {
		out[name] = configs
	}
	return out
}

// ClientMetricsStore is the part of a Store that changes client metrics subscriptions
// through the controller.
type ClientMetricsStore interface {
	// AlterClientMetrics changes one subscription's configs; with incremental false the
	// ops are its whole new set (Kafka's AlterConfigs). A subscription left with no
	// configs is removed.
	AlterClientMetrics(ctx context.Context, name string, ops []ConfigOp, incremental, validateOnly bool) error
}

// ClientMetricsSubscription is one subscription parsed from its configs.
type ClientMetricsSubscription struct {
	Name string
	// Metrics are the requested metric name prefixes; "" alone means every metric ("*").
	Metrics    []string
	IntervalMs int32
	// Match maps a selector to the regular expression its value must match whole.
	Match map[string]*regexp.Regexp
}

// ParseClientMetrics validates a subscription's configs as Kafka's ClientMetricsConfigs
// does and parses them: unknown keys and out-of-range intervals are INVALID_REQUEST,
// malformed match patterns INVALID_CONFIG.
func ParseClientMetrics(name string, configs map[string]string) (*ClientMetricsSubscription, error) {
	if name == "" {
		return nil, fmt.Errorf("%w: subscription name can't be empty", kerr.InvalidRequest)
	}
	sub := &ClientMetricsSubscription{Name: name, IntervalMs: ClientMetricsDefaultInterval}
	for _, k := range slices.Sorted(maps.Keys(configs)) {
		if !slices.Contains(ClientMetricsKeys, k) {
			return nil, fmt.Errorf("%w: unknown client metrics configuration: %s", kerr.InvalidRequest, k)
		}
	}
	for _, m := range splitList(configs[ClientMetricsMetrics]) {
		if m == "*" {
			// Every metric: KIP-714 sends a single empty prefix.
			sub.Metrics = []string{""}
			break
		}
		sub.Metrics = append(sub.Metrics, m)
	}
	if v, ok := configs[ClientMetricsInterval]; ok {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		if err != nil {
			return nil, fmt.Errorf("%w: invalid value %s for %s: not an int", kerr.InvalidConfig, v, ClientMetricsInterval)
		}
		if n < ClientMetricsMinInterval || n > ClientMetricsMaxInterval {
			return nil, fmt.Errorf("%w: invalid value %d for %s, interval must be between %d and %d (1 hour)",
				kerr.InvalidRequest, n, ClientMetricsInterval, ClientMetricsMinInterval, ClientMetricsMaxInterval)
		}
		sub.IntervalMs = int32(n)
	}
	for _, p := range splitList(configs[ClientMetricsMatch]) {
		sel, expr, ok := strings.Cut(p, "=")
		sel, expr = strings.TrimSpace(sel), strings.TrimSpace(expr)
		if !ok || expr == "" {
			return nil, fmt.Errorf("%w: illegal client matching pattern: %s", kerr.InvalidConfig, p)
		}
		if !slices.Contains(matchSelectors, sel) {
			return nil, fmt.Errorf("%w: illegal client matching pattern %s: unknown selector %s", kerr.InvalidConfig, p, sel)
		}
		// Java's Matcher.matches() needs the whole value to match.
		re, err := regexp.Compile("^(?:" + expr + ")$")
		if err != nil {
			return nil, fmt.Errorf("%w: illegal regex pattern %s for %s: %v", kerr.InvalidConfig, expr, sel, err)
		}
		if sub.Match == nil {
			sub.Match = map[string]*regexp.Regexp{}
		}
		sub.Match[sel] = re
	}
	return sub, nil
}

// Matches reports whether a client with these attributes (selector -> value) is one the
// subscription is for: every selector it names must match (no selectors: every client).
func (s *ClientMetricsSubscription) Matches(attrs map[string]string) bool {
	for sel, re := range s.Match {
		if !re.MatchString(attrs[sel]) {
			return false
		}
	}
	return true
}

type clientMetricsKeys struct{}

// list: the metrics and match lists are empty while unset.
func (clientMetricsKeys) list(name string) (string, bool) {
	return "", name == ClientMetricsMetrics || name == ClientMetricsMatch
}

// ApplyClientMetricsOps computes a subscription's new configs from Alter or
// IncrementalAlterConfigs ops and validates them. DELETE of a key not set is a no-op,
// as in Kafka; APPEND and SUBTRACT apply to the list keys (metrics, match).
func ApplyClientMetricsOps(name string, current map[string]string, ops []ConfigOp, incremental bool) (map[string]string, error) {
	if err := checkConfigOps(ops, incremental); err != nil {
		return nil, err
	}
	for _, op := range ops {
		if !slices.Contains(ClientMetricsKeys, op.Name) {
			return nil, fmt.Errorf("%w: unknown client metrics configuration: %s", kerr.InvalidRequest, op.Name)
		}
	}
	out, err := applyConfigOps(current, ops, incremental, clientMetricsKeys{})
	if err != nil {
		return nil, err
	}
	if _, err := ParseClientMetrics(name, out); err != nil {
		return nil, err
	}
	return out, nil
}
