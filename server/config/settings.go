package config

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/shalelog/shale/metadata/topicconfig"
)

// Setting is one effective setting and where its value came from.
type Setting struct {
	Key    string
	Value  string
	Source string // "default", "path:line", "environment SHALE_X", "flag --x"
	// Via is the synonym that supplied the value (log.retention.hours for
	// log.retention.ms), "" when the key itself did.
	Via string
}

// Settings lists every setting, sorted by key, for logging the effective configuration.
// A Config not made by Load or Default reports its values with source "default".
func (c *Config) Settings() []Setting {
	var out []Setting
	for _, k := range keyTable {
		s := Setting{Key: k.name, Value: k.get(c), Source: sourceDefault}
		if o, ok := c.origins[k.name]; ok {
			s.Source = o.source
			if o.key != k.name {
				s.Via = o.key
			}
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b Setting) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// TopicDefaults maps the broker settings that stand in for topic configs to topic config
// names (log.retention.ms to retention.ms, log.segment.bytes to segment.bytes, ...), as
// topicconfig.BrokerDefaults. It holds every such setting that was given explicitly (in
// the file, the environment or a flag) and any whose value differs from the topic
// config's default: that is how Kafka reports them, a topic config whose broker synonym
// is set in server.properties shows source STATIC_BROKER_CONFIG even when the value
// equals the default (Kafka's own sample file sets log.retention.hours=168). Settings left
// at defaults that equal the topic defaults are omitted and report DEFAULT_CONFIG.
func (c *Config) TopicDefaults() topicconfig.BrokerDefaults {
	out := topicconfig.BrokerDefaults{}
	for _, d := range topicconfig.All() {
		ref, ok := keysByName[d.BrokerName]
		if d.BrokerName == "" || !ok {
			continue
		}
		v := ref.def.get(c)
		if c.origins[ref.def.name].explicit() || v != d.Default {
			out[d.Name] = v
		}
	}
	return out
}

// Usage writes the help text of shale serve: how settings are given and every key with
// its default.
func Usage(w io.Writer) {
	fmt.Fprint(w, `Usage: shale serve [--config server.properties] [--KEY=VALUE | --KEY VALUE]...

Starts a Shale node. Settings use Kafka's broker config names and defaults. Each can be
given, in increasing precedence: in a Java properties file (--config FILE), as an
environment variable SHALE_<KEY> (upper case, dots as underscores: SHALE_LOG_DIRS), or as
a flag. Keys Shale does not know are ignored with a warning in the file and the
environment, and refused as flags. Of log.retention.ms/.minutes/.hours (and log.roll.ms/
.hours, log.dirs/log.dir) the first set wins within a source, and a higher source replaces
the whole group.

  --config FILE
        Java properties file (key=value lines, # comments), e.g. Kafka's server.properties.
`)
	for _, k := range keyTable {
		names := []string{k.name}
		for _, s := range k.synonyms {
			names = append(names, s.name)
		}
		def := k.def
		if k.noDefault {
			for _, s := range k.synonyms {
				if !s.noDefault {
					def = s.name + "=" + s.def
				}
			}
		}
		if def == "" {
			def = `""`
		}
		fmt.Fprintf(w, "  --%s (default %s)\n        %s\n", strings.Join(names, ", --"), def, k.doc)
	}
}
