package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v2"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/externalgrpc/protos"
)

// k8sObject is the part of the example manifests' objects the test reads.
type k8sObject struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name      string `yaml:"name"`
		Namespace string `yaml:"namespace"`
	} `yaml:"metadata"`
	Spec struct {
		Replicas int `yaml:"replicas"`
		Strategy struct {
			Type string `yaml:"type"`
		} `yaml:"strategy"`
		Template struct {
			Spec struct {
				ServiceAccountName string `yaml:"serviceAccountName"`
				SecurityContext    struct {
					RunAsNonRoot bool `yaml:"runAsNonRoot"`
					RunAsUser    int  `yaml:"runAsUser"`
				} `yaml:"securityContext"`
				Affinity struct {
					PodAntiAffinity struct {
						Required  []struct{} `yaml:"requiredDuringSchedulingIgnoredDuringExecution"`
						Preferred []struct {
							Term struct {
								TopologyKey string `yaml:"topologyKey"`
							} `yaml:"podAffinityTerm"`
						} `yaml:"preferredDuringSchedulingIgnoredDuringExecution"`
					} `yaml:"podAntiAffinity"`
				} `yaml:"affinity"`
				Containers []k8sContainer `yaml:"containers"`
			} `yaml:"spec"`
		} `yaml:"template"`
		// Service
		Ports []struct {
			Name       string `yaml:"name"`
			Port       int    `yaml:"port"`
			TargetPort string `yaml:"targetPort"`
		} `yaml:"ports"`
		// PodDisruptionBudget
		MaxUnavailable *int `yaml:"maxUnavailable"`
		MinAvailable   *int `yaml:"minAvailable"`
		// NetworkPolicy
		Ingress []struct {
			Ports []struct {
				Port int `yaml:"port"`
			} `yaml:"ports"`
		} `yaml:"ingress"`
	} `yaml:"spec"`
	// Role
	Rules []struct {
		APIGroups     []string `yaml:"apiGroups"`
		Resources     []string `yaml:"resources"`
		ResourceNames []string `yaml:"resourceNames"`
		Verbs         []string `yaml:"verbs"`
	} `yaml:"rules"`
	// RoleBinding
	Subjects []struct {
		Kind, Name string
	} `yaml:"subjects"`
}

