package deploy

import (
	"bytes"
	"encoding/json"
	"net"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The compose stack cannot run here (this machine has no Docker engine), so
// the links between its files are checked instead: each is a name or a
// port written in two places, and a change to one side leaves a stack that
// starts and shows nothing.

// composeService holds the fields compose.yaml's services use; decoding
// with KnownFields makes any other field an error.
type composeService struct {
	Image       string            `yaml:"image"`
	Command     []string          `yaml:"command"`
	Volumes     []string          `yaml:"volumes"`
	Environment map[string]string `yaml:"environment"`
	Ports       []string          `yaml:"ports"`
}

// readCompose decodes compose.yaml's services.
func readCompose(t *testing.T) map[string]composeService {
	t.Helper()
	b, err := os.ReadFile("compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Services map[string]composeService `yaml:"services"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	for _, name := range []string{"collector", "prometheus", "tempo", "grafana"} {
		if _, ok := c.Services[name]; !ok {
			t.Fatalf("compose.yaml has no service %q", name)
		}
	}
	return c.Services
}

// mounts returns a service's volumes as target → source, the sources as
// paths from deploy/.
func mounts(t *testing.T, s composeService) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) < 2 {
			t.Fatalf("volume %q is not source:target", v)
		}
		m[parts[1]] = parts[0]
	}
	return m
}

