package k8s

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

const (
	chartDir    = "../../deploy/helm/shale"
	releaseName = "shale"
	namespace   = "streaming"
)

// kubeVersion is what the chart is rendered and linted for: the kube-apiserver the API
// server test builds.
var kubeVersion = chartutil.KubeVersion{Version: "v1.37.2", Major: "1", Minor: "37"}

// valueSets are the configurations every check runs on.
var valueSets = map[string]map[string]any{
	"combined-3":  {},
	"combined-1":  {"replicas": 1},
	"dedicated-3": {"controller": map[string]any{"mode": "dedicated"}},
	"dedicated-1": {"replicas": 1, "controller": map[string]any{"mode": "dedicated", "replicas": 1}},
	"no-persistence": {"persistence": map[string]any{"enabled": false},
		"controller": map[string]any{"mode": "dedicated", "persistence": map[string]any{"enabled": false}}},
	"external-nodeport": {"external": map[string]any{"enabled": true, "type": "NodePort",
		"nodePort": map[string]any{"host": "kafka.example.com", "basePort": 31090}}},
	"external-loadbalancer": {"external": map[string]any{"enabled": true, "type": "LoadBalancer",
		"loadBalancer": map[string]any{"hosts": []any{"b0.example.com", "b1.example.com", "b2.example.com"}}}},
	"metrics-and-config": {"metrics": map[string]any{"serviceMonitor": map[string]any{"enabled": true}},
		"broker": map[string]any{"config": map[string]any{"log.retention.hours": 72, "log.segment.bytes": "536870912"}}},
}

func loadChart(t testing.TB) *chart.Chart {
	t.Helper()
	c, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("load chart: %v", err)
	}
	return c
}

// render is `helm template`: the chart's values coalesced with vals, checked against
// values.schema.json, rendered for kubeVersion. cfg non-nil lets lookup query that API
// server, as `helm upgrade` does.
func render(t testing.TB, vals map[string]any, cfg *rest.Config) (map[string]string, error) {
	t.Helper()
	c := loadChart(t)
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = kubeVersion
	rv, err := chartutil.ToRenderValues(c, vals, chartutil.ReleaseOptions{
		Name: releaseName, Namespace: namespace, Revision: 1, IsInstall: cfg == nil, IsUpgrade: cfg != nil,
	}, caps)
	if err != nil {
		return nil, err
	}
	if cfg != nil {
		return engine.RenderWithClient(c, rv, cfg)
	}
	return engine.Render(c, rv)
}

// manifest is one rendered document.
type manifest struct {
	source string // template file
	raw    []byte // YAML
	obj    runtime.Object
	gvk    schema.GroupVersionKind
}

// decodeAll splits every rendered template into documents and decodes each strictly
// (unknown or duplicate fields are errors) into its k8s.io/api type. Kinds outside
// client-go's scheme (the ServiceMonitor) come back with a nil obj.
func decodeAll(t testing.TB, out map[string]string) []manifest {
	t.Helper()
	strict := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme.Scheme, scheme.Scheme,
		json.SerializerOptions{Yaml: true, Strict: true})
	var ms []manifest
	for _, name := range slices.Sorted(maps.Keys(out)) {
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		rd := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(out[name])))
		for {
			doc, err := rd.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if len(bytes.TrimSpace(stripComments(doc))) == 0 {
				continue
			}
			var tm struct{ APIVersion, Kind string }
			if err := utilyaml.Unmarshal(doc, &tm); err != nil {
				t.Fatalf("%s: %v\n%s", name, err, doc)
			}
			gvk := schema.FromAPIVersionAndKind(tm.APIVersion, tm.Kind)
			m := manifest{source: name, raw: doc, gvk: gvk}
			if scheme.Scheme.Recognizes(gvk) {
				obj, _, err := strict.Decode(doc, nil, nil)
				if err != nil {
					t.Fatalf("%s: strict decode of %s: %v\n%s", name, gvk, err, doc)
				}
				m.obj = obj
			} else if gvk.Group != "monitoring.coreos.com" {
				t.Fatalf("%s: %s is neither a Kubernetes kind nor the ServiceMonitor", name, gvk)
			}
			ms = append(ms, m)
		}
	}
	return ms
}

func stripComments(doc []byte) []byte {
	var b bytes.Buffer
	for _, line := range strings.Split(string(doc), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			b.WriteString(line + "\n")
		}
	}
	return b.Bytes()
}

