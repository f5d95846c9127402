package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os/signal"
	"syscall"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shalelog/shale/bench/nullbroker"
)

const usage = `usage: shale bench <command> [flags]

Benchmarks any Kafka-compatible cluster with franz-go clients.

commands:
  produce   producers alone: records/s, MB/s, send-to-ack latency
  consume   preload a topic, then read it back: records/s, MB/s
  e2e       producers and consumers together: send-to-receive latency
  compare   run presets against a Shale node, kfake and the null broker
            (and --external clusters) in one run, with this machine's
            loopback TCP and disk limits, and print every figure with its
            ratios
  presets   list the named workloads

Run "shale bench <command> -h" for a command's flags.
`

var modeHelp = map[Mode]string{
	ModeProduce: "Producers send fixed-size records as fast as they are acknowledged, or at\n--rate records/s open loop. Latency is from (intended) send to acknowledgement.",
	ModeConsume: "The topic is first preloaded (see --preload), then consumers read it from where\nthe preload began until they reach its end, --records, or --duration.",
	ModeE2E:     "Producers and consumers run together; every record carries its intended send\ntime, and latency is measured at the consumer. Use --rate for a fixed load.",
}

const compareHelp = `Runs each preset against each target in turn, starting every target afresh
for every workload: a Shale single node (` + "`shale serve`" + ` in a temporary data
directory; skipped, with the reason, when there is no shale binary),
franz-go's kfake, the null broker (target ` + nullTargetName + `: it only assigns offsets and
keeps the batches in memory for consumers, so it is the ceiling for this
client on this machine), and any --external clusters. With --cluster (or the target
` + clusterTargetName + ` and --preset cluster) it also starts a 3-node Shale cluster (three
` + "`shale serve`" + ` processes on loopback, combined broker and controller roles)
and runs the replicated presets on it: produce with RF=1 and acks=1, produce
with RF=3, min.insync.replicas=2 and acks=all (and the ratio of the two), and
end-to-end latency on the RF=3 topic at half of its peak. First it measures this machine's limits:
loopback TCP (a plain socket pump with the presets' message sizes) and
sequential disk writes (page cache, and fsync after every 1 MiB). Then it
prints each workload's figures with their ratios, a summary table, and the
goals.`

// Main runs `shale bench <args>`; args excludes "bench". Returns the
// process exit code: 0 on success, 1 when a run failed, 2 on bad usage.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return mainWith(ctx, args, stdout, stderr, defaultSelf())
}

func mainWith(ctx context.Context, args []string, stdout, stderr io.Writer, self selfBinary) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	case string(ModeProduce), string(ModeConsume), string(ModeE2E):
		return runCommand(ctx, Mode(cmd), rest, stdout, stderr)
	case "compare":
		return compareCommand(ctx, rest, stdout, stderr, self)
	case "presets":
		return presetsCommand(rest, stdout, stderr)
	case "kfake-serve":
		return kfakeServeCommand(ctx, rest, stderr)
	case "null-serve":
		return nullServeCommand(ctx, rest, stderr)
	}
	fmt.Fprintf(stderr, "shale bench: unknown command %q\n\n%s", cmd, usage)
	return 2
}

func usageError(stderr io.Writer, cmd string, err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintf(stderr, "shale bench %s: %v\nRun \"shale bench %s --help\" for its flags.\n", cmd, err, cmd)
	return 2
}

func runCommand(ctx context.Context, mode Mode, args []string, stdout, stderr io.Writer) int {
	w, c, err := parseWorkloadArgs(mode, args, stdout)
	if err != nil {
		return usageError(stderr, string(mode), err)
	}
	opt := RunOptions{Bootstrap: splitList(c.bootstrap), Target: c.bootstrap}
	if opt.ClientOpts, err = c.security.KgoOpts(); err != nil {
		return usageError(stderr, string(mode), err)
	}
	if c.clientID != "" {
		// Appended after each client's own options, so it wins.
		opt.ClientOpts = append(opt.ClientOpts, kgo.ClientID(c.clientID))
	}
	if c.progress {
		opt.Progress = stderr
	}
	rep, err := Run(ctx, w, opt)
	if rep != nil {
		if c.json {
			if jerr := WriteJSON(stdout, rep); jerr != nil {
				fmt.Fprintf(stderr, "shale bench %s: %v\n", mode, jerr)
				return 1
			}
		} else {
			rep.WriteTable(stdout)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "shale bench %s: %v\n", mode, err)
		return 1
	}
	if rep != nil && rep.Lost > 0 {
		// An e2e run is also a round-trip check (the Helm chart's `helm test` pod).
		fmt.Fprintf(stderr, "shale bench %s: %d acknowledged records were never received\n", mode, rep.Lost)
		return 1
	}
	return 0
}

