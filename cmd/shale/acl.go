package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/client"
	"github.com/shalelog/shale/security/acl"
)

const aclUsage = `Usage: shale acl <add|remove|list> [flags]

  add     --allow-principal P | --deny-principal P, --operation OP, a resource
  remove  the bindings matching the flags (principal, host, operation optional)
  list    the bindings matching the flags (everything without flags)

Resources: --topic T, --group G, --transactional-id X (each repeatable), --cluster;
the schema registry's --subject S (repeatable) and --registry (Shale's own SUBJECT and
REGISTRY types; see README "Schema registry");
--resource-pattern-type literal|prefixed (add, remove; default literal) or also any|match
(list, remove; list defaults to any). Principals are Kafka's Type:name (User:alice,
User:* for everyone); hosts are IP addresses or * (the default). Operations: ALL, READ,
WRITE, CREATE, DELETE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS,
ALTER_CONFIGS, IDEMPOTENT_WRITE. The broker needs authorizer.class.name set; changing
ACLs needs ALTER on the cluster, listing them DESCRIBE (or a super user).
Every subcommand takes --bootstrap-server host:port (default localhost:9092).
`

func aclCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return dispatch(ctx, "acl", aclUsage, map[string]subcommand{
		"add": named("add", aclRun), "remove": named("remove", aclRun), "list": named("list", aclRun),
	}, args, stdout, stderr)
}

// aclFlags are the flags of every acl subcommand.
type aclFlags struct {
	clientFlags
	topics, groups, txnIDs          names
	subjects                        names
	cluster, registry               bool
	pattern                         string
	allowPrincipals, denyPrincipals names
	allowHosts, denyHosts           names
	principals, hosts               names // list's filters
	operations                      names
}

// resource is one resource the flags name.
type aclResource struct {
	typ  kmsg.ACLResourceType
	name string
}

func (f *aclFlags) resources() []aclResource {
	var out []aclResource
	for _, t := range f.topics {
		out = append(out, aclResource{kmsg.ACLResourceTypeTopic, t})
	}
	for _, g := range f.groups {
		out = append(out, aclResource{kmsg.ACLResourceTypeGroup, g})
	}
	for _, x := range f.txnIDs {
		out = append(out, aclResource{kmsg.ACLResourceTypeTransactionalId, x})
	}
	if f.cluster {
		out = append(out, aclResource{kmsg.ACLResourceTypeCluster, acl.ClusterName})
	}
	for _, s := range f.subjects {
		out = append(out, aclResource{acl.ResourceTypeSubject, s})
	}
	if f.registry {
		out = append(out, aclResource{acl.ResourceTypeRegistry, acl.RegistryName})
	}
	return out
}

func parseOps(ops []string, def kmsg.ACLOperation) ([]kmsg.ACLOperation, error) {
	if len(ops) == 0 {
		return []kmsg.ACLOperation{def}, nil
	}
	var out []kmsg.ACLOperation
	for _, s := range ops {
		op, err := kmsg.ParseACLOperation(s)
		if err != nil || op == kmsg.ACLOperationUnknown {
			return nil, fmt.Errorf("unknown operation %q", s)
		}
		out = append(out, op)
	}
	return out, nil
}

func orWildcard(hosts []string) []string {
	if len(hosts) == 0 {
		return []string{acl.Wildcard}
	}
	return hosts
}

