package layering

import (
	"bytes"
	"encoding/json"
	"errors"
	"go/parser"
	"go/token"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/shalelog/shale"

// rule forbids packages matching from (minus except) to import packages matching deny,
// or, when allow is set, anything of Shale that allow does not match. Patterns are
// module-relative: "log" is the one package, "log/..." the package and everything
// beneath it.
type rule struct {
	name   string
	from   []string
	except []string
	deny   []string
	allow  []string
	// direct checks the package's own imports; otherwise all its dependencies.
	direct bool
}

var rules = []rule{
	{
		name: "coordinators import the metadata contract, not the data plane or the controller",
		from: []string{"coordinator/..."},
		deny: []string{"log/...", "partition/...", "replication/...", "controller/...", "protocol/...", "server/..."},
	},
	{
		name:  "log and log/records import nothing of Shale but log",
		from:  []string{"log/..."},
		allow: []string{"log/..."},
	},
	{
		name: "tiered storage stores and reads; the replica manager decides, so tiered imports no broker layer",
		from: []string{"tiered/..."},
		deny: []string{"partition/...", "replication/...", "controller/...", "protocol/...", "coordinator/...", "server/..."},
	},
	{
		name: "the metadata contract imports neither side of it",
		from: []string{"metadata/..."},
		deny: []string{"partition/...", "replication/...", "controller/...", "protocol/...", "coordinator/...", "server/..."},
	},
	{
		name:   "protocol does not import the controller or the server",
		from:   []string{"protocol/..."},
		deny:   []string{"controller/...", "server/..."},
		direct: true,
	},
	{
		name: "protocol does not depend on the controller or the server",
		from: []string{"protocol/..."},
		deny: []string{"controller/...", "server/..."},
	},
	{
		name:   "nothing but server and cmd imports server",
		from:   []string{"..."},
		except: []string{"server/...", "cmd/..."},
		deny:   []string{"server/..."},
	},
	{
		name: "security imports no broker layer",
		from: []string{"security/..."},
		deny: []string{"log/...", "partition/...", "replication/...", "protocol/...", "coordinator/...", "controller/...", "server/...", "client/..."},
	},
	{
		name:   "the data plane does not import the controller, protocol or server",
		from:   []string{"partition/...", "replication/..."},
		deny:   []string{"controller/...", "protocol/...", "server/..."},
		direct: true,
	},
	{
		// The broker assembly takes the quorum as a broker.Store: the node picks the
		// controller's client, brokertest controllertest's.
		name:   "the broker assembly knows neither the controller nor the node",
		from:   []string{"server/broker/..."},
		except: []string{"server/broker/brokertest"},
		deny:   []string{"controller", "controller/controllertest", "server", "server/config"},
	},
	{
		// Direct imports only: controllertest, which brokertest runs, is built on the
		// controller; the rest of brokertest's dependencies are the assembly's, checked
		// above, and controllertest's, which "nothing but server" keeps off the node.
		name:   "brokertest runs the controller only through controllertest",
		from:   []string{"server/broker/brokertest"},
		deny:   []string{"controller", "server", "server/config"},
		direct: true,
	},
	{
		name:   "protocol does not import partition",
		from:   []string{"protocol/..."},
		deny:   []string{"partition/..."},
		direct: true,
	},
}

// exception is a direct import that breaks a rule today, in exactly these non-test
// files of the importing package.
type exception struct {
	pkg, imp string
	files    []string
	why      string
}

var exceptions = []exception{}

// match reports whether the module-relative path p matches pattern.
func match(pattern, p string) bool {
	if pattern == "..." {
		return true
	}
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return p == base || strings.HasPrefix(p, base+"/")
	}
	return p == pattern
}

func matchAny(patterns []string, p string) bool {
	return slices.ContainsFunc(patterns, func(pat string) bool { return match(pat, p) })
}

type pkg struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	CgoFiles   []string
	Imports    []string
	Deps       []string
	Error      *struct{ Err string }
}

// rel returns p relative to the module, and whether it is in the module.
func rel(p string) (string, bool) {
	if p == module {
		return "", true
	}
	return strings.CutPrefix(p, module+"/")
}

