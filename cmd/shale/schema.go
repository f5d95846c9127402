package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
)

const schemaUsage = `Usage: shale schema <list|get|register|check|delete|config> [flags]

  list      subjects [--prefix P] [--deleted]; with --subject S, its versions and ids
  get       --subject S [--version V] (default latest), or --id N; --schema-only
            prints the schema text alone
  register  --subject S [--type AVRO|PROTOBUF|JSON] [--file F] (default stdin)
            [--reference name=subject:version]...
  check     --subject S [--version V | --all] with the schema as register takes it:
            prints whether it is compatible and why not
  delete    --subject S [--version V] [--permanent] (a live subject or version is
            soft-deleted first, as the registry requires)
  config    [--subject S]: prints the compatibility level and mode; sets them with
            [--compatibility LEVEL] [--mode MODE [--force]]; --reset removes the
            subject's own (or the global level)

The registry is any Confluent Schema Registry API, Shale's own by default. Every
subcommand takes --registry-url URL (default http://127.0.0.1:8081), --user and
--password for HTTP basic authentication, and --ca-file PEM (--cert-file and
--key-file for mutual TLS) for an https listener. Subjects may also be given as an
argument.

Exit status: 0 done (and compatible); 1 failed, with the registry's error printed as
NAME (error_code): message; 2 bad flags; 3 the schema is incompatible (check, or a
register the registry refused with 409).
`

// exitIncompatible is what check and register exit with when the registry finds the
// schema incompatible, so that a script can tell it from a registry it cannot reach.
const exitIncompatible = 3

func schemaCommand(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	withStdin := func(run func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int) subcommand {
		return func(ctx context.Context, args []string, stdout, stderr io.Writer) int {
			return run(ctx, args, stdin, stdout, stderr)
		}
	}
	return dispatch(ctx, "schema", schemaUsage, map[string]subcommand{
		"list": schemaList, "get": schemaGet, "register": withStdin(schemaRegister), "check": withStdin(schemaCheck),
		"delete": schemaDelete, "config": schemaConfig,
	}, args, stdout, stderr)
}

// registryFlags are what every schema subcommand shares: where the registry is, how to
// log in to it, and the subject acted on.
type registryFlags struct {
	url                       string
	user, password            string
	caFile, certFile, keyFile string
	timeout                   time.Duration
	subject                   string
}

func (rf *registryFlags) register(c *command) {
	c.fs.StringVar(&rf.url, "registry-url", "http://127.0.0.1:8081", "schema registry `URL`s (comma-separated: tried in turn)")
	c.fs.StringVar(&rf.user, "user", "", "`name` for HTTP basic authentication (a SASL PLAIN or SCRAM user on Shale)")
	c.fs.StringVar(&rf.password, "password", "", "`password` for HTTP basic authentication")
	c.fs.StringVar(&rf.caFile, "ca-file", "", "PEM `file` of the CA certificates to trust for https (default: the system's)")
	c.fs.StringVar(&rf.certFile, "cert-file", "", "PEM `file` of a client certificate for mutual TLS")
	c.fs.StringVar(&rf.keyFile, "key-file", "", "PEM `file` of the client certificate's private key")
	rf.timeout = 30 * time.Second
	c.fs.Var(durationValue{&rf.timeout}, "timeout", "give up after this `duration`")
	c.fs.StringVar(&rf.subject, "subject", "", "subject `name`")
}

// run parses the flags, takes one positional argument as the subject, builds the client
// and runs op with a context that --timeout bounds.
func (rf *registryFlags) run(ctx context.Context, c *command, args []string, stdout, stderr io.Writer, op func(opCtx context.Context, cl *sr.Client) int) int {
	positional, code, ok := c.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	switch {
	case len(positional) > 1:
		return c.usageErr(stderr, "unexpected argument %q", positional[1])
	case len(positional) == 1 && rf.subject != "" && rf.subject != positional[0]:
		return c.usageErr(stderr, "two subjects: --subject %q and %q", rf.subject, positional[0])
	case len(positional) == 1:
		rf.subject = positional[0]
	}
	cl, err := rf.client()
	if err != nil {
		return c.usageErr(stderr, "%v", err)
	}
	opCtx, cancel := context.WithTimeout(ctx, rf.timeout)
	defer cancel()
	return op(opCtx, cl)
}