type k8sContainer struct {
	Image string   `yaml:"image"`
	Args  []string `yaml:"args"`
	Env   []struct {
		Name      string `yaml:"name"`
		ValueFrom struct {
			FieldRef struct {
				FieldPath string `yaml:"fieldPath"`
			} `yaml:"fieldRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	StartupProbe   *k8sProbe `yaml:"startupProbe"`
	ReadinessProbe *k8sProbe `yaml:"readinessProbe"`
	LivenessProbe  *k8sProbe `yaml:"livenessProbe"`
}

type k8sProbe struct {
	GRPC *struct {
		Port    int    `yaml:"port"`
		Service string `yaml:"service"`
	} `yaml:"grpc"`
	HTTPGet *struct {
		Path string `yaml:"path"`
	} `yaml:"httpGet"`
}

// readManifest decodes every object of a multi-document YAML file.
func readManifest(t *testing.T, path string) map[string]k8sObject {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]k8sObject{}
	dec := yaml.NewDecoder(strings.NewReader(string(raw)))
	for {
		var obj k8sObject
		if err := dec.Decode(&obj); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("%s: %v", path, err)
		}
		if obj.Kind == "" {
			continue
		}
		if _, dup := out[obj.Kind]; dup {
			t.Fatalf("%s: two objects of kind %s; the test reads one", path, obj.Kind)
		}
		out[obj.Kind] = obj
	}
	return out
}

// portOf returns the port of a host:port flag value.
func portOf(t *testing.T, flagName, hostport string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(hostport)
	if err != nil {
		t.Fatalf("--%s %q: %v", flagName, hostport, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("--%s %q: %v", flagName, hostport, err)
	}
	return n
}

// TestExternalGRPCManifest checks examples/externalgrpc/hcloudscale.yaml,
// which charts/hcloudscale renders (integration/chart checks that it is
// current), against the code: its arguments are serve flags that parse
// and pass serve's checks; the container ports, probes, Service and NetworkPolicy
// use the ports those flags give; leader election is on with RBAC for the
// Lease serve uses; and the image is the one the README builds.
func TestExternalGRPCManifest(t *testing.T) {
	objs := readManifest(t, "../../examples/externalgrpc/hcloudscale.yaml")
	for _, kind := range []string{"ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "Deployment", "PodDisruptionBudget", "Service", "NetworkPolicy"} {
		if _, ok := objs[kind]; !ok {
			t.Errorf("no %s", kind)
		}
	}
	dep := objs["Deployment"]
	if len(dep.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("%d containers; want 1", len(dep.Spec.Template.Spec.Containers))
	}
	c := dep.Spec.Template.Spec.Containers[0]

	// The image is the one examples/externalgrpc/README.md builds and
	// pushes, and the Dockerfile's entry point is the binary, so the
	// arguments start with the subcommand.
	readme, err := os.ReadFile("../../examples/externalgrpc/README.md")
	if err != nil {
		t.Fatal(err)
	}
	built := regexp.MustCompile(`docker buildx build [^\n]*-t (\S+) --push \.`).FindStringSubmatch(string(readme))
	if built == nil {
		t.Fatal("examples/externalgrpc/README.md has no `docker buildx build ... -t IMAGE --push .` command")
	}
	if c.Image != built[1] {
		t.Errorf("image %q; want %q, the image the README builds and pushes", c.Image, built[1])
	}
	dockerfile, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(dockerfile), `ENTRYPOINT ["/hcloudscale"]`) || !strings.Contains(string(dockerfile), "./cmd/hcloudscale") {
		t.Error(`Dockerfile: want ENTRYPOINT ["/hcloudscale"] built from ./cmd/hcloudscale`)
	}
	// The build the README describes: static, reproducible paths, the
	// link-time variables that exist (readBuildInfo reads both), cross-
	// compiled per target platform, a final stage of certificates and the
	// binary, run as the non-root user the manifest names.
	for _, want := range []string{
		"CGO_ENABLED=0", "-trimpath", "GOOS=$TARGETOS", "GOARCH=$TARGETARCH",
		"-X github.com/hcloudscale/hcloudscale.Version=", "-X main.commit=",
		"\nFROM scratch\n", "COPY --from=build /etc/ssl/certs/ca-certificates.crt", "\nUSER 65532:65532\n",
	} {
		if !strings.Contains(string(dockerfile), want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	if sc := dep.Spec.Template.Spec.SecurityContext; !sc.RunAsNonRoot || sc.RunAsUser != 65532 {
		t.Errorf("pod securityContext %+v; want runAsNonRoot with the image's user 65532", sc)
	}
	if n := strings.Count(string(dockerfile), "\nCOPY --from=build"); n != 2 {
		t.Errorf("Dockerfile's final stage copies %d things from the build; want the certificates and the binary", n)
	}

	// The arguments are serve's own flags and pass its checks.
	if len(c.Args) == 0 || c.Args[0] != "serve" {
		t.Fatalf("args %q; want serve first", c.Args)
	}
	fs, f := newServeFlags()
	fs.SetOutput(io.Discard)
	if err := fs.Parse(c.Args[1:]); err != nil {
		t.Fatalf("serve %q: %v", c.Args[1:], err)
	}
	if fs.NArg() != 0 {
		t.Errorf("serve takes no positional arguments, got %q", fs.Args())
	}
	if err := f.check(); err != nil {
		t.Errorf("serve %q: %v", c.Args[1:], err)
	}
	for _, spec := range *f.nodes {
		if _, err := config.ParseNodeSpec(spec); err != nil {
			t.Errorf("--nodes %s: %v", spec, err)
		}
	}
	if !f.leader.enabled {
		t.Error("--leader-elect is off; want it on with two replicas")
	}

	// Ports: named container ports for each listener the flags open.
	ports := map[string]int{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	want := map[string]int{
		"grpc":    portOf(t, "listen", f.listen),
		"health":  portOf(t, "health-listen", f.healthListen),
		"metrics": portOf(t, "metrics-listen", f.metricsListen),
	}
	if fmt.Sprint(ports) != fmt.Sprint(want) {
		t.Errorf("container ports %v; want %v from the flags", ports, want)
	}
	// Probes: gRPC health on the plaintext health port, asking for a
	// service the health server reports.
	for name, p := range map[string]*k8sProbe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		switch {
		case p == nil || p.GRPC == nil:
			t.Errorf("%s probe: want a grpc probe", name)
		case p.GRPC.Port != want["health"]:
			t.Errorf("%s probe on port %d; want --health-listen's %d (the gRPC port needs a client certificate)", name, p.GRPC.Port, want["health"])
		case p.GRPC.Service != "" && p.GRPC.Service != protos.CloudProvider_ServiceDesc.ServiceName:
			t.Errorf("%s probe asks for service %q, which the health server does not report", name, p.GRPC.Service)
		}
	}
	// The Service forwards to named container ports; the NetworkPolicy
	// opens the ports that exist.
	for _, p := range objs["Service"].Spec.Ports {
		if _, ok := ports[p.TargetPort]; !ok {
			t.Errorf("Service port %s: targetPort %q is no container port", p.Name, p.TargetPort)
		}
	}
	for _, in := range objs["NetworkPolicy"].Spec.Ingress {
		for _, p := range in.Ports {
			if !slices.Contains([]int{want["grpc"], want["health"], want["metrics"]}, p.Port) {
				t.Errorf("NetworkPolicy opens port %d, which serve does not listen on", p.Port)
			}
		}
	}

	// High availability: two replicas preferring different nodes (sharing
	// one when it is the only one schedulable), one evicted at a time.
	if dep.Spec.Replicas != 2 {
		t.Errorf("replicas %d; want 2", dep.Spec.Replicas)
	}
	if a := dep.Spec.Template.Spec.Affinity.PodAntiAffinity; len(a.Required) != 0 || len(a.Preferred) != 1 || a.Preferred[0].Term.TopologyKey != "kubernetes.io/hostname" {
		t.Errorf("pod anti-affinity %+v; want one preferred (soft) term per node, none required", a)
	}
	if pdb := objs["PodDisruptionBudget"].Spec; pdb.MaxUnavailable == nil || *pdb.MaxUnavailable != 1 {
		t.Errorf("PodDisruptionBudget: want maxUnavailable 1")
	}

	// The Lease: namespace and identity from the downward API, RBAC for
	// the Lease name serve uses, bound to the pod's service account.
	fieldRefs := map[string]string{}
	for _, e := range c.Env {
		fieldRefs[e.Name] = e.ValueFrom.FieldRef.FieldPath
	}
	if fieldRefs["POD_NAMESPACE"] != "metadata.namespace" || fieldRefs["POD_NAME"] != "metadata.name" {
		t.Errorf("env %v; want POD_NAMESPACE and POD_NAME from the downward API", fieldRefs)
	}
	granted := map[string]bool{}
	for _, r := range objs["Role"].Rules {
		if !slices.Contains(r.APIGroups, "coordination.k8s.io") || !slices.Contains(r.Resources, "leases") {
			continue
		}
		if len(r.ResourceNames) > 0 && !slices.Contains(r.ResourceNames, f.leader.cfg.Name) {
			continue
		}
		for _, v := range r.Verbs {
			granted[v] = true
		}
	}
	for _, v := range []string{"get", "create", "update"} {
		if !granted[v] {
			t.Errorf("Role does not grant %s on the Lease %q", v, f.leader.cfg.Name)
		}
	}
	sa := dep.Spec.Template.Spec.ServiceAccountName
	rb := objs["RoleBinding"]
	if sa == "" || len(rb.Subjects) != 1 || rb.Subjects[0].Name != sa || objs["ServiceAccount"].Metadata.Name != sa {
		t.Errorf("service account %q, RoleBinding subjects %+v; want the Role bound to the pod's service account", sa, rb.Subjects)
	}
}