func listPackages(t *testing.T) []pkg {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	cmd := exec.Command("go", "list", "-e", "-json=ImportPath,Dir,GoFiles,CgoFiles,Imports,Deps,Error", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err = cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decoding go list: %v", err)
		}
		if p.Error != nil {
			t.Fatalf("go list: %s: %s", p.ImportPath, p.Error.Err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list found only %d packages; is the test running inside the module?", len(pkgs))
	}
	return pkgs
}

// violations returns the module-relative imports of p that break r.
func (r rule) violations(p pkg) []string {
	name, _ := rel(p.ImportPath)
	if !matchAny(r.from, name) || matchAny(r.except, name) {
		return nil
	}
	imps := p.Deps
	if r.direct {
		imps = p.Imports
	}
	var bad []string
	for _, imp := range imps {
		dep, ok := rel(imp)
		if !ok || dep == name {
			continue
		}
		if matchAny(r.deny, dep) || (r.allow != nil && !matchAny(r.allow, dep)) {
			bad = append(bad, dep)
		}
	}
	return bad
}

// importingFiles returns the non-test files of p that import imp.
func importingFiles(t *testing.T, p pkg, imp string) []string {
	t.Helper()
	var files []string
	for _, f := range append(slices.Clone(p.GoFiles), p.CgoFiles...) {
		af, err := parser.ParseFile(token.NewFileSet(), filepath.Join(p.Dir, f), nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, is := range af.Imports {
			if path, _ := strconv.Unquote(is.Path.Value); path == imp {
				files = append(files, f)
				break
			}
		}
	}
	return files
}

func TestImportRules(t *testing.T) {
	pkgs := listPackages(t)
	used := map[int]bool{}
	for _, r := range rules {
		for _, p := range pkgs {
			name, _ := rel(p.ImportPath)
			for _, dep := range r.violations(p) {
				i := slices.IndexFunc(exceptions, func(e exception) bool { return e.pkg == name && e.imp == dep })
				if i < 0 || !r.direct {
					if i < 0 {
						verb := "depends on"
						if r.direct {
							verb = "imports"
						}
						t.Errorf("%s: %s %s %s", r.name, name, verb, dep)
					}
					continue
				}
				e := exceptions[i]
				used[i] = true
				files := importingFiles(t, p, module+"/"+dep)
				for _, f := range files {
					if !slices.Contains(e.files, f) {
						t.Errorf("%s: %s/%s imports %s (known exception for other files only: %s)", r.name, name, f, dep, e.why)
					}
				}
				for _, f := range e.files {
					if !slices.Contains(files, f) {
						t.Errorf("%s/%s no longer imports %s: remove it from the known exception (%s)", name, f, dep, e.why)
					}
				}
			}
		}
	}
	for i, e := range exceptions {
		if !used[i] {
			t.Errorf("known exception %s -> %s breaks no rule any more: remove it (%s)", e.pkg, e.imp, e.why)
		}
	}
}

func ruleNamed(t *testing.T, prefix string) rule {
	t.Helper()
	for _, r := range rules {
		if strings.HasPrefix(r.name, prefix) {
			return r
		}
	}
	t.Fatalf("no rule named %q...", prefix)
	return rule{}
}

// The rules must be able to fail: each kind of rule is checked against packages made up
// here.
func TestRulesCatchViolations(t *testing.T) {
	for _, c := range []struct {
		r    rule
		p    pkg
		want []string
	}{
		{ruleNamed(t, "coordinators"), pkg{ImportPath: module + "/coordinator/txn", Deps: []string{"fmt", module + "/metadata", module + "/replication"}}, []string{"replication"}},
		{ruleNamed(t, "log and"), pkg{ImportPath: module + "/log/records", Deps: []string{module + "/log", module + "/metadata"}}, []string{"metadata"}},
		{ruleNamed(t, "nothing but server"), pkg{ImportPath: module + "/protocol", Deps: []string{module + "/server/config"}}, []string{"server/config"}},
		{ruleNamed(t, "nothing but server"), pkg{ImportPath: module + "/server/restproxy", Deps: []string{module + "/server/schemaregistry"}}, nil},
		{ruleNamed(t, "protocol does not import the controller"), pkg{ImportPath: module + "/protocol", Imports: []string{module + "/controller"}, Deps: []string{module + "/controller"}}, []string{"controller"}},
		{ruleNamed(t, "the broker assembly"), pkg{ImportPath: module + "/server/broker", Deps: []string{module + "/controller", module + "/controller/proto", module + "/server/config"}}, []string{"controller", "server/config"}},
		{ruleNamed(t, "the broker assembly"), pkg{ImportPath: module + "/server/broker/brokertest", Deps: []string{module + "/controller"}}, nil},
		{ruleNamed(t, "brokertest"), pkg{ImportPath: module + "/server/broker/brokertest", Imports: []string{module + "/controller/controllertest", module + "/controller"}}, []string{"controller"}},
		{ruleNamed(t, "protocol does not depend"), pkg{ImportPath: module + "/protocol", Deps: []string{module + "/controller/proto"}}, []string{"controller/proto"}},
	} {
		if got := c.r.violations(c.p); !slices.Equal(got, c.want) {
			t.Errorf("%s on %s: %v, want %v", c.r.name, c.p.ImportPath, got, c.want)
		}
	}
}