func (rf *registryFlags) client() (*sr.Client, error) {
	var urls []string
	for u := range strings.SplitSeq(rf.url, ",") {
		if u = strings.TrimSpace(u); u == "" {
			continue
		}
		if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return nil, fmt.Errorf("--registry-url %q is not an http:// or https:// URL", u)
		}
		urls = append(urls, u)
	}
	if len(urls) == 0 {
		return nil, errors.New("--registry-url is empty")
	}
	opts := []sr.ClientOpt{sr.URLs(urls...), sr.UserAgent("shale-cli"), sr.HTTPClient(&http.Client{Timeout: rf.timeout})}
	if rf.user != "" || rf.password != "" {
		if rf.user == "" {
			return nil, errors.New("--password needs --user")
		}
		opts = append(opts, sr.BasicAuth(rf.user, rf.password))
	}
	if rf.caFile != "" || rf.certFile != "" || rf.keyFile != "" {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if rf.caFile != "" {
			pem, err := os.ReadFile(rf.caFile)
			if err != nil {
				return nil, fmt.Errorf("--ca-file: %w", err)
			}
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("--ca-file %s holds no PEM certificate", rf.caFile)
			}
		}
		if (rf.certFile == "") != (rf.keyFile == "") {
			return nil, errors.New("--cert-file and --key-file go together")
		}
		if rf.certFile != "" {
			cert, err := tls.LoadX509KeyPair(rf.certFile, rf.keyFile)
			if err != nil {
				return nil, fmt.Errorf("client certificate: %w", err)
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
		opts = append(opts, sr.DialTLSConfig(cfg))
	}
	cl, err := sr.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("schema registry client: %w", err)
	}
	return cl, nil
}

// registryFailed prints err, a registry's answer as Confluent's error name, code and
// message, and returns the exit code: exitIncompatible for 409, exitFailed otherwise.
func registryFailed(stderr io.Writer, name string, err error) int {
	var re *sr.ResponseError
	if !errors.As(err, &re) {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return exitFailed
	}
	switch {
	case re.ErrorCode != 0:
		errName := "ERROR"
		if se := re.SchemaError(); se != nil && se != sr.ErrUnknown {
			errName = se.Name
		} else if re.ErrorCode == 409 {
			errName = "INCOMPATIBLE_SCHEMA"
		}
		fmt.Fprintf(stderr, "%s: %s (%d): %s\n", name, errName, re.ErrorCode, re.Message)
	default:
		// Not Confluent's error body: a proxy, or an authentication refusal.
		body := string(re.Raw)
		if len(body) > 300 {
			body = body[:300] + "..."
		}
		fmt.Fprintf(stderr, "%s: HTTP %d %s from %s %s: %s\n", name, re.StatusCode, http.StatusText(re.StatusCode), re.Method, re.URL, body)
	}
	if re.ErrorCode == 409 || re.ErrorCode == 0 && re.StatusCode == http.StatusConflict {
		return exitIncompatible
	}
	return exitFailed
}

// errorCode is the Confluent error code of a registry answer, 0 for other errors.
func errorCode(err error) int {
	var re *sr.ResponseError
	if errors.As(err, &re) {
		return re.ErrorCode
	}
	return 0
}

// versionFlag is a subject version: a number or "latest" (-1).
type versionFlag struct{ v *int }

func (f versionFlag) String() string {
	if f.v == nil || *f.v == 0 {
		return ""
	}
	if *f.v == -1 {
		return "latest"
	}
	return strconv.Itoa(*f.v)
}

