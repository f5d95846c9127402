package main

import (
	"context"
	"fmt"
	"io"
)

// subcommand runs one subcommand with the arguments after its name.
type subcommand func(ctx context.Context, args []string, stdout, stderr io.Writer) int

// dispatch runs the subcommand args[0] of command name; none, help, or an unknown one
// prints usage (to stdout only when help was asked for).
func dispatch(ctx context.Context, name, usage string, subs map[string]subcommand, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	sub, rest := args[0], args[1:]
	if run, ok := subs[sub]; ok {
		return run(ctx, rest, stdout, stderr)
	}
	switch sub {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	fmt.Fprintf(stderr, "shale %s: unknown subcommand %q\n\n%s", name, sub, usage)
	return exitUsage
}

// named passes the subcommand's own name to a run shared by several subcommands.
func named(sub string, run func(ctx context.Context, sub string, args []string, stdout, stderr io.Writer) int) subcommand {
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) int {
		return run(ctx, sub, args, stdout, stderr)
	}
}