func compareCommand(ctx context.Context, args []string, stdout, stderr io.Writer, self selfBinary) int {
	f, err := parseCompareArgs(args, stdout)
	if err != nil {
		return usageError(stderr, "compare", err)
	}
	presets, err := ResolvePresets(f.presets)
	if err != nil {
		return usageError(stderr, "compare", err)
	}
	targets, skipped := buildTargets(f, self)
	if len(targets) == 0 {
		fmt.Fprintln(stderr, "shale bench compare: no target can run:")
		for _, s := range skipped {
			fmt.Fprintf(stderr, "  %s: %s\n", s.Name, s.Reason)
		}
		return 1
	}
	for _, s := range skipped {
		fmt.Fprintf(stderr, "shale bench compare: skipping %s: %s\n", s.Name, s.Reason)
	}
	cfg := compareConfig{
		presets:       presets,
		duration:      f.duration,
		warmup:        f.warmup,
		rate:          f.rate,
		targets:       targets,
		unavailable:   skipped,
		limits:        f.limits,
		probeDuration: f.probeDuration,
		diskDir:       f.diskDir,
	}
	if f.progress {
		cfg.progress = stderr
	}
	if !f.json && !f.markdown {
		cfg.out = stdout
	}
	cmp, err := runCompare(ctx, cfg)
	switch {
	case f.json:
		if jerr := WriteJSON(stdout, cmp); jerr != nil {
			fmt.Fprintf(stderr, "shale bench compare: %v\n", jerr)
			return 1
		}
	case f.markdown:
		cmp.WriteMarkdown(stdout)
	}
	for _, ts := range cmp.Targets {
		if !ts.Available {
			fmt.Fprintf(stderr, "shale bench compare: %s did not run: %s\n", ts.Name, firstLines(ts.Reason, 3))
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "shale bench compare: %v\n", err)
		return 1
	}
	return 0
}

func presetsCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("shale bench presets", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print the presets as JSON")
	if err := parseFlags(fs, args, stdout, "shale bench presets [flags]", "Lists the named workloads compare runs, and the groups of them."); err != nil {
		return usageError(stderr, "presets", err)
	}
	ps := Presets()
	if *asJSON {
		var list []Preset
		for _, n := range PresetNames() {
			list = append(list, ps[n])
		}
		if err := WriteJSON(stdout, list); err != nil {
			fmt.Fprintf(stderr, "shale bench presets: %v\n", err)
			return 1
		}
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "preset\tworkload\tsource")
	for _, n := range PresetNames() {
		p := ps[n]
		fmt.Fprintf(tw, "%s\t%s\t%s\n", n, p.Workload.Summary(), p.Source)
	}
	tw.Flush()
	fmt.Fprintln(stdout, "\ngroups for compare --preset:")
	for _, g := range sortedKeys(presetGroups) {
		fmt.Fprintf(stdout, "  %s: %d presets\n", g, len(presetGroups[g]))
	}
	return 0
}

// kfakeServeCommand is the hidden command compare starts kfake through.
func kfakeServeCommand(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("shale bench kfake-serve", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:9092", "`host:port` to listen on")
	if err := parseFlags(fs, args, stderr, "shale bench kfake-serve [flags]", "Serves franz-go's kfake, one broker, until SIGTERM (for compare)."); err != nil {
		return usageError(stderr, "kfake-serve", err)
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := serveKfake(ctx, *listen); err != nil {
		fmt.Fprintf(stderr, "shale bench kfake-serve: %v\n", err)
		return 1
	}
	return 0
}

// nullServeCommand is the hidden command compare starts the null broker
// through.
func nullServeCommand(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("shale bench null-serve", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:9092", "`host:port` to listen on")
	retain := int64(nullbroker.DefaultRetainBytes)
	fs.Var(sizeFlag(&retain), "retain-bytes", "record batches kept in memory for Fetch (`size`)")
	if err := parseFlags(fs, args, stderr, "shale bench null-serve [flags]", "Serves the null broker until SIGTERM (for compare)."); err != nil {
		return usageError(stderr, "null-serve", err)
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	log := slog.New(slog.NewTextHandler(stderr, nil))
	if err := nullbroker.Serve(ctx, nullbroker.Config{Addr: *listen, RetainBytes: retain, Logger: log}); err != nil {
		fmt.Fprintf(stderr, "shale bench null-serve: %v\n", err)
		return 1
	}
	return 0
}