func (f versionFlag) Set(s string) error {
	if s == "latest" || s == "-1" {
		*f.v = -1
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 1<<31-1 {
		return fmt.Errorf("%q is not a version (a number from 1, or latest)", s)
	}
	*f.v = n
	return nil
}

func schemaList(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("shale schema list", "shale schema list [--prefix P] [--deleted] | --subject S",
		"Prints the registry's subjects, one a line; with --subject, the subject's versions\nwith their schema ids and types.")
	var rf registryFlags
	rf.register(c)
	prefix := c.fs.String("prefix", "", "only subjects whose names start with this `prefix`")
	deleted := c.fs.Bool("deleted", false, "include soft-deleted subjects (or versions)")
	return rf.run(ctx, c, args, stdout, stderr, func(opCtx context.Context, cl *sr.Client) int {
		var params []sr.Param
		if *deleted {
			params = append(params, sr.ShowDeleted)
		}
		if rf.subject == "" {
			if *prefix != "" {
				params = append(params, sr.SubjectPrefix(*prefix))
			}
			subjects, err := cl.Subjects(sr.WithParams(opCtx, params...))
			if err != nil {
				return registryFailed(stderr, c.fs.Name(), err)
			}
			for _, s := range subjects {
				// The registry filters by prefix already; filtering again keeps the
				// flag's meaning with a registry that ignores subjectPrefix.
				if strings.HasPrefix(s, *prefix) {
					fmt.Fprintln(stdout, s)
				}
			}
			return exitOK
		}
		if *prefix != "" {
			return c.usageErr(stderr, "--prefix lists subjects; it does not go with --subject")
		}
		pctx := sr.WithParams(opCtx, params...)
		versions, err := cl.SubjectVersions(pctx, rf.subject)
		if err != nil {
			return registryFailed(stderr, c.fs.Name(), err)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "VERSION\tID\tTYPE\tREFERENCES")
		for _, v := range versions {
			ss, err := cl.SchemaByVersion(pctx, rf.subject, v)
			if err != nil {
				tw.Flush()
				return registryFailed(stderr, c.fs.Name(), err)
			}
			fmt.Fprintf(tw, "%d\t%d\t%s\t%s\n", ss.Version, ss.ID, ss.Type, formatRefs(ss.References))
		}
		tw.Flush()
		return exitOK
	})
}

func formatRefs(refs []sr.SchemaReference) string {
	var out []string
	for _, r := range refs {
		out = append(out, fmt.Sprintf("%s=%s:%d", r.Name, r.Subject, r.Version))
	}
	return strings.Join(out, ",")
}

func schemaGet(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("shale schema get", "shale schema get --subject S [--version V] | --id N",
		"Prints a subject's version (the latest by default) or the schema with an id: a line\nof what it is, its references, then the schema text.")
	var rf registryFlags
	rf.register(c)
	version := -1
	c.fs.Var(versionFlag{&version}, "version", "subject `version`: a number or latest (default latest)")
	id := c.fs.Int("id", 0, "schema `id` (instead of --subject)")
	deleted := c.fs.Bool("deleted", false, "also find a soft-deleted version")
	schemaOnly := c.fs.Bool("schema-only", false, "print the schema text alone (what register and check take)")
	return rf.run(ctx, c, args, stdout, stderr, func(opCtx context.Context, cl *sr.Client) int {
		if (rf.subject == "") == (*id == 0) {
			return c.usageErr(stderr, "name a subject (--subject) or a schema id (--id), not both")
		}
		if *deleted {
			opCtx = sr.WithParams(opCtx, sr.ShowDeleted)
		}
		var (
			s      sr.Schema
			header string
		)
		if *id != 0 {
			if *id < 0 {
				return c.usageErr(stderr, "--id %d is not a schema id", *id)
			}
			var err error
			if s, err = cl.SchemaByID(opCtx, *id); err != nil {
				return registryFailed(stderr, c.fs.Name(), err)
			}
			uses, err := cl.SchemaVersionsByID(opCtx, *id)
			if err != nil {
				return registryFailed(stderr, c.fs.Name(), err)
			}
			var used []string
			for _, u := range uses {
				used = append(used, fmt.Sprintf("%s/%d", u.Subject, u.Version))
			}
			header = fmt.Sprintf("ID: %d\tType: %s\tVersions: %s", *id, s.Type, strings.Join(used, ","))
		} else {
			ss, err := cl.SchemaByVersion(opCtx, rf.subject, version)
			if err != nil {
				return registryFailed(stderr, c.fs.Name(), err)
			}
			s = ss.Schema
			header = fmt.Sprintf("Subject: %s\tVersion: %d\tID: %d\tType: %s", ss.Subject, ss.Version, ss.ID, ss.Type)
		}
		if !*schemaOnly {
			fmt.Fprintln(stdout, header)
			for _, r := range s.References {
				fmt.Fprintf(stdout, "Reference: %s=%s:%d\n", r.Name, r.Subject, r.Version)
			}
		}
		fmt.Fprintln(stdout, strings.TrimRight(s.Schema, "\n"))
		return exitOK
	})
}

// schemaInput is how register and check take a schema: its type, text and references.
type schemaInput struct {
	typ  string
	file string
	refs names // name=subject:version
}

func (si *schemaInput) register(c *command) {
	c.fs.StringVar(&si.typ, "type", "AVRO", "schema `type`: AVRO, PROTOBUF or JSON")
	c.fs.StringVar(&si.file, "file", "", "`file` to read the schema from (none or -: standard input)")
	c.fs.Func("reference", "schema reference `name=subject:version` (repeatable; version may be latest):\nthe Avro type, Protobuf import or JSON Schema $ref name the schema uses",
		func(s string) error { si.refs = append(si.refs, s); return nil })
}

// schema reads the schema and resolves its references; a usage problem is returned as
// usage, a registry error as err.
func (si *schemaInput) schema(ctx context.Context, cl *sr.Client, stdin io.Reader) (s sr.Schema, usage, err error) {
	if err := s.Type.UnmarshalText([]byte(si.typ)); err != nil || si.typ == "" {
		return s, fmt.Errorf("--type %q is not AVRO, PROTOBUF or JSON", si.typ), nil
	}
	var text []byte
	if si.file == "" || si.file == "-" {
		if stdin == nil {
			return s, errors.New("no schema: give --file or pipe it to standard input"), nil
		}
		text, err = io.ReadAll(io.LimitReader(stdin, 16<<20))
	} else {
		text, err = os.ReadFile(si.file)
	}
	if err != nil {
		return s, fmt.Errorf("read the schema: %w", err), nil
	}
	if strings.TrimSpace(string(text)) == "" {
		return s, errors.New("the schema is empty: give --file or pipe it to standard input"), nil
	}
	s.Schema = string(text)
	for _, ref := range si.refs {
		name, target, ok := strings.Cut(ref, "=")
		// The version follows the last colon: Protobuf import names and JSON Schema
		// $ref URLs hold colons of their own, subjects rarely do.
		i := strings.LastIndexByte(target, ':')
		if !ok || name == "" || i <= 0 {
			return s, fmt.Errorf("--reference %q is not name=subject:version", ref), nil
		}
		subject, vs := target[:i], target[i+1:]
		v := 0
		if err := (versionFlag{&v}).Set(vs); err != nil {
			return s, fmt.Errorf("--reference %q: %w", ref, err), nil
		}
		if v == -1 {
			// References name fixed versions; latest is resolved here, once.
			ss, err := cl.SchemaByVersion(ctx, subject, -1)
			if err != nil {
				return s, nil, fmt.Errorf("reference %s: %w", name, err)
			}
			v = ss.Version
		}
		s.References = append(s.References, sr.SchemaReference{Name: name, Subject: subject, Version: v})
	}
	return s, nil, nil
}

func schemaRegister(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := newCommand("shale schema register", "shale schema register --subject S [--type T] [--file F] [--reference name=subject:version]...",
		"Registers a schema under a subject and prints its version and id. A schema the subject\nalready has is not registered again: its version and id are printed. The registry\nrefuses one incompatible with the subject's compatibility level (exit status 3).")
	var rf registryFlags
	rf.register(c)
	var in schemaInput
	in.register(c)
	id := c.fs.Int("id", 0, "register under this schema `id` (the registry or subject must be in IMPORT mode)")
	version := c.fs.Int("version", 0, "register as this `version` (with --id, in IMPORT mode)")
	return rf.run(ctx, c, args, stdout, stderr, func(opCtx context.Context, cl *sr.Client) int {
		if rf.subject == "" {
			return c.usageErr(stderr, "name the subject with --subject")
		}
		if *id < 0 || *version < 0 || *version != 0 && *id == 0 {
			return c.usageErr(stderr, "--version goes with --id, both positive")
		}
		s, usage, err := in.schema(opCtx, cl, stdin)
		if usage != nil {
			return c.usageErr(stderr, "%v", usage)
		}
		if err != nil {
			return registryFailed(stderr, c.fs.Name(), err)
		}
		regID, regVersion := -1, -1
		if *id != 0 {
			regID = *id
			if *version != 0 {
				regVersion = *version
			}
		}
		if _, err := cl.RegisterSchema(opCtx, rf.subject, s, regID, regVersion); err != nil {
			return registryFailed(stderr, c.fs.Name(), err)
		}
		// The registration answers with the id alone; the lookup gives the version too.
		ss, err := cl.LookupSchema(opCtx, rf.subject, s)
		if err != nil {
			return registryFailed(stderr, c.fs.Name(), err)
		}
		fmt.Fprintf(stdout, "Subject %s version %d: schema id %d.\n", ss.Subject, ss.Version, ss.ID)
		return exitOK
	})
}

func schemaCheck(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := newCommand("shale schema check", "shale schema check --subject S [--version V | --all] [--type T] [--file F] [--reference name=subject:version]...",
		"Asks the registry whether a schema is compatible with a subject's version (the latest\nby default) under the subject's compatibility level, or with --all with the versions\nthe level names (all of them for the transitive levels). Prints \"compatible\" or\n\"incompatible\" and the registry's reasons; exits 3 when incompatible.")
	var rf registryFlags
	rf.register(c)
	var in schemaInput
	in.register(c)
	version := -1
	c.fs.Var(versionFlag{&version}, "version", "subject `version` to check against: a number or latest (default latest)")
	all := c.fs.Bool("all", false, "check against the versions the compatibility level names, not one")
	return rf.run(ctx, c, args, stdout, stderr, func(opCtx context.Context, cl *sr.Client) int {
		if rf.subject == "" {
			return c.usageErr(stderr, "name the subject with --subject")
		}
		against := version
		if *all {
			if version != -1 {
				return c.usageErr(stderr, "--all and --version exclude each other")
			}
			against = -2 // franz-go's "all versions": POST /compatibility/subjects/{s}/versions
		}
		s, usage, err := in.schema(opCtx, cl, stdin)
		if usage != nil {
			return c.usageErr(stderr, "%v", usage)
		}
		if err != nil {
			return registryFailed(stderr, c.fs.Name(), err)
		}
		res, err := cl.CheckCompatibility(sr.WithParams(opCtx, sr.Verbose), rf.subject, against, s)
		if err != nil {
			return registryFailed(stderr, c.fs.Name(), err)
		}
		if res.Is {
			fmt.Fprintln(stdout, "compatible")
			return exitOK
		}
		fmt.Fprintln(stdout, "incompatible")
		for _, m := range res.Messages {
			fmt.Fprintf(stdout, "  %s\n", m)
		}
		return exitIncompatible
	})
}

func schemaDelete(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("shale schema delete", "shale schema delete --subject S [--version V] [--permanent]",
		"Deletes a subject (all its versions) or one version. A soft delete keeps the schemas\nreadable by id (records carry them) and the versions listable with --deleted;\n--permanent removes them for good, soft-deleting first what is still live.")
	var rf registryFlags
	rf.register(c)
	version := 0
	c.fs.Var(versionFlag{&version}, "version", "delete only this `version`: a number or latest")
	permanent := c.fs.Bool("permanent", false, "delete for good (hard delete)")
	return rf.run(ctx, c, args, stdout, stderr, func(opCtx context.Context, cl *sr.Client) int {
		if rf.subject == "" {
			return c.usageErr(stderr, "name the subject with --subject")
		}
		how, what := sr.SoftDelete, "Soft-deleted"
		if *permanent {
			how, what = sr.HardDelete, "Permanently deleted"
		}
		if version != 0 {
			v := version
			if v == -1 {
				// Resolve latest first, so that a permanent delete after the soft one
				// deletes the same version and not the one that became latest.
				ss, err := cl.SchemaByVersion(opCtx, rf.subject, -1)
				if err != nil {
					return registryFailed(stderr, c.fs.Name(), err)
				}
				v = ss.Version
			}
			err := cl.DeleteSchema(opCtx, rf.subject, v, how)
			if *permanent && errorCode(err) == 40407 { // VERSION_NOT_SOFT_DELETED
				if err = cl.DeleteSchema(opCtx, rf.subject, v, sr.SoftDelete); err == nil {
					err = cl.DeleteSchema(opCtx, rf.subject, v, sr.HardDelete)
				}
			}
			if err != nil {
				return registryFailed(stderr, c.fs.Name(), err)
			}
			fmt.Fprintf(stdout, "%s version %d of %s.\n", what, v, rf.subject)
			return exitOK
		}
		versions, err := cl.DeleteSubject(opCtx, rf.subject, how)
		if *permanent && errorCode(err) == 40405 { // SUBJECT_NOT_SOFT_DELETED
			if _, err = cl.DeleteSubject(opCtx, rf.subject, sr.SoftDelete); err == nil {
				versions, err = cl.DeleteSubject(opCtx, rf.subject, sr.HardDelete)
			}
		}
		if err != nil {
			return registryFailed(stderr, c.fs.Name(), err)
		}
		vs := make([]string, len(versions))
		for i, v := range versions {
			vs[i] = strconv.Itoa(v)
		}
		noun := "versions"
		if len(vs) == 1 {
			noun = "version"
		}
		fmt.Fprintf(stdout, "%s %s: %s %s.\n", what, rf.subject, noun, strings.Join(vs, ", "))
		return exitOK
	})
}

func schemaConfig(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("shale schema config", "shale schema config [--subject S] [--compatibility LEVEL] [--mode MODE [--force]] [--reset]",
		"Prints the compatibility level and mode of the registry, or of a subject (marked\n\"(global)\" where the subject has none of its own). With --compatibility or --mode, sets\nthem first; --reset removes the subject's own level and mode, or resets the global\nlevel to BACKWARD. Levels: NONE, BACKWARD, BACKWARD_TRANSITIVE, FORWARD,\nFORWARD_TRANSITIVE, FULL, FULL_TRANSITIVE. Modes: READWRITE, READONLY, IMPORT.")
	var rf registryFlags
	rf.register(c)
	level := c.fs.String("compatibility", "", "set the compatibility `level`")
	mode := c.fs.String("mode", "", "set the `mode`")
	force := c.fs.Bool("force", false, "with --mode IMPORT: even though the registry (subject) has schemas")
	reset := c.fs.Bool("reset", false, "remove the subject's own level and mode (the global level without --subject)")
	return rf.run(ctx, c, args, stdout, stderr, func(opCtx context.Context, cl *sr.Client) int {
		if *reset && (*level != "" || *mode != "") {
			return c.usageErr(stderr, "--reset does not go with --compatibility or --mode")
		}
		if *force && !strings.EqualFold(*mode, "IMPORT") {
			return c.usageErr(stderr, "--force goes with --mode IMPORT")
		}
		configPath, modePath := "/config", "/mode"
		if rf.subject != "" {
			configPath += "/" + url.PathEscape(rf.subject)
			modePath += "/" + url.PathEscape(rf.subject)
		}
		// Raw requests rather than franz-go's typed ones: those map levels and modes onto
		// enums, which would refuse a value this client does not know before the registry
		// could say what it accepts.
		if *level != "" {
			if err := cl.Do(opCtx, http.MethodPut, configPath, map[string]string{"compatibility": strings.ToUpper(*level)}, nil); err != nil {
				return registryFailed(stderr, c.fs.Name(), err)
			}
		}
		if *mode != "" {
			mctx := opCtx
			if *force {
				mctx = sr.WithParams(mctx, sr.Force)
			}
			if err := cl.Do(mctx, http.MethodPut, modePath, map[string]string{"mode": strings.ToUpper(*mode)}, nil); err != nil {
				return registryFailed(stderr, c.fs.Name(), err)
			}
		}
		if *reset {
			if err := cl.Do(opCtx, http.MethodDelete, configPath, nil, nil); err != nil && errorCode(err) != 40408 { // SUBJECT_LEVEL_COMPATIBILITY_NOT_CONFIGURED
				return registryFailed(stderr, c.fs.Name(), err)
			}
			if rf.subject != "" {
				if err := cl.Do(opCtx, http.MethodDelete, modePath, nil, nil); err != nil && errorCode(err) != 40409 { // SUBJECT_LEVEL_MODE_NOT_CONFIGURED
					return registryFailed(stderr, c.fs.Name(), err)
				}
			}
		}

		// get reads a subject's own setting, falling back to the global one (marked) when it
		// has none.
		get := func(path, field string, notSet int) (string, error) {
			var out map[string]any
			err := cl.Do(opCtx, http.MethodGet, path, nil, &out)
			inherited := ""
			if rf.subject != "" && errorCode(err) == notSet {
				inherited = " (global)"
				err = cl.Do(sr.WithParams(opCtx, sr.DefaultToGlobal), http.MethodGet, path, nil, &out)
			}
			if err != nil {
				return "", err
			}
			v, _ := out[field].(string)
			return v + inherited, nil
		}
		lv, err := get(configPath, "compatibilityLevel", 40408)
		if err != nil {
			return registryFailed(stderr, c.fs.Name(), err)
		}
		md, err := get(modePath, "mode", 40409)
		if err != nil {
			return registryFailed(stderr, c.fs.Name(), err)
		}
		if rf.subject != "" {
			fmt.Fprintf(stdout, "Subject: %s\n", rf.subject)
		}
		fmt.Fprintf(stdout, "Compatibility: %s\nMode: %s\n", lv, md)
		return exitOK
	})
}
