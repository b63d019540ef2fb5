package chart

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"maps"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"helm.sh/helm/v4/pkg/cli/values"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
	"github.com/hcloudscale/hcloudscale/integration/apiserver"
)

// TestReadmeInstallsServe starts serve as each `helm install` command of
// the chart's and the repository's README would run it: the chart
// rendered with the command's --set, --set-file and -f values, the
// rendered pod's arguments, environment and volume files, as the chart's
// service account (its RBAC applied for real, in a namespace of its own
// standing for the release namespace), against an in-memory Hetzner API
// holding what the values and the cluster config reference, as the
// user's project would. Each must become Ready: the "serving" log line,
// the kubelet's gRPC probe answered SERVING on the health port, /metrics
// answered on the metrics port, the Lease the flags name held when leader
// election is on; then SIGTERM ends it cleanly, without a 403 from the
// API server on the way.
//
// $HCLOUD_TOKEN stands for the user's token: the token Secret's file
// holds the fake project's. Nothing else of the README's values is
// changed: a placeholder or a reference a project cannot satisfy fails
// the test with serve's own error.
func TestReadmeInstallsServe(t *testing.T) {
	installs := readmeInstalls(t)
	for _, name := range slices.Sorted(maps.Keys(installs)) {
		ns := strings.ReplaceAll(strings.ToLower(name), " ", "-") // README install 1 -> readme-install-1
		t.Run(name, func(t *testing.T) {
			t.Logf("values: %+v", installs[name])
			readmeInstallServe(t, ns, installs[name])
		})
	}
}

func readmeInstallServe(t *testing.T, ns string, opts values.Options) {
	s := apiserver.Shared(t)
	const podName = "hcloudscale-7b9f4-xk2lp"
	vals := mergeValues(t, opts)
	manifest, err := renderIn(t, ns, vals)
	if err != nil {
		t.Fatalf("rendering into %s: %v", ns, err)
	}
	objs := decode(t, manifest)
	dep := one[*appsv1.Deployment](t, objs, "Deployment")
	pod := dep.Spec.Template.Spec
	c := pod.Containers[0]
	args := flags(c.Args)

	// The release namespace and the Lease's, the service account and its
	// RBAC.
	if n := applyChartRBAC(t, s, objs, ns); n == 0 {
		t.Fatalf("no service account among %q", kinds(objs))
	}
	kubeconfig := s.ServiceAccountKubeconfig(t, ns, pod.ServiceAccountName)

	// The user's Hetzner project, with everything serve's configuration
	// (from the rendered pod) references.
	fake := hcloudtest.NewServer(hcloudtest.WithDefaultActionDuration(10 * time.Millisecond))
	t.Cleanup(fake.Close)
	cfg, err := loadRenderedConfig(t, objs, dep)
	if err != nil {
		t.Fatalf("serve's configuration from the rendered pod: %v", err)
	}
	addProjectObjects(t, fake, cfg)

	// The pod's files and process.
	root := t.TempDir()
	svc := one[*corev1.Service](t, objs, "Service")
	writePodFiles(t, objs, pod, root, fake.Token(), svc.Name+"."+ns+".svc")
	cmdArgs, env := podProcess{Root: root, Kubeconfig: kubeconfig, Endpoint: fake.URL(), PodName: podName, Namespace: ns}.command(t, c)
	proc := startServe(t, cmdArgs, env)

	// Ready: serving, and the kubelet's readiness probe passes.
	serving := proc.waitLog(t, "serving")
	probe := c.ReadinessProbe
	if probe == nil || probe.GRPC == nil {
		t.Fatalf("readiness probe %+v; want gRPC", probe)
	}
	healthAddr, _ := serving["health_listen"].(string)
	if healthAddr == "" || containerPort(t, c, "health") != probe.GRPC.Port {
		t.Fatalf("no health listener (%v) for the readiness probe on port %d; log:\n%s", serving, probe.GRPC.Port, proc.logs)
	}
	checkGRPCHealth(t, healthAddr, ptrOr(probe.GRPC.Service, ""))
	if _, on := args["metrics-listen"]; on {
		metricsAddr, _ := serving["metrics_listen"].(string)
		if m := get(t, "http://"+metricsAddr+"/metrics"); !strings.Contains(m, "hcloudscale_") {
			t.Errorf("/metrics at %s has no hcloudscale_ metric", metricsAddr)
		}
	}
	if _, on := args["leader-elect"]; on {
		name, leaseNS := args["leader-elect-resource-name"], args["leader-elect-resource-namespace"]
		if len(name) != 1 || len(leaseNS) != 1 {
			t.Fatalf("--leader-elect-resource-name %q, --leader-elect-resource-namespace %q; want one of each", name, leaseNS)
		}
		proc.waitLog(t, "leading: changes are let in")
		l, err := s.AdminClient(t).CoordinationV1().Leases(leaseNS[0]).Get(t.Context(), name[0], metav1.GetOptions{})
		if err != nil {
			t.Fatalf("Lease %s/%s: %v", leaseNS[0], name[0], err)
		}
		if h := l.Spec.HolderIdentity; h == nil || *h != podName {
			t.Errorf("Lease %s/%s holder %v; want %s", leaseNS[0], name[0], l.Spec.HolderIdentity, podName)
		}
	}
	// What a user would see in `kubectl logs`: serve's warnings, among
	// them the example cloud-init's placeholders left in.
	placeholders := false
	for _, l := range proc.logs.all() {
		if l["level"] == "warn" {
			t.Logf("serve warns: %v", l)
			msg, _ := l["msg"].(string)
			placeholders = placeholders || strings.Contains(msg, "still has the placeholders")
		}
	}
	example := false
	for _, p := range cfg.Pools {
		example = example || strings.Contains(p.CloudInit.Reveal(), "__BOOTSTRAP_TOKEN__") || strings.Contains(p.CloudInit.Reveal(), "__K3S_")
	}
	if example != placeholders {
		t.Errorf("serve warned about placeholders: %v; the cloud-inits have some: %v", placeholders, example)
	}
	if w := proc.logs.find("serve failed"); w != nil {
		t.Errorf("serve failed while ready: %v", w)
	}
	proc.terminate(t)
	serviceAccountDid(t, s, serviceAccountUser(ns, pod.ServiceAccountName))
}