// TestChartLint is `helm lint --strict` on every value set.
func TestChartLint(t *testing.T) {
	for _, name := range slices.Sorted(maps.Keys(valueSets)) {
		t.Run(name, func(t *testing.T) {
			res := lint.AllWithKubeVersion(chartDir, valueSets[name], namespace, &kubeVersion)
			for _, m := range res.Messages {
				if m.Severity >= support.WarningSev {
					t.Errorf("helm lint: %s", m)
				} else {
					t.Logf("helm lint: %s", m)
				}
			}
		})
	}
}

// TestChartRenders renders every value set, decodes every manifest strictly into
// k8s.io/api types, and checks what makes the deployment safe.
func TestChartRenders(t *testing.T) {
	for _, name := range slices.Sorted(maps.Keys(valueSets)) {
		t.Run(name, func(t *testing.T) {
			out, err := render(t, valueSets[name], nil)
			if err != nil {
				t.Fatal(err)
			}
			checkManifests(t, name, decodeAll(t, out))
		})
	}
}

func checkManifests(t *testing.T, set string, ms []manifest) {
	kinds := map[string]int{}
	var sets []*appsv1.StatefulSet
	var services []*corev1.Service
	configs := map[string]*corev1.ConfigMap{}
	for _, m := range ms {
		kinds[m.gvk.Kind]++
		switch o := m.obj.(type) {
		case *appsv1.StatefulSet:
			sets = append(sets, o)
		case *corev1.Service:
			services = append(services, o)
		case *corev1.ConfigMap:
			configs[o.Name] = o
		case *policyv1.PodDisruptionBudget:
			if o.Spec.MaxUnavailable == nil || o.Spec.MaxUnavailable.IntValue() != 1 {
				t.Errorf("PDB %s: maxUnavailable %v", o.Name, o.Spec.MaxUnavailable)
			}
		}
		if m.obj != nil {
			meta := m.obj.(interface{ GetNamespace() string })
			if ns := meta.GetNamespace(); ns != namespace {
				t.Errorf("%s %s in namespace %q", m.gvk.Kind, m.source, ns)
			}
		}
	}
	dedicated := strings.HasPrefix(set, "dedicated") || set == "no-persistence"
	wantSets := 1
	if dedicated {
		wantSets = 2
	}
	if len(sets) != wantSets {
		t.Fatalf("%d StatefulSets, want %d", len(sets), wantSets)
	}
	for _, k := range []string{"ServiceAccount", "PodDisruptionBudget", "ConfigMap", "Service", "Pod"} {
		if kinds[k] == 0 {
			t.Errorf("no %s rendered", k)
		}
	}
	headless := 0
	for _, s := range services {
		if s.Spec.ClusterIP == corev1.ClusterIPNone {
			headless++
			if !s.Spec.PublishNotReadyAddresses {
				t.Errorf("headless Service %s does not publish not-ready pods: a pod could not reach the quorum to become ready", s.Name)
			}
		}
	}
	if headless != wantSets {
		t.Errorf("%d headless Services, want %d", headless, wantSets)
	}
	ids := map[string]bool{}
	for _, ss := range sets {
		if ss.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
			t.Errorf("%s: podManagementPolicy %q", ss.Name, ss.Spec.PodManagementPolicy)
		}
		pod := ss.Spec.Template.Spec
		if g := pod.TerminationGracePeriodSeconds; g == nil || *g < 35 {
			t.Errorf("%s: terminationGracePeriodSeconds %v leaves no time for the 30 s controlled shutdown", ss.Name, g)
		}
		c := pod.Containers[0]
		if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
			t.Errorf("%s: readiness probe %+v, want GET /readyz", ss.Name, c.ReadinessProbe)
		}
		if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" {
			t.Errorf("%s: liveness probe %+v, want GET /healthz", ss.Name, c.LivenessProbe)
		}
		if sc := pod.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
			t.Errorf("%s: pods may run as root", ss.Name)
		}
		persistent := len(ss.Spec.VolumeClaimTemplates) > 0
		if persistent == (set == "no-persistence") {
			t.Errorf("%s: volumeClaimTemplates %d with set %s", ss.Name, len(ss.Spec.VolumeClaimTemplates), set)
		}
		// Every pod has its own server-<ordinal>.properties with a unique node.id.
		cm := configs[pod.Volumes[0].ConfigMap.Name]
		if cm == nil {
			t.Fatalf("%s: ConfigMap %s not rendered", ss.Name, pod.Volumes[0].ConfigMap.Name)
		}
		for i := range int(*ss.Spec.Replicas) {
			props, ok := cm.Data[fmt.Sprintf("server-%d.properties", i)]
			if !ok {
				t.Fatalf("%s: no server-%d.properties", ss.Name, i)
			}
			id := propsValue(props, "node.id")
			if ids[id] {
				t.Errorf("node.id %s twice", id)
			}
			ids[id] = true
			if ss.Name == "shale" {
				checkBrokerListeners(t, set, i, props, c, services)
			}
		}
	}
}