func aclRun(ctx context.Context, sub string, args []string, stdout, stderr io.Writer) int {
	about := map[string]string{
		"add":    "Adds ACL bindings: every principal and host given, for every operation, on every resource.",
		"remove": "Removes the ACL bindings the flags match and prints them.",
		"list":   "Prints the ACL bindings the flags match.",
	}[sub]
	c := newCommand("shale acl "+sub, "shale acl "+sub+" [flags]", about)
	var f aclFlags
	f.clientFlags.register(c.fs, 30*time.Second)
	c.fs.Var(&f.topics, "topic", "topic `name` (repeatable)")
	c.fs.Var(&f.groups, "group", "consumer group `id` (repeatable)")
	c.fs.Var(&f.txnIDs, "transactional-id", "transactional `id` (repeatable)")
	c.fs.BoolVar(&f.cluster, "cluster", false, "the cluster resource")
	c.fs.Var(&f.subjects, "subject", "schema registry subject `name` (repeatable)")
	c.fs.BoolVar(&f.registry, "registry", false, "the schema registry resource (its global config and mode)")
	defPattern := "literal"
	if sub == "list" {
		defPattern = "any"
	}
	c.fs.StringVar(&f.pattern, "resource-pattern-type", defPattern, "`type` of the resource names: literal, prefixed, any, match")
	c.fs.Var(&f.operations, "operation", "`op`eration (repeatable; add defaults to ALL, remove and list to any)")
	if sub == "list" {
		c.fs.Var(&f.principals, "principal", "only bindings of this `principal` (repeatable)")
	} else {
		c.fs.Var(&f.allowPrincipals, "allow-principal", "`principal` the bindings allow (repeatable)")
		c.fs.Var(&f.denyPrincipals, "deny-principal", "`principal` the bindings deny (repeatable)")
		c.fs.Var(&f.allowHosts, "allow-host", "`host` the allowing bindings apply to (repeatable; default *)")
		c.fs.Var(&f.denyHosts, "deny-host", "`host` the denying bindings apply to (repeatable; default *)")
	}
	positional, code, ok := c.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	if len(positional) > 0 {
		return c.usageErr(stderr, "unexpected argument %q", positional[0])
	}
	pattern, err := kmsg.ParseACLResourcePatternType(f.pattern)
	if err != nil || pattern == kmsg.ACLResourcePatternTypeUnknown {
		return c.usageErr(stderr, "unknown --resource-pattern-type %q", f.pattern)
	}
	if sub == "add" && pattern != kmsg.ACLResourcePatternTypeLiteral && pattern != kmsg.ACLResourcePatternTypePrefixed {
		return c.usageErr(stderr, "add takes --resource-pattern-type literal or prefixed")
	}
	resources := f.resources()
	if sub != "list" && len(resources) == 0 {
		return c.usageErr(stderr, "name a resource: --topic, --group, --transactional-id, --cluster, --subject or --registry")
	}
	defOp := kmsg.ACLOperationAny
	if sub == "add" {
		defOp = kmsg.ACLOperationAll
		if len(f.allowPrincipals)+len(f.denyPrincipals) == 0 {
			return c.usageErr(stderr, "name a principal with --allow-principal or --deny-principal")
		}
	}
	ops, err := parseOps(f.operations, defOp)
	if err != nil {
		return c.usageErr(stderr, "%v", err)
	}

	return f.withClient(ctx, c, stderr, func(opCtx context.Context, cl *client.Client) int {
		switch sub {
		case "add":
			return aclAdd(opCtx, c, cl, &f, resources, pattern, ops, stdout, stderr)
		case "remove":
			removed, err := cl.DeleteACLs(opCtx, aclFilters(&f, resources, pattern, ops))
			printBindings(stdout, removed)
			if err != nil {
				return failed(stderr, c.fs.Name(), err)
			}
			return exitOK
		default:
			var all []acl.Binding
			for _, flt := range aclFilters(&f, resources, pattern, ops) {
				bs, err := cl.ListACLs(opCtx, flt)
				if err != nil {
					return failed(stderr, c.fs.Name(), err)
				}
				all = append(all, bs...)
			}
			slices.SortFunc(all, acl.Compare)
			printBindings(stdout, slices.Compact(all))
			return exitOK
		}
	})
}

