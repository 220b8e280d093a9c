package deploy

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The Kubernetes sketch in docs/scale.md cannot run here (there is no
// cluster), but what it tells the collector can be checked against the
// configuration it runs, deploy/gateway.yaml: a variable renamed there, or
// a port changed, would otherwise leave the sketch starting a replica that
// listens on localhost or on a port nothing sends to.

// k8sMeta is the part of an object's metadata the sketch uses.
type k8sMeta struct {
	Name   string            `yaml:"name"`
	Labels map[string]string `yaml:"labels"`
}

// k8sProbe is an HTTP probe.
type k8sProbe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
		Port int    `yaml:"port"`
	} `yaml:"httpGet"`
}

// k8sContainer holds the container fields the sketch sets. Decoding with
// KnownFields makes any other field (a misspelt one, say) an error.
type k8sContainer struct {
	Name    string   `yaml:"name"`
	Image   string   `yaml:"image"`
	Command []string `yaml:"command"`
	Env     []struct {
		Name  string `yaml:"name"`
		Value string `yaml:"value"`
	} `yaml:"env"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	ReadinessProbe k8sProbe `yaml:"readinessProbe"`
	LivenessProbe  k8sProbe `yaml:"livenessProbe"`
	Resources      struct {
		Limits map[string]string `yaml:"limits"`
	} `yaml:"resources"`
}

type k8sDeployment struct {
	APIVersion string  `yaml:"apiVersion"`
	Kind       string  `yaml:"kind"`
	Metadata   k8sMeta `yaml:"metadata"`
	Spec       struct {
		Replicas int `yaml:"replicas"`
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Template struct {
			Metadata k8sMeta `yaml:"metadata"`
			Spec     struct {
				Containers []k8sContainer `yaml:"containers"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type k8sService struct {
	APIVersion string  `yaml:"apiVersion"`
	Kind       string  `yaml:"kind"`
	Metadata   k8sMeta `yaml:"metadata"`
	Spec       struct {
		Selector map[string]string `yaml:"selector"`
		Ports    []struct {
			Name string `yaml:"name"`
			Port int    `yaml:"port"`
		} `yaml:"ports"`
	} `yaml:"spec"`
}

// kubernetesSketch returns the one YAML block of docs/scale.md that holds
// a Deployment.
func kubernetesSketch(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("../docs/scale.md")
	if err != nil {
		t.Fatal(err)
	}
	var found [][]byte
	for _, m := range regexp.MustCompile("(?ms)^```yaml\n(.*?)^```").FindAllSubmatch(b, -1) {
		if bytes.Contains(m[1], []byte("kind: Deployment")) {
			found = append(found, m[1])
		}
	}
	if len(found) != 1 {
		t.Fatalf("docs/scale.md has %d YAML blocks with a Deployment, want 1", len(found))
	}
	return found[0]
}

// decodeStrict decodes one YAML document into v, refusing fields v does not
// have.
func decodeStrict(doc *yaml.Node, v any) error {
	b, err := yaml.Marshal(doc)
	if err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	return dec.Decode(v)
}

// readSketch decodes the sketch's Deployment and Service.
func readSketch(t *testing.T) (k8sDeployment, k8sService) {
	t.Helper()
	var (
		d          k8sDeployment
		s          k8sService
		kinds      []string
		docs       = yaml.NewDecoder(bytes.NewReader(kubernetesSketch(t)))
		kindOnly   struct{ Kind string }
		decodeInto = map[string]any{"Deployment": &d, "Service": &s}
	)
	for {
		var doc yaml.Node
		err := docs.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the sketch is not YAML: %v", err)
		}
		if err := doc.Decode(&kindOnly); err != nil {
			t.Fatal(err)
		}
		v, ok := decodeInto[kindOnly.Kind]
		if !ok {
			t.Fatalf("the sketch has a %q, which this test does not check", kindOnly.Kind)
		}
		if err := decodeStrict(&doc, v); err != nil {
			t.Errorf("the sketch's %s: %v", kindOnly.Kind, err)
		}
		kinds = append(kinds, kindOnly.Kind)
	}
	slices.Sort(kinds)
	if !slices.Equal(kinds, []string{"Deployment", "Service"}) {
		t.Fatalf("the sketch holds %v, want one Deployment and one Service", kinds)
	}
	return d, s
}

// envDefault returns the default gateway.yaml gives the variable name
// (${env:NAME:-default}), and whether it reads name at all.
func envDefault(t *testing.T, cfg []byte, name string) (def string, read bool) {
	t.Helper()
	if !bytes.Contains(cfg, []byte("${env:"+name)) {
		return "", false
	}
	m := regexp.MustCompile(`\$\{env:` + regexp.QuoteMeta(name) + `:-([^}]+)\}`).FindSubmatch(cfg)
	if m == nil {
		return "", true
	}
	return string(m[1]), true
}