// addProjectObjects adds to the fake project what cfg references by name,
// as the project of a user whose configuration it is has them: the
// network with every subnet a pool uses, the firewalls, SSH keys and
// placement groups, and a snapshot for every label selector of an image
// a pool boots. Server types, locations and system images are the fake's
// catalogue's.
func addProjectObjects(t *testing.T, fake *hcloudtest.Server, cfg *config.Config) {
	t.Helper()
	byID := func(ref string) bool { _, err := strconv.ParseInt(ref, 10, 64); return err == nil }
	var added []string
	add := func(kind, name string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("the project's %s %s: %v", kind, name, err)
		}
		added = append(added, kind+" "+name)
	}
	firewalls := slices.Clone(cfg.Firewalls)
	sshKeys := slices.Clone(cfg.SSHKeys)
	var groups []string
	subnets := map[netip.Prefix]bool{}
	if cfg.DefaultSubnetIPRange.IsValid() {
		subnets[cfg.DefaultSubnetIPRange.Masked()] = true
	}
	snapshots := map[string]hcloud.Architecture{} // selector -> arch
	for _, p := range cfg.Pools {
		firewalls = append(firewalls, p.Firewalls...)
		sshKeys = append(sshKeys, p.SSHKeys...)
		if p.PlacementGroup != "" {
			groups = append(groups, p.PlacementGroup)
		}
		if p.SubnetIPRange.IsValid() {
			subnets[p.SubnetIPRange.Masked()] = true
		}
		arch, hArch := config.ArchAMD64, hcloud.ArchitectureX86
		if strings.HasPrefix(p.ServerType, "cax") {
			arch, hArch = config.ArchARM64, hcloud.ArchitectureARM
		}
		if spec := string(p.Images.ForArch(arch)); strings.Contains(spec, "=") {
			snapshots[spec] = hArch
		}
	}
	if cfg.Network != "" && !byID(cfg.Network) {
		n := hcloudtest.Network{Name: cfg.Network, IPRange: "10.0.0.0/8"}
		for _, p := range slices.SortedFunc(maps.Keys(subnets), func(a, b netip.Prefix) int { return strings.Compare(a.String(), b.String()) }) {
			n.Subnets = append(n.Subnets, hcloudtest.Subnet{IPRange: p.String()})
		}
		_, err := fake.AddNetwork(n)
		add("network", fmt.Sprintf("%s %s subnets %v", n.Name, n.IPRange, n.Subnets), err)
	}
	for _, name := range uniq(firewalls) {
		if !byID(name) {
			_, err := fake.AddFirewall(hcloudtest.Firewall{Name: name})
			add("firewall", name, err)
		}
	}
	for _, name := range uniq(sshKeys) {
		if !byID(name) {
			// A key of its own: fingerprints are unique in a project.
			sum := sha256.Sum256([]byte(name))
			_, err := fake.AddSSHKey(hcloudtest.SSHKey{Name: name, PublicKey: "ssh-ed25519 " + base64.StdEncoding.EncodeToString(sum[:]) + " " + name})
			add("ssh key", name, err)
		}
	}
	for _, name := range uniq(groups) {
		if !byID(name) {
			_, err := fake.AddPlacementGroup(hcloudtest.PlacementGroup{Name: name})
			add("placement group", name, err)
		}
	}
	for _, sel := range slices.Sorted(maps.Keys(snapshots)) {
		labels := map[string]string{}
		for _, kv := range strings.Split(sel, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || !regexp.MustCompile(`^[A-Za-z0-9._/-]+$`).MatchString(k) {
				t.Fatalf("image selector %q: only k=v,... is understood by this test", sel)
			}
			labels[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
		_, err := fake.AddSnapshot("node image", snapshots[sel], labels)
		add("snapshot", fmt.Sprintf("%s (%s)", sel, snapshots[sel]), err)
	}
	t.Logf("the project has: %q", added)
}

func uniq(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return slices.Compact(out)
}

func ptrOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}
