// Command shale is Shale's one binary: it runs a node (serve) and holds the tools that
// work against any Kafka cluster: topic administration, a line producer and consumer,
// and the benchmarks.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"syscall"

	"github.com/shalelog/shale/bench"
)

// version is set at link time (-ldflags "-X main.version=v1.2.3"); otherwise the
// module version or VCS revision from the build info is reported.
var version = ""

// Exit codes, as bench uses them too.
const (
	exitOK      = 0
	exitFailed  = 1 // the operation failed
	exitUsage   = 2 // bad flags or arguments
	usageHeader = `Usage: shale <command> [flags]

Commands:
  serve       run a Shale node (broker and/or controller)
  topic       create, list, describe, delete or alter topics
  group       list, describe (with lag), delete consumer groups, reset their offsets
  acl         add, remove or list ACLs
  quota       set, remove or list client quotas
  client-metrics  set, delete or list client metrics subscriptions (KIP-714)
  user        create, delete or list SCRAM users
  schema      list, get, register, check or delete schemas in a schema registry; its config
  controller  add, remove or list the controller quorum's voters
  broker      drain a broker of its replicas, or unregister it
  cluster     rebalance replicas and leaders over the brokers
  link        cluster links and mirror topics: create, describe, delete, mirror, promote, failover
  produce     send lines from stdin as records
  consume     print records as lines
  bench       benchmark a Kafka-compatible cluster
  version     print the version
  help        print help for a command

The topic, group, acl, quota, produce, consume and bench commands work against any Kafka cluster,
schema against any registry with Confluent's API.
Run "shale help <command>" or "shale <command> --help" for a command's flags.
`
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second signal kills the process at once
	}()
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one command line and returns the exit code. ctx ends on SIGINT/SIGTERM.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usageHeader)
		return exitUsage
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "serve":
		return serveCommand(ctx, rest, os.Environ(), stdout, stderr)
	case "topic", "topics":
		return topicCommand(ctx, rest, stdout, stderr)
	case "group", "groups":
		return groupCommand(ctx, rest, stdout, stderr)
	case "acl", "acls":
		return aclCommand(ctx, rest, stdout, stderr)
	case "quota", "quotas":
		return quotaCommand(ctx, rest, stdout, stderr)
	case "client-metrics":
		return clientMetricsCommand(ctx, rest, stdout, stderr)
	case "user", "users":
		return userCommand(ctx, rest, stdout, stderr)
	case "schema", "schemas":
		return schemaCommand(ctx, rest, stdin, stdout, stderr)
	case "controller", "controllers":
		return controllerCommand(ctx, rest, stdout, stderr)
	case "broker", "brokers":
		return brokerCommand(ctx, rest, stdout, stderr)
	case "cluster":
		return clusterCommand(ctx, rest, stdout, stderr)
	case "link", "links":
		return linkCommand(ctx, rest, stdout, stderr)
	case "produce":
		return produceCommand(ctx, rest, stdin, stdout, stderr)
	case "consume":
		return consumeCommand(ctx, rest, stdout, stderr)
	case "bench":
		return bench.Main(ctx, rest, stdout, stderr)
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, versionString())
		return exitOK
	case "help", "-h", "-help", "--help":
		return helpCommand(ctx, rest, stdout, stderr)
	}
	fmt.Fprintf(stderr, "shale: unknown command %q\n\n%s", cmd, usageHeader)
	return exitUsage
}

func helpCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stdout, usageHeader)
		return exitOK
	}
	switch args[0] {
	case "serve", "topic", "topics", "group", "groups", "acl", "acls", "quota", "quotas", "user", "users", "schema", "schemas", "produce", "consume", "bench",
		"client-metrics", "controller", "controllers", "broker", "brokers", "cluster", "link", "links":
		return run(ctx, []string{args[0], "--help"}, nil, stdout, stderr)
	case "version", "help":
		fmt.Fprint(stdout, usageHeader)
		return exitOK
	}
	fmt.Fprintf(stderr, "shale help: unknown command %q\n\n%s", args[0], usageHeader)
	return exitUsage
}

func versionString() string {
	v, rev := version, ""
	if info, ok := debug.ReadBuildInfo(); ok {
		if v == "" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			v = info.Main.Version
		}
		modified := false
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if rev != "" && modified {
			rev += "-dirty"
		}
	}
	if v == "" {
		v = "dev"
	}
	s := "shale " + v
	if rev != "" {
		s += " (" + rev + ")"
	}
	return s + " " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH
}
