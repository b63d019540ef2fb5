package chart

import (
	"crypto/x509"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/Masterminds/semver/v3"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/cli/values"
	kubefake "helm.sh/helm/v4/pkg/kube/fake"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage"
	"helm.sh/helm/v4/pkg/storage/driver"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// TestUpgradeFromEarlierCharts installs each earlier version of the chart
// (the first chart, and the newest chart of every earlier version, read
// from git) with that version's README install command, then upgrades it
// to this chart with this README's upgrade command as written, as Helm's
// upgrade merges values (the release is kept in Helm's memory storage;
// no cluster). The upgrade must render, with this chart's version and
// objects that decode, and keep the private CA as it is (checkCAKept).
func TestUpgradeFromEarlierCharts(t *testing.T) {
	line := readmeUpgrade(t)
	current := loadChart(t)
	for _, c := range earlierCharts(t, semver.MustParse(current.Metadata.Version)) {
		t.Run(c.version+"@"+c.commit[:7], func(t *testing.T) {
			cfg := memoryConfig(t)
			install := action.NewInstall(cfg)
			install.ReleaseName, install.Namespace = releaseName, releaseNamespace
			installed, err := install.Run(c.chart, mergeValues(t, c.install))
			if err != nil {
				t.Fatalf("installing chart %s with its README's command: %v", c.version, err)
			}
			up, opts := readmeUpgradeAction(t, cfg)
			rel, err := up.Run(releaseName, current, mergeValues(t, opts))
			if err != nil {
				t.Fatalf("README's upgrade (%s) from chart %s: %v", line, c.version, err)
			}
			r := rel.(*releasev1.Release)
			if r.Chart.Metadata.Version != current.Metadata.Version || r.Version != 2 {
				t.Errorf("release revision %d of chart %s; want revision 2 of %s", r.Version, r.Chart.Metadata.Version, current.Metadata.Version)
			}
			objs := decode(t, r.Manifest)
			checkCAKept(t, decode(t, installed.(*releasev1.Release).Manifest), objs)
			dep := one[*appsv1.Deployment](t, objs, "Deployment")
			if got := dep.Labels["helm.sh/chart"]; got != "hcloudscale-"+current.Metadata.Version {
				t.Errorf("Deployment's helm.sh/chart label %q; want this chart's version", got)
			}
		})
	}
}

// readmeUpgradeAction is the README's upgrade command as Helm's upgrade
// action on cfg, with the values it passes.
func readmeUpgradeAction(t *testing.T, cfg *action.Configuration) (*action.Upgrade, values.Options) {
	t.Helper()
	line := readmeUpgrade(t)
	opts, namespace, switches := parseHelmCommand(t, line, "../../")
	up := action.NewUpgrade(cfg)
	up.Namespace = namespace
	for _, s := range switches {
		switch s {
		case "--reset-then-reuse-values":
			up.ResetThenReuseValues = true
		case "--reuse-values":
			up.ReuseValues = true
		default:
			t.Fatalf("README upgrade command %q: %s is not understood by this test", line, s)
		}
	}
	return up, opts
}

// readmeUpgrade returns the README's upgrade command on one line.
func readmeUpgrade(t *testing.T) string {
	t.Helper()
	block := regexp.MustCompile("(?s)```sh\n(helm upgrade hcloudscale charts/hcloudscale .*?)\n```")
	cmds := block.FindAllStringSubmatch(string(readFile(t, filepath.Join(chartDir, "README.md"))), -1)
	if len(cmds) != 1 {
		t.Fatalf("README.md has %d ```sh blocks starting with `helm upgrade hcloudscale charts/hcloudscale`; want 1", len(cmds))
	}
	return strings.ReplaceAll(cmds[0][1], "\\\n", " ")
}

// earlierChart is the chart of an earlier commit and its README's
// install command.
type earlierChart struct {
	commit, version string
	chart           *chartv2.Chart
	install         values.Options
}

// earlierCharts reads from git the first chart and the newest chart of
// each version below current. Without git or the repository's history
// the test is skipped.
func earlierCharts(t *testing.T, current *semver.Version) []earlierChart {
	t.Helper()
	git := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("git", append([]string{"-C", "../.."}, args...)...).Output()
		if err != nil {
			t.Skipf("the earlier charts come from git history, which is not available here: git %s: %v", strings.Join(args, " "), err)
		}
		return string(out)
	}
	commits := strings.Fields(git("log", "--format=%H", "--", "charts/hcloudscale"))
	if len(commits) < 2 {
		t.Skipf("git history holds %d commits of the chart (a shallow clone?): no earlier chart to upgrade from", len(commits))
	}
	var out []earlierChart
	seen := map[string]bool{}
	for i, commit := range commits {
		first := i == len(commits)-1
		meta := git("show", commit+":charts/hcloudscale/Chart.yaml")
		m := regexp.MustCompile(`(?m)^version: (\S+)`).FindStringSubmatch(meta)
		if m == nil {
			t.Fatalf("Chart.yaml of %s has no version", commit)
		}
		v := semver.MustParse(m[1])
		if !v.LessThan(current) {
			if v.Equal(current) {
				continue
			}
			t.Fatalf("chart version %s of %s is not below this chart's %s: raise the version with every change of the chart", v, commit, current)
		}
		if seen[v.String()] && !first {
			continue
		}
		seen[v.String()] = true
		out = append(out, checkoutChart(t, git, commit, v.String()))
	}
	if len(out) == 0 {
		t.Fatalf("no chart version below %s in git history: Chart.yaml's version was not raised", current)
	}
	return out
}

