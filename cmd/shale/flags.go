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

// clientFlags are the connection and --timeout of every subcommand that administers a
// Kafka cluster.
type clientFlags struct {
	conn    connFlags
	timeout time.Duration
}

func (cf *clientFlags) register(fs *flag.FlagSet, timeout time.Duration) {
	cf.conn.register(fs)
	cf.timeout = timeout
	fs.Var(durationValue{&cf.timeout}, "timeout", "give up after this `duration`")
}

// withClient connects, runs op and closes the client. --timeout bounds each request and
// op as a whole. Every admin subcommand gets its client here, so that none can forget to
// close it or to bound its requests. A client that cannot be made is a usage error, since
// only the flags can be wrong before the first request.
func (cf *clientFlags) withClient(ctx context.Context, c *command, stderr io.Writer, op func(opCtx context.Context, cl *client.Client) int) int {
	o := cf.conn.options()
	o.RequestTimeout = cf.timeout
	cl, err := client.New(o)
	if err != nil {
		return c.usageErr(stderr, "%v", err)
	}
	defer cl.Close()
	opCtx, cancel := context.WithTimeout(ctx, cf.timeout)
	defer cancel()
	return op(opCtx, cl)
}

// adminFlags are what the topic, group and user subcommands share: the connection, the
// names they act on (by a repeatable flag, or as arguments) and a timeout.
type adminFlags struct {
	clientFlags
	names names
}

func (af *adminFlags) register(c *command, nameFlag, usage string) {
	af.clientFlags.register(c.fs, 30*time.Second)
	c.fs.Var(&af.names, nameFlag, usage)
}

// run parses flags, folds positional names in, and runs op with a client.
func (af *adminFlags) run(ctx context.Context, c *command, args []string, stdout, stderr io.Writer, op func(opCtx context.Context, cl *client.Client) int) int {
	positional, code, ok := c.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	af.names = append(af.names, positional...)
	return af.withClient(ctx, c, stderr, op)
}

// plural formats a count with its noun: "1 partition", "3 partitions".
func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
