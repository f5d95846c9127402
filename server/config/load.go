package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// ErrHelp is returned by Load when the arguments ask for help (-h, --help); the caller
// prints Usage.
var ErrHelp = flag.ErrHelp

// origin says where a setting's value came from.
type origin struct {
	source string // "default", "server.properties:12", "environment SHALE_X", "flag --x"
	key    string // the key or synonym that was used
	value  string
}

func (o origin) explicit() bool { return o.source != sourceDefault }

const sourceDefault = "default"

// layer is one source's settings by key (synonyms under their own names).
type layer map[string]origin

// mergeOver applies a higher-precedence layer. A layer that sets any key of a family
// (log.retention.ms/minutes/hours, log.dirs/log.dir, log.roll.ms/hours) replaces the
// whole family from lower layers: --log.retention.hours=1 overrides a file's
// log.retention.ms, although within one layer log.retention.ms beats the hours, as in Kafka.
func (dst layer) mergeOver(src layer) {
	for name := range src {
		k := keysByName[name].def
		delete(dst, k.name)
		for _, s := range k.synonyms {
			delete(dst, s.name)
		}
	}
	for name, o := range src {
		dst[name] = o
	}
}

func defaultsLayer() layer {
	l := layer{}
	for _, k := range keyTable {
		if !k.noDefault {
			l[k.name] = origin{source: sourceDefault, key: k.name, value: k.def}
		}
		for _, s := range k.synonyms {
			if !s.noDefault {
				l[s.name] = origin{source: sourceDefault, key: s.name, value: s.def}
			}
		}
	}
	return l
}

// Default returns the configuration with every setting at its default: a single node,
// broker and controller, on 127.0.0.1:9092 with data in ./data.
func Default() *Config {
	c, err := build(defaultsLayer(), nil)
	if err != nil {
		panic("config: defaults do not validate: " + err.Error()) // a bug in the key table
	}
	return c
}

// EnvName is the environment variable that sets a key: SHALE_ and the key upper-cased
// with dots as underscores (log.dirs: SHALE_LOG_DIRS).
func EnvName(key string) string {
	return "SHALE_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// Load builds a node's configuration from serve's arguments and the environment
// (os.Environ's form, KEY=VALUE), in increasing precedence: defaults, the properties
// file named by --config, SHALE_* variables, then flags. Flags are --key=value or
// --key value, with the key names of Usage. It returns ErrHelp for -h or --help.
func Load(args []string, environ []string) (*Config, error) {
	var warnings []string
	fs := flag.NewFlagSet("shale serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	var configPath string
	fs.StringVar(&configPath, "config", "", "")
	flags := layer{}
	for name := range keysByName {
		fs.Var(&flagValue{name: name, layer: flags}, name, "")
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, ErrHelp
		}
		return nil, fmt.Errorf("%w (shale serve --help lists the settings)", err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q: settings are --key=value flags, and a properties file is --config FILE", fs.Arg(0))
	}

	settings := defaultsLayer()
	if configPath != "" {
		file, ws, err := readPropertiesFile(configPath)
		if err != nil {
			return nil, err
		}
		warnings = append(warnings, ws...)
		settings.mergeOver(file)
	}
	env, ws := envLayer(environ)
	warnings = append(warnings, ws...)
	settings.mergeOver(env)
	settings.mergeOver(flags)
	return build(settings, warnings)
}

type flagValue struct {
	name  string
	layer layer
}

func (f *flagValue) String() string { return "" }

func (f *flagValue) Set(v string) error {
	f.layer[f.name] = origin{source: "flag --" + f.name, key: f.name, value: v}
	return nil
}

func readPropertiesFile(path string) (layer, []string, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("config file: %w", err)
	}
	props, err := parseProperties(string(text))
	if err != nil {
		return nil, nil, fmt.Errorf("config file %s: %w", path, err)
	}
	l := layer{}
	var warnings []string
	for _, p := range props {
		where := fmt.Sprintf("%s:%d", path, p.line)
		if _, ok := keysByName[p.key]; !ok {
			warnings = append(warnings, fmt.Sprintf("%s: ignoring %s: not a setting Shale knows", where, p.key))
			continue
		}
		l[p.key] = origin{source: where, key: p.key, value: p.value}
	}
	return l, warnings, nil
}

func envLayer(environ []string) (layer, []string) {
	byEnv := make(map[string]string, len(keysByName))
	for name := range keysByName {
		byEnv[EnvName(name)] = name
	}
	l := layer{}
	var unknown []string
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "SHALE_") {
			continue
		}
		key, ok := byEnv[name]
		if !ok {
			unknown = append(unknown, name)
			continue
		}
		l[key] = origin{source: "environment " + name, key: key, value: value}
	}
	if len(unknown) == 0 {
		return l, nil
	}
	// One line: test harnesses and scripts keep their own SHALE_* variables around.
	slices.Sort(unknown)
	return l, []string{"ignoring environment variables that name no setting: " + strings.Join(unknown, ", ")}
}

// build turns merged settings into a Config: each key parsed into its field (values
// trimmed, as Kafka trims them), then the checks and defaults that span keys.
func build(settings layer, warnings []string) (*Config, error) {
	c := &Config{Warnings: warnings, origins: make(map[string]origin)}
	var errs []error
	for _, k := range keyTable {
		o, value, err := resolveKey(k, settings)
		if o.key == "" {
			continue // no value from any source: the key's zero value stands
		}
		c.origins[k.name] = o
		if err == nil {
			err = k.set(c, value)
		}
		if err != nil {
			errs = append(errs, o.errorf("%w", err))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if err := c.finish(); err != nil {
		return nil, err
	}
	return c, nil
}

// resolveKey picks the highest-precedence member of a key's family that has a value and
// converts a synonym's value into the key's units.
func resolveKey(k *keyDef, settings layer) (origin, string, error) {
	if o, ok := settings[k.name]; ok {
		return o, strings.TrimSpace(o.value), nil
	}
	for _, s := range k.synonyms {
		o, ok := settings[s.name]
		if !ok {
			continue
		}
		v := strings.TrimSpace(o.value)
		if s.scale == 0 {
			return o, v, nil
		}
		n, err := parseInt(v, 32, s.min) // Kafka's minutes and hours keys are ints
		if err != nil {
			return o, "", err
		}
		return o, fmt.Sprint(n * s.scale), nil
	}
	return origin{}, "", nil
}

func (o origin) errorf(format string, args ...any) error {
	if o.source == sourceDefault {
		return fmt.Errorf("%s=%q (default): %w", o.key, o.value, fmt.Errorf(format, args...))
	}
	return fmt.Errorf("%s=%q (from %s): %w", o.key, o.value, o.source, fmt.Errorf(format, args...))
}