// hostPort returns the host and port of a URL or host:port address.
func hostPort(t *testing.T, addr string) (string, int) {
	t.Helper()
	_, rest, ok := strings.Cut(addr, "://")
	if !ok {
		rest = addr
	}
	rest, _, _ = strings.Cut(rest, "/")
	h, p, err := net.SplitHostPort(rest)
	if err != nil {
		t.Fatalf("%q: %v", addr, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("%q: %v", addr, err)
	}
	return h, n
}

// yamlFile decodes a YAML file of deploy/ into v.
func yamlFile(t *testing.T, name string, v any) {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

func TestComposeStackFilesAgree(t *testing.T) {
	services := readCompose(t)

	// Every file a service mounts is in the repository, the collector's
	// binary where `make collector` puts it.
	for name, s := range services {
		for target, src := range mounts(t, s) {
			if src == "../bin/otelcol-streamwatch" {
				continue
			}
			if _, err := os.Stat(src); err != nil {
				t.Errorf("%s mounts %s at %s: %v", name, src, target, err)
			}
		}
	}
	mk, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(mk, []byte("COLLECTOR := $(BIN)/otelcol-streamwatch")) || !bytes.Contains(mk, []byte("BIN       := $(CURDIR)/bin")) {
		t.Error("the Makefile no longer builds the collector into bin/otelcol-streamwatch, which compose.yaml mounts")
	}

	// Every published port is on 127.0.0.1 only, as compose.yaml's header
	// promises.
	published := map[string][]int{} // service → container ports
	for name, s := range services {
		for _, p := range s.Ports {
			parts := strings.Split(p, ":")
			if len(parts) != 3 || parts[0] != "127.0.0.1" {
				t.Errorf("%s publishes %q, not on 127.0.0.1", name, p)
				continue
			}
			n, err := strconv.Atoi(parts[2])
			if err != nil {
				t.Fatalf("%s: port %q: %v", name, p, err)
			}
			published[name] = append(published[name], n)
		}
	}

	// The collector runs the configurations it mounts, and every variable
	// it is given is one of them reads; each address listens beyond the
	// container's localhost, on its configuration's port.
	col := services["collector"]
	colMounts := mounts(t, col)
	var configs []byte
	for i, a := range col.Command {
		if a != "--config" || i+1 == len(col.Command) {
			continue
		}
		src, ok := colMounts[col.Command[i+1]]
		if !ok {
			t.Errorf("the collector runs %s, which compose.yaml does not mount", col.Command[i+1])
			continue
		}
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		configs = append(configs, b...)
	}
	if !bytes.Contains(configs, []byte("streamwatch:")) {
		t.Fatal("the collector runs no configuration with the streamwatch components")
	}
	listen := map[string]int{}
	for name, v := range col.Environment {
		def, read := envDefault(t, configs, name)
		if !read {
			t.Errorf("compose.yaml sets %s, which the collector's configurations do not read", name)
			continue
		}
		if !strings.HasSuffix(name, "_GRPC") && !strings.HasSuffix(name, "_HTTP") && name != "STREAMWATCH_PROMETHEUS" && name != "STREAMWATCH_HEALTH" {
			continue
		}
		h, p := hostPort(t, v)
		if _, dp := hostPort(t, def); h != "0.0.0.0" || p != dp {
			t.Errorf("%s=%s: want 0.0.0.0 on the configuration's port (%s)", name, v, def)
		}
		listen[name] = p
	}
	for _, name := range []string{"STREAMWATCH_OTLP_GRPC", "STREAMWATCH_OTLP_HTTP", "STREAMWATCH_PROMETHEUS"} {
		if !slices.Contains(published["collector"], listen[name]) {
			t.Errorf("the collector's %s (port %d) is not published (%v)", name, listen[name], published["collector"])
		}
	}
	if col.Environment["STREAMWATCH_TELEMETRY_HOST"] != "0.0.0.0" {
		t.Error("the collector's own metrics are not opened to Prometheus's container (STREAMWATCH_TELEMETRY_HOST)")
	}
	telemetry, _ := envDefault(t, configs, "STREAMWATCH_TELEMETRY_PORT")

	// Prometheus scrapes those two addresses by service name, and loads
	// the rules mounted beside its configuration.
	prom := mounts(t, services["prometheus"])
	if prom["/etc/prometheus/prometheus.yml"] != "./prometheus-compose.yml" {
		t.Errorf("Prometheus's configuration is %q, want ./prometheus-compose.yml", prom["/etc/prometheus/prometheus.yml"])
	}
	for job, want := range map[string]string{
		exporterJob:  "collector:" + strconv.Itoa(listen["STREAMWATCH_PROMETHEUS"]),
		telemetryJob: "collector:" + telemetry,
	} {
		if got := targets(t, "prometheus-compose.yml", job); !slices.Equal(got, []string{want}) {
			t.Errorf("prometheus-compose.yml's job %s scrapes %v, want [%s]", job, got, want)
		}
	}
	var promCfg struct {
		RuleFiles []string `yaml:"rule_files"`
	}
	yamlFile(t, "prometheus-compose.yml", &promCfg)
	for _, f := range promCfg.RuleFiles {
		if src, ok := prom[path.Join("/etc/prometheus", f)]; !ok || filepath.Base(src) != f {
			t.Errorf("prometheus-compose.yml loads %s, which is not mounted beside it", f)
		}
	}

	// The collector sends traces to Tempo's OTLP/gRPC port, and Grafana
	// reads Tempo on its HTTP port and Prometheus on its own.
	var tempo struct {
		Server struct {
			HTTPListenPort int `yaml:"http_listen_port"`
		} `yaml:"server"`
		Distributor struct {
			Receivers struct {
				OTLP struct {
					Protocols struct {
						GRPC struct {
							Endpoint string `yaml:"endpoint"`
						} `yaml:"grpc"`
					} `yaml:"protocols"`
				} `yaml:"otlp"`
			} `yaml:"receivers"`
		} `yaml:"distributor"`
	}
	yamlFile(t, "tempo.yaml", &tempo)
	_, tempoGRPC := hostPort(t, tempo.Distributor.Receivers.OTLP.Protocols.GRPC.Endpoint)
	var toTempo struct {
		Exporters map[string]struct {
			Endpoint string `yaml:"endpoint"`
		} `yaml:"exporters"`
	}
	yamlFile(t, "collector-tempo.yaml", &toTempo)
	if e := toTempo.Exporters["otlp_grpc/tempo"].Endpoint; e != "tempo:"+strconv.Itoa(tempoGRPC) {
		t.Errorf("collector-tempo.yaml sends traces to %q; Tempo takes OTLP/gRPC on tempo:%d", e, tempoGRPC)
	}
	var ds struct {
		Datasources []struct {
			UID, Type, URL string
			JSONData       struct {
				ExemplarTraceIDDestinations []struct {
					DatasourceUID string `yaml:"datasourceUid"`
				} `yaml:"exemplarTraceIdDestinations"`
			} `yaml:"jsonData"`
		} `yaml:"datasources"`
	}
	yamlFile(t, "grafana/provisioning/datasources/datasources.yaml", &ds)
	want := map[string]string{"prometheus": "http://prometheus:9090", "tempo": "http://tempo:" + strconv.Itoa(tempo.Server.HTTPListenPort)}
	uids := map[string]bool{}
	for _, d := range ds.Datasources {
		uids[d.UID] = true
		if w, ok := want[d.Type]; ok && d.URL != w {
			t.Errorf("Grafana's %s data source reads %s, want %s", d.Type, d.URL, w)
		}
		delete(want, d.Type)
	}
	if len(want) > 0 {
		t.Errorf("Grafana has no data source of type %v", want)
	}
	for _, d := range ds.Datasources {
		for _, e := range d.JSONData.ExemplarTraceIDDestinations {
			if !uids[e.DatasourceUID] {
				t.Errorf("exemplars link to data source %q, which is not provisioned", e.DatasourceUID)
			}
		}
	}
	if !slices.Contains(published["prometheus"], 9090) || !slices.Contains(published["grafana"], 3000) {
		t.Errorf("Prometheus or Grafana is not published where compose.yaml's header says (%v)", published)
	}

	// Grafana's dashboard provider reads where the dashboards are mounted.
	var dash struct {
		Providers []struct {
			Options struct {
				Path string `yaml:"path"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	yamlFile(t, "grafana/provisioning/dashboards/dashboards.yaml", &dash)
	graf := mounts(t, services["grafana"])
	for _, p := range dash.Providers {
		if graf[p.Options.Path] != "../dashboards" {
			t.Errorf("Grafana's dashboards are read from %s, where %q is mounted, not ../dashboards", p.Options.Path, graf[p.Options.Path])
		}
	}

	// The dashboard's panels read data sources Grafana is given.
	b, err := os.ReadFile("../dashboards/streamwatch.json")
	if err != nil {
		t.Fatal(err)
	}
	var board any
	if err := json.Unmarshal(b, &board); err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	dashboardDatasources(board, used)
	if len(used) == 0 {
		t.Error("the dashboard names no data source")
	}
	for uid := range used {
		if !uids[uid] {
			t.Errorf("the dashboard reads data source %q, which compose.yaml's Grafana is not given", uid)
		}
	}
}

// dashboardDatasources adds to uids the uid of every "datasource" object
// in a dashboard's JSON.
func dashboardDatasources(v any, uids map[string]bool) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if ds, ok := e.(map[string]any); ok && k == "datasource" {
				if uid, ok := ds["uid"].(string); ok {
					uids[uid] = true
				}
			}
			dashboardDatasources(e, uids)
		}
	case []any:
		for _, e := range v {
			dashboardDatasources(e, uids)
		}
	}
}
