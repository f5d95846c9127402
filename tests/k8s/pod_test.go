package k8s

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/shalelog/shale/tests/netns"
)

// pod is one StatefulSet pod run the way the kubelet would run its container, minus the
// container runtime: in its own network namespace (the pod network), chrooted into a root
// filesystem holding the binary at the image's path, the ConfigMap's files and the data
// volume at their mount paths and the kubelet's /etc/hosts, as the pod's user, with the
// container's command, args and environment taken from the rendered StatefulSet and
// expanded as Kubernetes expands them.
type pod struct {
	t       *testing.T
	name    string
	ordinal int
	net     *netns.Node
	root    string
	argv    []string
	env     []string
	uid     int64
	gid     int64
	grace   time.Duration
	probe   *corev1.Probe
	port    int // the readiness probe's port number

	cmd    *exec.Cmd
	done   chan struct{}
	starts int
	logs   []string
}

func newPod(t *testing.T, ss *appsv1.StatefulSet, configs map[string]*corev1.ConfigMap, ordinal int, nn *netns.Node, hosts string) *pod {
	t.Helper()
	spec := ss.Spec.Template.Spec
	c := spec.Containers[0]
	p := &pod{t: t, name: fmt.Sprintf("%s-%d", ss.Name, ordinal), ordinal: ordinal, net: nn, root: t.TempDir(), probe: c.ReadinessProbe}
	// The labels the StatefulSet controller puts on its pods.
	labels := map[string]string{}
	for k, v := range ss.Spec.Template.Labels {
		labels[k] = v
	}
	labels["apps.kubernetes.io/pod-index"] = strconv.Itoa(ordinal)
	labels["statefulset.kubernetes.io/pod-name"] = p.name

	env := map[string]string{}
	var order []string
	for _, e := range c.Env {
		v := e.Value
		if e.ValueFrom != nil {
			if e.ValueFrom.FieldRef == nil {
				t.Fatalf("%s: env %s: only fieldRef is emulated", p.name, e.Name)
			}
			switch path := e.ValueFrom.FieldRef.FieldPath; {
			case path == "metadata.name":
				v = p.name
			case path == "metadata.namespace":
				v = namespace
			case path == "status.podIP":
				v = nn.IP
			case strings.HasPrefix(path, "metadata.labels['"):
				v = labels[strings.TrimSuffix(strings.TrimPrefix(path, "metadata.labels['"), "']")]
			default:
				t.Fatalf("%s: env %s: fieldRef %s not emulated", p.name, e.Name, path)
			}
		} else {
			v = expand(v, env)
		}
		env[e.Name] = v
		order = append(order, e.Name)
	}
	for _, k := range order {
		p.env = append(p.env, k+"="+env[k])
	}
	p.env = append(p.env, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	for _, a := range append(append([]string{}, c.Command...), c.Args...) {
		p.argv = append(p.argv, expand(a, env))
	}

	// The image: the binary where the entrypoint names it.
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	bin, err := os.ReadFile(shaleBin)
	must(err)
	must(os.MkdirAll(filepath.Join(p.root, filepath.Dir(p.argv[0])), 0o755))
	must(os.WriteFile(filepath.Join(p.root, p.argv[0]), bin, 0o755))
	must(os.MkdirAll(filepath.Join(p.root, "etc"), 0o755))
	must(os.WriteFile(filepath.Join(p.root, "etc", "hosts"), []byte(hosts), 0o644))
	must(os.MkdirAll(filepath.Join(p.root, "tmp"), 0o1777))

	sc := spec.SecurityContext
	if sc == nil || sc.RunAsUser == nil || sc.RunAsGroup == nil {
		t.Fatalf("%s: no runAsUser/runAsGroup", p.name)
	}
	p.uid, p.gid = *sc.RunAsUser, *sc.RunAsGroup
	fsGroup := p.gid
	if sc.FSGroup != nil {
		fsGroup = *sc.FSGroup
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
	}
	claims := map[string]bool{}
	for _, vc := range ss.Spec.VolumeClaimTemplates {
		claims[vc.Name] = true
	}
	for _, m := range c.VolumeMounts {
		dir := filepath.Join(p.root, m.MountPath)
		must(os.MkdirAll(dir, 0o755))
		v, ok := volumes[m.Name]
		switch {
		case ok && v.ConfigMap != nil:
			cm := configs[v.ConfigMap.Name]
			if cm == nil {
				t.Fatalf("%s: ConfigMap %s not rendered", p.name, v.ConfigMap.Name)
			}
			for k, data := range cm.Data {
				must(os.WriteFile(filepath.Join(dir, k), []byte(data), 0o644))
			}
		case ok && v.EmptyDir != nil, !ok && claims[m.Name]:
			// A volume the pod's fsGroup owns, kept across restarts like a claim.
			must(os.Chown(dir, -1, int(fsGroup)))
			must(os.Chmod(dir, 0o2775))
		default:
			t.Fatalf("%s: volume %s is not emulated", p.name, m.Name)
		}
	}
	if g := spec.TerminationGracePeriodSeconds; g != nil {
		p.grace = time.Duration(*g) * time.Second
	}
	if p.probe == nil || p.probe.HTTPGet == nil {
		t.Fatalf("%s: no HTTP readiness probe", p.name)
	}
	p.port = p.probe.HTTPGet.Port.IntValue()
	if p.probe.HTTPGet.Port.StrVal != "" {
		for _, cp := range c.Ports {
			if cp.Name == p.probe.HTTPGet.Port.StrVal {
				p.port = int(cp.ContainerPort)
			}
		}
	}
	return p
}

// expand is Kubernetes' $(VAR) expansion of command, args and env values: a defined
// variable is replaced, $$ is a literal $, anything else stays as written.
func expand(s string, env map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteByte(s[i])
				continue
			}
			name := s[i+2 : i+2+end]
			if v, ok := env[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

func (p *pod) start() {
	p.t.Helper()
	p.starts++
	logPath := filepath.Join(filepath.Dir(p.root), fmt.Sprintf("%s.%d.log", p.name, p.starts))
	f, err := os.Create(logPath)
	if err != nil {
		p.t.Fatal(err)
	}
	defer f.Close()
	p.logs = append(p.logs, logPath)
	args := append([]string{fmt.Sprintf("--userspec=%d:%d", p.uid, p.gid), p.root}, p.argv...)
	cmd := p.net.Command("chroot", args...)
	cmd.Env = p.env
	cmd.Stdout, cmd.Stderr = f, f
	if err := netns.Spawn(cmd); err != nil {
		p.t.Fatalf("start %s: %v", p.name, err)
	}
	p.cmd, p.done = cmd, make(chan struct{})
	done := p.done
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
}

// stop is the kubelet's: SIGTERM, then SIGKILL once terminationGracePeriodSeconds is up.
// It reports how long the process took to exit and whether it had to be killed.
func (p *pod) stop() (time.Duration, bool) {
	if p.cmd == nil {
		return 0, false
	}
	start := time.Now()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	killed := false
	select {
	case <-p.done:
	case <-time.After(p.grace):
		killed = true
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	p.cmd = nil
	return time.Since(start), killed
}

func (p *pod) kill() {
	if p.cmd != nil {
		_ = p.cmd.Process.Kill()
		<-p.done
		p.cmd = nil
	}
}

// ready runs the rendered readiness probe once.
func (p *pod) ready(ctx context.Context) (bool, string) {
	timeout := time.Duration(max(p.probe.TimeoutSeconds, 1)) * time.Second
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return p.get(ctx, p.probe.HTTPGet.Path)
}

// get is an HTTP probe of path on the pod's probe port; the kubelet's rule: 200-399 is
// success.
func (p *pod) get(ctx context.Context, path string) (bool, string) {
	url := fmt.Sprintf("http://%s:%d%s", p.net.IP, p.port, path)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, err.Error()
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	return resp.StatusCode >= 200 && resp.StatusCode < 400, strings.TrimSpace(string(body))
}

// waitReady probes every periodSeconds, as the kubelet does, until successThreshold
// consecutive successes.
func (p *pod) waitReady(ctx context.Context) error {
	period := time.Duration(max(p.probe.PeriodSeconds, 1)) * time.Second
	need := max(int(p.probe.SuccessThreshold), 1)
	ok, last := 0, ""
	for {
		select {
		case <-p.done:
			return fmt.Errorf("%s exited while waiting to be ready:\n%s", p.name, p.logTail(30))
		default:
		}
		r, why := p.ready(ctx)
		if r {
			ok++
			if ok >= need {
				return nil
			}
		} else {
			ok, last = 0, why
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready (last answer: %s): %w\n%s", p.name, last, ctx.Err(), p.logTail(30))
		case <-time.After(period):
		}
	}
}

func (p *pod) logTail(n int) string {
	if len(p.logs) == 0 {
		return ""
	}
	data, err := os.ReadFile(p.logs[len(p.logs)-1])
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