func aclAdd(ctx context.Context, c *command, cl *client.Client, f *aclFlags, resources []aclResource, pattern kmsg.ACLResourcePatternType,
	ops []kmsg.ACLOperation, stdout, stderr io.Writer) int {
	var bindings []acl.Binding
	add := func(principals, hosts []string, perm kmsg.ACLPermissionType) {
		for _, r := range resources {
			for _, p := range principals {
				for _, h := range orWildcard(hosts) {
					for _, op := range ops {
						rp := pattern
						if r.typ == kmsg.ACLResourceTypeCluster || r.typ == acl.ResourceTypeRegistry {
							rp = kmsg.ACLResourcePatternTypeLiteral
						}
						bindings = append(bindings, acl.Binding{ResourceType: r.typ, ResourceName: r.name, PatternType: rp,
							Principal: p, Host: h, Operation: op, Permission: perm})
					}
				}
			}
		}
	}
	add(f.allowPrincipals, f.allowHosts, kmsg.ACLPermissionTypeAllow)
	add(f.denyPrincipals, f.denyHosts, kmsg.ACLPermissionTypeDeny)
	for _, b := range bindings {
		if err := b.Validate(); err != nil {
			return c.usageErr(stderr, "%v", err)
		}
	}
	errs, err := cl.CreateACLs(ctx, bindings)
	if err != nil {
		return failed(stderr, c.fs.Name(), err)
	}
	status := exitOK
	var added []acl.Binding
	for i, err := range errs {
		if err != nil {
			fmt.Fprintf(stderr, "%s: %s: %v\n", c.fs.Name(), bindings[i], err)
			status = exitFailed
			continue
		}
		added = append(added, bindings[i])
	}
	printBindings(stdout, added)
	return status
}

// aclFilters turns the flags into filters: one per resource (one for every resource
// without any), per principal and host given, per operation.
func aclFilters(f *aclFlags, resources []aclResource, pattern kmsg.ACLResourcePatternType, ops []kmsg.ACLOperation) []acl.Filter {
	type who struct {
		principal, host *string
		perm            kmsg.ACLPermissionType
	}
	var whos []who
	strp := func(s string) *string { return &s }
	for _, p := range f.principals {
		whos = append(whos, who{principal: strp(p), perm: kmsg.ACLPermissionTypeAny})
	}
	for _, p := range f.allowPrincipals {
		for _, h := range hostFilters(f.allowHosts) {
			whos = append(whos, who{principal: strp(p), host: h, perm: kmsg.ACLPermissionTypeAllow})
		}
	}
	for _, p := range f.denyPrincipals {
		for _, h := range hostFilters(f.denyHosts) {
			whos = append(whos, who{principal: strp(p), host: h, perm: kmsg.ACLPermissionTypeDeny})
		}
	}
	if len(whos) == 0 {
		whos = []who{{perm: kmsg.ACLPermissionTypeAny}}
	}
	type res struct {
		typ  kmsg.ACLResourceType
		name *string
	}
	var rs []res
	for _, r := range resources {
		rs = append(rs, res{r.typ, strp(r.name)})
	}
	if len(rs) == 0 {
		// ANY leaves out Shale's own types (so that Kafka's tools never see them); this
		// CLI knows them and asks for them too.
		rs = []res{{typ: kmsg.ACLResourceTypeAny}, {typ: acl.ResourceTypeSubject}, {typ: acl.ResourceTypeRegistry}}
	}
	var out []acl.Filter
	for _, r := range rs {
		for _, w := range whos {
			for _, op := range ops {
				out = append(out, acl.Filter{ResourceType: r.typ, ResourceName: r.name, PatternType: pattern,
					Principal: w.principal, Host: w.host, Operation: op, Permission: w.perm})
			}
		}
	}
	return out
}

// hostFilters is nil (any host) without hosts given.
func hostFilters(hosts []string) []*string {
	if len(hosts) == 0 {
		return []*string{nil}
	}
	out := make([]*string, len(hosts))
	for i := range hosts {
		out[i] = &hosts[i]
	}
	return out
}

func printBindings(w io.Writer, bs []acl.Binding) {
	if len(bs) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RESOURCE-TYPE\tNAME\tPATTERN\tPRINCIPAL\tHOST\tOPERATION\tPERMISSION")
	for _, b := range bs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", acl.ResourceTypeName(b.ResourceType), b.ResourceName, b.PatternType, b.Principal, b.Host,
			strings.ToUpper(b.Operation.String()), b.Permission)
	}
	tw.Flush()
}
