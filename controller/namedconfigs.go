package controller

import (
	"maps"
	"slices"
)

// Named configs are the shape two record families share: client metrics subscriptions
// (fsm_clientmetrics.go) and group configs (fsm_groupconfigs.go). The image maps a name
// to its complete configs; a record carries whole states, each a name and its configs
// (none: the name is removed); the change keeps each name's last state; and deltas,
// snapshots and image chunks list states in name order. A family gives its image type
// M, its state message S and S's name.

// namedConfigsImage is a family's image: metadata.ClientMetrics, metadata.GroupConfigs.
type namedConfigsImage[M any] interface {
	~map[string]map[string]string
	// With returns a copy with name's configs replaced (nil or empty: removed).
	With(name string, configs map[string]string) M
}

// namedConfigsState is a family's state message: pb.ClientMetricsState, pb.GroupConfigState.
type namedConfigsState interface {
	GetConfigs() map[string]string
}

// namedConfigsToPB lists every name's configs in name order, as states made by state.
func namedConfigsToPB[S any](m map[string]map[string]string, state func(name string, configs map[string]string) S) []S {
	var out []S
	for _, name := range slices.Sorted(maps.Keys(m)) {
		out = append(out, state(name, maps.Clone(m[name])))
	}
	return out
}

// applyNamedConfigs returns m with each state's name replaced.
func applyNamedConfigs[M namedConfigsImage[M], S namedConfigsState](m M, states []S, name func(S) string) M {
	for _, st := range states {
		m = m.With(name(st), maps.Clone(st.GetConfigs()))
	}
	return m
}

// recordNamedConfigs keeps each state as its name's last in *set, made on first use.
func recordNamedConfigs[S any](set *map[string]S, states []S, name func(S) string) {
	for _, st := range states {
		if *set == nil {
			*set = map[string]S{}
		}
		(*set)[name(st)] = st
	}
}

// namedConfigsDelta lists a change's states in name order.
func namedConfigsDelta[S any](set map[string]S) []S {
	var out []S
	for _, name := range slices.Sorted(maps.Keys(set)) {
		out = append(out, set[name])
	}
	return out
}