// checkoutChart writes the chart, the READMEs and the examples of a
// commit into a directory and loads the chart and its install command.
func checkoutChart(t *testing.T, git func(...string) string, commit, version string) earlierChart {
	t.Helper()
	dir := t.TempDir()
	files := strings.Fields(git("ls-tree", "-r", "--name-only", commit, "--", "charts/hcloudscale", "examples", "README.md"))
	for _, f := range files {
		path := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(git("show", commit+":"+f)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ch, err := loader.Load(filepath.Join(dir, "charts", "hcloudscale"))
	if err != nil {
		t.Fatalf("loading the chart of %s: %v", commit, err)
	}
	block := regexp.MustCompile("(?s)```sh\n(helm install hcloudscale charts/hcloudscale .*?)\n```")
	cmds := block.FindAllStringSubmatch(string(readFile(t, filepath.Join(dir, "charts", "hcloudscale", "README.md"))), -1)
	if len(cmds) == 0 {
		t.Fatalf("the README of %s has no install command", commit)
	}
	opts, _, _ := parseHelmCommand(t, strings.ReplaceAll(cmds[0][1], "\\\n", " "), dir+"/")
	return earlierChart{commit: commit, version: version, chart: ch, install: opts}
}

// memoryConfig is a Helm configuration whose releases live in memory and
// whose cluster is the Kubernetes version of the integration tests with
// the CRDs the chart uses; nothing is sent anywhere.
func memoryConfig(t *testing.T) *action.Configuration {
	t.Helper()
	cfg := action.NewConfiguration(action.ConfigurationSetLogger(slog.NewTextHandler(io.Discard, nil)))
	cfg.Releases = storage.Init(driver.NewMemory())
	cfg.KubeClient = &kubefake.PrintingKubeClient{Out: io.Discard, LogOutput: io.Discard}
	cfg.Capabilities = testCapabilities(t)
	return cfg
}

// testCapabilities are the Kubernetes version of the integration tests'
// API server (whose own /version says v0.0.0-master) and its APIs with
// the CRDs the chart uses.
func testCapabilities(t *testing.T) *common.Capabilities {
	t.Helper()
	kv, err := common.ParseKubeVersion(kubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	caps := common.DefaultCapabilities.Copy()
	caps.KubeVersion = *kv
	caps.APIVersions = append(caps.APIVersions, withCRDAPIs...)
	return caps
}

// TestUpgradeFromPreviousChart installs the newest earlier chart version
// on the real API server with Helm's library, as its README said, plays
// cert-manager for its client certificate, and upgrades with this README's
// command while the autoscaler calls all along through a forwarder that
// plays the Service, the pods rolled as the Deployment rolls: no call may
// fail. The upgrade keeps the Lease and the client name and changes the
// private CA in nothing that issues it again (checkCAKept).
func TestUpgradeFromPreviousChart(t *testing.T) {
	s := withCRDs(t)
	const name, ns = "previous", "upgrade-previous"
	previous := earlierCharts(t, semver.MustParse(loadChart(t).Metadata.Version))[0]
	t.Logf("upgrading from chart %s (%s)", previous.version, previous.commit[:7])
	cfg := clusterHelm(t, s, ns)
	installed := helmInstall(t, cfg, previous.chart, name, ns, mergeValues(t, previous.install))
	objs := decode(t, installed.Manifest)
	svc := one[*corev1.Service](t, objs, "Service")
	host := svc.Name + "." + ns + ".svc"
	clientName := clientCertName(t, objs)
	certs := newTestCerts(t, host, clientName)
	cert, key := certs.issue(t, "", []string{clientName}, x509.ExtKeyUsageClientAuth)
	putTLSSecret(t, s.AdminClient(t), ns, svc.Name+"-client-tls", cert, key, certs.caPEM)

	pods, svcAddr, pod, calls := serveRelease(t, s, ns, host, certs, objs, cert, key)

	upgraded := decode(t, helmUpgrade(t, cfg, name, ns).Manifest)
	checkCAKept(t, objs, upgraded)
	before, after := one[*appsv1.Deployment](t, objs, "Deployment"), one[*appsv1.Deployment](t, upgraded, "Deployment")
	for _, flag := range []string{"leader-elect-resource-name", "tls-client-name"} {
		was, is := flags(before.Spec.Template.Spec.Containers[0].Args)[flag], flags(after.Spec.Template.Spec.Containers[0].Args)[flag]
		if len(was) != 1 || !slices.Equal(was, is) {
			t.Errorf("--%s %q before the upgrade, %q after; want one, kept", flag, was, is)
		}
	}
	pod = pods.roll(t, svcAddr, pod, upgraded, calls)
	calls.stop(t)
	pod.proc.terminate(t)
}
