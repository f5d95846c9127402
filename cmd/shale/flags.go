package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/shalelog/shale/client"
	"github.com/shalelog/shale/internal/flagusage"
)

// command is one subcommand's flag set with its usage text.
type command struct {
	fs       *flag.FlagSet
	synopsis string // "shale topic create --topic T [flags]"
	about    string
}

func newCommand(name, synopsis, about string) *command {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors and usage are printed by parse
	return &command{fs: fs, synopsis: synopsis, about: about}
}

// usage prints the synopsis and every flag as --name.
func (c *command) usage(w io.Writer) {
	fmt.Fprintf(w, "Usage: %s\n\n%s\n\nFlags:\n", c.synopsis, c.about)
	flagusage.Print(w, c.fs)
}

// parse parses flags, allowing positional arguments among them (shale topic create T
// --partitions 3). It prints usage for --help (returning exitOK) and an error with a hint
// for bad flags (returning exitUsage); ok is false in both cases.
func (c *command) parse(args []string, stdout, stderr io.Writer) (positional []string, code int, ok bool) {
	for {
		if err := c.fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				c.usage(stdout)
				return nil, exitOK, false
			}
			fmt.Fprintf(stderr, "%s: %v\nRun \"%s --help\" for its flags.\n", c.fs.Name(), err, c.fs.Name())
			return nil, exitUsage, false
		}
		if c.fs.NArg() == 0 {
			return positional, exitOK, true
		}
		positional = append(positional, c.fs.Arg(0))
		args = c.fs.Args()[1:]
	}
}

// usageErr reports a usage error the flag package cannot detect.
func (c *command) usageErr(stderr io.Writer, format string, args ...any) int {
	fmt.Fprintf(stderr, "%s: %s\nRun \"%s --help\" for its flags.\n", c.fs.Name(), fmt.Sprintf(format, args...), c.fs.Name())
	return exitUsage
}

// connFlags are the flags every client command shares.
type connFlags struct {
	bootstrap string
	clientID  string
	security  client.Security
}

func (cf *connFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&cf.bootstrap, "bootstrap-server", "localhost:9092", "`host:port`[,host:port...] of brokers to start from")
	fs.StringVar(&cf.clientID, "client-id", "shale-cli", "client id sent to the brokers")
	fs.Func("command-config", "Kafka client properties `file` for secured listeners: security.protocol, sasl.mechanism,\nsasl.jaas.config (or sasl.username, sasl.password), ssl.truststore.location, ssl.keystore.location (PEM)",
		func(path string) error {
			s, err := client.LoadSecurity(path)
			cf.security = s
			return err
		})
}

func (cf *connFlags) options() client.Options {
	var brokers []string
	for b := range strings.SplitSeq(cf.bootstrap, ",") {
		if b = strings.TrimSpace(b); b != "" {
			brokers = append(brokers, b)
		}
	}
	return client.Options{Brokers: brokers, ClientID: cf.clientID, DialTimeout: 5 * time.Second, Security: cf.security}
}

// keyValues is a repeatable k=v flag.
type keyValues struct {
	order []string
	m     map[string]string
}

func (kv *keyValues) String() string {
	var items []string
	for _, k := range kv.order {
		items = append(items, k+"="+kv.m[k])
	}
	return strings.Join(items, ",")
}

func (kv *keyValues) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("%q is not key=value", s)
	}
	if kv.m == nil {
		kv.m = map[string]string{}
	}
	if _, dup := kv.m[k]; !dup {
		kv.order = append(kv.order, k)
	}
	kv.m[k] = v
	return nil
}

// names is a repeatable flag whose values may also be comma-separated.
type names []string

func (n *names) String() string { return strings.Join(*n, ",") }

func (n *names) Set(s string) error {
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			*n = append(*n, item)
		}
	}
	return nil
}

// durationValue accepts a Go duration (5s, 1m30s) or, as Kafka's --timeout-ms does, a
// bare number of milliseconds.
type durationValue struct{ d *time.Duration }

func (v durationValue) String() string {
	if v.d == nil || *v.d == 0 {
		return ""
	}
	return v.d.String()
}

func (v durationValue) Set(s string) error {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		*v.d = time.Duration(ms) * time.Millisecond
	} else if d, err := time.ParseDuration(s); err == nil {
		*v.d = d
	} else {
		return fmt.Errorf("%q is not a duration (like 5s) or a number of milliseconds", s)
	}
	if *v.d < 0 {
		return fmt.Errorf("%q is negative", s)
	}
	return nil
}

// adminFlags are what the topic and group subcommands share: the connection, the names
// they act on (by a repeatable flag, or as arguments) and a timeout.
type adminFlags struct {
	conn    connFlags
	names   names
	timeout time.Duration
}

func (af *adminFlags) register(c *command, nameFlag, usage string) {
	af.conn.register(c.fs)
	c.fs.Var(&af.names, nameFlag, usage)
	af.timeout = 30 * time.Second
	c.fs.Var(durationValue{&af.timeout}, "timeout", "give up after this `duration`")
}

// setup parses flags, folds positional names in and connects.
func (af *adminFlags) setup(ctx context.Context, c *command, args []string, stdout, stderr io.Writer) (cl *client.Client, opCtx context.Context, cancel context.CancelFunc, code int, ok bool) {
	positional, code, ok := c.parse(args, stdout, stderr)
	if !ok {
		return nil, nil, nil, code, false
	}
	af.names = append(af.names, positional...)
	o := af.conn.options()
	o.RequestTimeout = af.timeout
	cl, err := client.New(o)
	if err != nil {
		return nil, nil, nil, c.usageErr(stderr, "%v", err), false
	}
	opCtx, cancel = context.WithTimeout(ctx, af.timeout)
	return cl, opCtx, cancel, exitOK, true
}

// plural formats a count with its noun: "1 partition", "3 partitions".
func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
