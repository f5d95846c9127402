package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/client"
)

const userUsage = `Usage: shale user <create|delete|list> [flags]

  create  --user U --password P: store SCRAM credentials (both SCRAM-SHA-256 and
          SCRAM-SHA-512 unless --mechanism says which); an existing user's are replaced
  delete  --user U: delete the user's SCRAM credentials (all mechanisms unless
          --mechanism says which)
  list    every SCRAM user (or those named) with mechanisms and iterations

Passwords are salted on this machine (KIP-554): only the salted form crosses the network.
Every subcommand takes --bootstrap-server host:port and, for secured listeners,
--command-config client.properties (as Kafka's tools do).
`

func userCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return dispatch(ctx, "user", userUsage, map[string]subcommand{
		"create": userCreate, "delete": userDelete, "list": userList,
	}, args, stdout, stderr)
}

type userFlags struct {
	adminFlags
	mechanisms names
}

func (uf *userFlags) register(c *command) {
	uf.adminFlags.register(c, "user", "user `name` (repeatable)")
	c.fs.Var(&uf.mechanisms, "mechanism", "SCRAM-SHA-256 or SCRAM-SHA-512 (repeatable; default both)")
}

func (uf *userFlags) scramMechanisms() ([]kadm.ScramMechanism, error) {
	if len(uf.mechanisms) == 0 {
		return []kadm.ScramMechanism{kadm.ScramSha256, kadm.ScramSha512}, nil
	}
	var out []kadm.ScramMechanism
	for _, m := range uf.mechanisms {
		switch strings.ToUpper(m) {
		case "SCRAM-SHA-256":
			out = append(out, kadm.ScramSha256)
		case "SCRAM-SHA-512":
			out = append(out, kadm.ScramSha512)
		default:
			return nil, fmt.Errorf("unknown mechanism %q (want SCRAM-SHA-256 or SCRAM-SHA-512)", m)
		}
	}
	return out, nil
}

func userCreate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("shale user create", "shale user create --user U (--password P | --password-file F) [flags]",
		"Stores salted SCRAM credentials for a user through the controller quorum.")
	var uf userFlags
	uf.register(c)
	password := c.fs.String("password", "", "the user's `password`")
	passwordFile := c.fs.String("password-file", "", "read the password from this `file` (first line)")
	iterations := c.fs.Int("iterations", 4096, "SCRAM iterations (4096 to 16384)")
	return uf.run(ctx, c, args, stdout, stderr, func(opCtx context.Context, cl *client.Client) int {
		if *passwordFile != "" {
			data, err := os.ReadFile(*passwordFile)
			if err != nil {
				return c.usageErr(stderr, "%v", err)
			}
			*password, _, _ = strings.Cut(string(data), "\n")
		}
		switch {
		case len(uf.names) == 0:
			return c.usageErr(stderr, "name a user with --user")
		case *password == "":
			return c.usageErr(stderr, "give a password with --password or --password-file")
		}
		mechs, err := uf.scramMechanisms()
		if err != nil {
			return c.usageErr(stderr, "%v", err)
		}
		var upserts []kadm.UpsertSCRAM
		for _, u := range uf.names {
			for _, m := range mechs {
				upserts = append(upserts, kadm.UpsertSCRAM{User: u, Mechanism: m, Iterations: int32(*iterations), Password: *password})
			}
		}
		altered, err := cl.Admin().AlterUserSCRAMs(opCtx, nil, upserts)
		return reportAltered(c, altered, err, "created", stdout, stderr)
	})
}

func userDelete(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("shale user delete", "shale user delete --user U [flags]", "Deletes a user's SCRAM credentials.")
	var uf userFlags
	uf.register(c)
	return uf.run(ctx, c, args, stdout, stderr, func(opCtx context.Context, cl *client.Client) int {
		if len(uf.names) == 0 {
			return c.usageErr(stderr, "name a user with --user")
		}
		var dels []kadm.DeleteSCRAM
		if len(uf.mechanisms) == 0 {
			// Whatever the user has.
			described, err := cl.Admin().DescribeUserSCRAMs(opCtx, uf.names...)
			if err != nil {
				return failed(stderr, c.fs.Name(), err)
			}
			for _, u := range uf.names {
				d := described[u]
				if d.Err != nil {
					fmt.Fprintf(stderr, "%s: %s: %v\n", c.fs.Name(), u, d.Err)
					return exitFailed
				}
				for _, ci := range d.CredInfos {
					dels = append(dels, kadm.DeleteSCRAM{User: u, Mechanism: ci.Mechanism})
				}
			}
		} else {
			mechs, err := uf.scramMechanisms()
			if err != nil {
				return c.usageErr(stderr, "%v", err)
			}
			for _, u := range uf.names {
				for _, m := range mechs {
					dels = append(dels, kadm.DeleteSCRAM{User: u, Mechanism: m})
				}
			}
		}
		altered, err := cl.Admin().AlterUserSCRAMs(opCtx, dels, nil)
		return reportAltered(c, altered, err, "deleted", stdout, stderr)
	})
}

func reportAltered(c *command, altered kadm.AlteredUserSCRAMs, err error, verb string, stdout, stderr io.Writer) int {
	if err != nil {
		return failed(stderr, c.fs.Name(), err)
	}
	code := exitOK
	for _, a := range altered.Sorted() {
		if a.Err != nil {
			fmt.Fprintf(stderr, "%s: %s: %v\n", c.fs.Name(), a.User, a.Err)
			code = exitFailed
			continue
		}
		fmt.Fprintf(stdout, "%s user %s\n", verb, a.User)
	}
	return code
}

func userList(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("shale user list", "shale user list [--user U]... [flags]", "Lists SCRAM users with their mechanisms and iterations.")
	var uf userFlags
	uf.register(c)
	return uf.run(ctx, c, args, stdout, stderr, func(opCtx context.Context, cl *client.Client) int {
		described, err := cl.Admin().DescribeUserSCRAMs(opCtx, uf.names...)
		if err != nil {
			return failed(stderr, c.fs.Name(), err)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "USER\tMECHANISM\tITERATIONS")
		code := exitOK
		for _, d := range described.Sorted() {
			if d.Err != nil {
				if errors.Is(d.Err, kerr.ResourceNotFound) {
					fmt.Fprintf(stderr, "%s: no such user: %s\n", c.fs.Name(), d.User)
				} else {
					fmt.Fprintf(stderr, "%s: %s: %v\n", c.fs.Name(), d.User, d.Err)
				}
				code = exitFailed
				continue
			}
			for _, ci := range d.CredInfos {
				fmt.Fprintf(tw, "%s\t%s\t%d\n", d.User, ci.Mechanism, ci.Iterations)
			}
		}
		tw.Flush()
		return code
	})
}