func TestKubernetesSketchRunsTheGatewayConfig(t *testing.T) {
	cfg, err := os.ReadFile("gateway.yaml")
	if err != nil {
		t.Fatal(err)
	}
	d, s := readSketch(t)

	if d.APIVersion != "apps/v1" || s.APIVersion != "v1" {
		t.Errorf("apiVersion: Deployment %q, Service %q; want apps/v1 and v1", d.APIVersion, s.APIVersion)
	}
	pod := d.Spec.Template.Metadata.Labels
	for what, sel := range map[string]map[string]string{"the Deployment's selector": d.Spec.Selector.MatchLabels, "the Service's selector": s.Spec.Selector} {
		if len(sel) == 0 {
			t.Errorf("%s is empty", what)
		}
		for k, v := range sel {
			if pod[k] != v {
				t.Errorf("%s asks for %s=%s; the pods are labelled %v", what, k, v, pod)
			}
		}
	}
	if len(d.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("the Deployment has %d containers, want 1", len(d.Spec.Template.Spec.Containers))
	}
	c := d.Spec.Template.Spec.Containers[0]

	// It runs the collector on gateway.yaml.
	if len(c.Command) == 0 || path.Base(c.Command[0]) != "otelcol-streamwatch" {
		t.Errorf("command %q does not run otelcol-streamwatch", c.Command)
	}
	if !slices.ContainsFunc(c.Command, func(a string) bool {
		v, ok := strings.CutPrefix(a, "--config=")
		return ok && path.Base(v) == "gateway.yaml"
	}) {
		t.Errorf("command %q does not run gateway.yaml", c.Command)
	}

	// Every variable it sets is one gateway.yaml reads; the addresses
	// listen beyond localhost, on gateway.yaml's ports.
	env := map[string]string{}
	for _, e := range c.Env {
		if _, read := envDefault(t, cfg, e.Name); !read {
			t.Errorf("the sketch sets %s, which gateway.yaml does not read", e.Name)
		}
		env[e.Name] = e.Value
	}
	listen := map[string]int{} // variable → the port its address listens on
	for _, name := range []string{"STREAMWATCH_OTLP_GRPC", "STREAMWATCH_OTLP_HTTP", "STREAMWATCH_HEALTH"} {
		def, _ := envDefault(t, cfg, name)
		if def == "" {
			t.Fatalf("gateway.yaml gives %s no default address to compare the sketch's with", name)
		}
		v, ok := env[name]
		if !ok {
			t.Errorf("the sketch leaves %s at %s: a Service or a kubelet cannot reach it", name, def)
			continue
		}
		host, port := hostPort(t, v)
		if host != "0.0.0.0" {
			t.Errorf("%s=%s: want 0.0.0.0, reachable from outside the pod", name, v)
		}
		if _, defPort := hostPort(t, def); port != defPort {
			t.Errorf("%s=%s moves the port of gateway.yaml's %s", name, v, def)
		}
		listen[name] = port
	}
	if env["STREAMWATCH_TELEMETRY_HOST"] != "0.0.0.0" {
		t.Errorf("STREAMWATCH_TELEMETRY_HOST=%q: the collector's own metrics must be scrapable from outside the pod", env["STREAMWATCH_TELEMETRY_HOST"])
	}
	telemetry, ok := env["STREAMWATCH_TELEMETRY_PORT"]
	if !ok {
		telemetry, _ = envDefault(t, cfg, "STREAMWATCH_TELEMETRY_PORT")
	}
	listen["STREAMWATCH_TELEMETRY_PORT"], err = strconv.Atoi(telemetry)
	if err != nil {
		t.Fatalf("telemetry port %q: %v", telemetry, err)
	}
	if rw := env["STREAMWATCH_REMOTE_WRITE"]; !strings.HasSuffix(rw, "/api/v1/write") {
		t.Errorf("STREAMWATCH_REMOTE_WRITE=%q: not a Prometheus remote-write URL", rw)
	}

	// The container's named ports are those addresses' ports.
	ports := map[string]int{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	for name, variable := range map[string]string{"otlp-grpc": "STREAMWATCH_OTLP_GRPC", "otlp-http": "STREAMWATCH_OTLP_HTTP", "telemetry": "STREAMWATCH_TELEMETRY_PORT"} {
		if ports[name] != listen[variable] {
			t.Errorf("container port %s is %d; %s listens on %d", name, ports[name], variable, listen[variable])
		}
	}

	// The probes ask the health check, whose path gateway.yaml leaves at
	// its default, "/".
	for what, p := range map[string]k8sProbe{"readinessProbe": c.ReadinessProbe, "livenessProbe": c.LivenessProbe} {
		if p.HTTPGet.Port != listen["STREAMWATCH_HEALTH"] || p.HTTPGet.Path != "/" {
			t.Errorf("%s asks %s on port %d; the health check answers / on %d", what, p.HTTPGet.Path, p.HTTPGet.Port, listen["STREAMWATCH_HEALTH"])
		}
	}
	if bytes.Contains(cfg, []byte("path:")) {
		t.Error("gateway.yaml sets a path: check the probes' against it")
	}

	// memory_limiter takes its percentages of the container's limit.
	if c.Resources.Limits["memory"] == "" {
		t.Error("the container has no memory limit, which memory_limiter's limit_percentage is taken of")
	}

	// The Service sends to the receivers' named ports.
	if len(s.Spec.Ports) == 0 {
		t.Error("the Service has no ports")
	}
	for _, p := range s.Spec.Ports {
		if want, ok := ports[p.Name]; !ok || p.Port != want || !strings.HasPrefix(p.Name, "otlp-") {
			t.Errorf("Service port %s:%d is not a receiver's container port (%v)", p.Name, p.Port, ports)
		}
	}
}