// checkBrokerListeners: with external access a broker has an EXTERNAL listener that its
// external Service forwards to and that advertises the external address, while the
// brokers replicate over PLAINTEXT and the headless name; without it, PLAINTEXT alone.
func checkBrokerListeners(t *testing.T, set string, i int, props string, c corev1.Container, services []*corev1.Service) {
	t.Helper()
	adv := propsValue(props, "advertised.listeners")
	internal := fmt.Sprintf("PLAINTEXT://shale-%d.shale-headless.%s.svc.cluster.local:9092", i, namespace)
	if !strings.HasPrefix(adv, internal) {
		t.Errorf("%s broker %d: advertised.listeners %q does not start with %q", set, i, adv, internal)
	}
	external := strings.HasPrefix(set, "external")
	hasPort := slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "external" && p.ContainerPort == 9094 })
	if !external {
		if strings.Contains(props, "EXTERNAL") || hasPort {
			t.Errorf("%s broker %d: an EXTERNAL listener without external access", set, i)
		}
		return
	}
	if !strings.Contains(propsValue(props, "listeners"), "EXTERNAL://0.0.0.0:9094") || !strings.Contains(adv, ",EXTERNAL://") ||
		propsValue(props, "inter.broker.listener.name") != "PLAINTEXT" ||
		!strings.Contains(propsValue(props, "listener.security.protocol.map"), "EXTERNAL:PLAINTEXT") {
		t.Errorf("%s broker %d: listeners %q advertised %q map %q", set, i, propsValue(props, "listeners"), adv,
			propsValue(props, "listener.security.protocol.map"))
	}
	if !hasPort {
		t.Errorf("%s broker %d: no container port named external", set, i)
	}
	name := fmt.Sprintf("shale-%d-external", i)
	for _, s := range services {
		if s.Name == name {
			if len(s.Spec.Ports) != 1 || s.Spec.Ports[0].TargetPort.String() != "external" {
				t.Errorf("%s: ports %+v, want targetPort external", name, s.Spec.Ports)
			}
			return
		}
	}
	t.Errorf("%s: Service %s not rendered", set, name)
}

// propsValue is the last value of key in a properties file (the last one wins).
func propsValue(props, key string) string {
	v := ""
	for _, line := range strings.Split(props, "\n") {
		if k, val, ok := strings.Cut(line, "="); ok && strings.TrimSpace(k) == key {
			v = strings.TrimSpace(val)
		}
	}
	return v
}

// TestChartRefusesBadValues: values the schema or the templates refuse.
func TestChartRefusesBadValues(t *testing.T) {
	for name, tc := range map[string]struct {
		vals map[string]any
		want string
	}{
		"unknown key":      {map[string]any{"replica": 3}, "replica"},
		"short grace":      {map[string]any{"terminationGracePeriodSeconds": 10}, "terminationGracePeriodSeconds"},
		"even controllers": {map[string]any{"controller": map[string]any{"mode": "dedicated", "replicas": 2}}, "replicas"},
		"chart's own key":  {map[string]any{"broker": map[string]any{"config": map[string]any{"node.id": 4}}}, "node.id"},
		"nodeport no host": {map[string]any{"external": map[string]any{"enabled": true}}, "external.nodePort.host"},
		"too few lb hosts": {map[string]any{"external": map[string]any{"enabled": true, "type": "LoadBalancer",
			"loadBalancer": map[string]any{"hosts": []any{"a"}}}}, "one entry in external.loadBalancer.hosts per broker"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := render(t, tc.vals, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("render: %v; want an error naming %q", err, tc.want)
			}
		})
	}
}
