package chart

import (
	"encoding/base64"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/cli/values"
	appsv1 "k8s.io/api/apps/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// TestRBACCreateFalseRendersNoRBAC: rbac.create=false makes no Role,
// ClusterRole or binding, with every feature that needs one on.
func TestRBACCreateFalseRendersNoRBAC(t *testing.T) {
	objs := mustMinimal(t, "rbac.create=false", "nodeLifecycle.enabled=true", "nodeLabeller.enabled=true")
	for _, o := range objs {
		if strings.HasPrefix(o.GetAPIVersion(), "rbac.authorization.k8s.io/") {
			t.Errorf("rbac.create=false renders %s", fmtObj(o))
		}
	}
}

// TestNetworkPolicySelector: the official chart's pod label passes
// through; a selector that selects nothing in particular (empty, only a
// misspelt key, empty matchLabels) is refused, naming the value.
func TestNetworkPolicySelector(t *testing.T) {
	objs := decodeFile(t, "full-values.yaml")
	np := one[*networkingv1.NetworkPolicy](t, objs, "NetworkPolicy")
	// The official chart names its pods <cloudProvider>-cluster-autoscaler
	// (its _helpers.tpl "cluster-autoscaler.name").
	if got := np.Spec.Ingress[0].From[0].PodSelector.MatchLabels["app.kubernetes.io/name"]; got != "externalgrpc-cluster-autoscaler" {
		t.Errorf("full-values.yaml's clientPodSelector app.kubernetes.io/name %q; want the official chart's externalgrpc-cluster-autoscaler", got)
	}
	objs = mustMinimal(t, "networkPolicy.enabled=true", "networkPolicy.clientPodSelector.matchExpressions[0].key=app", "networkPolicy.clientPodSelector.matchExpressions[0].operator=Exists")
	if sel := one[*networkingv1.NetworkPolicy](t, objs, "NetworkPolicy").Spec.Ingress[0].From[0].PodSelector; len(sel.MatchExpressions) != 1 {
		t.Errorf("matchExpressions selector rendered as %+v", sel)
	}
	for _, tc := range []struct {
		name string
		set  []string
		want string
	}{
		{"empty", nil, "networkPolicy.clientPodSelector: empty"},
		{"misspelt key", []string{"networkPolicy.clientPodSelector.matchLabel.app=x"}, "'matchLabel' not allowed"},
		{"null matchLabels", []string{"networkPolicy.clientPodSelector.matchLabels=null"}, "/networkPolicy/clientPodSelector/matchLabels"},
		{"bad operator", []string{"networkPolicy.clientPodSelector.matchExpressions[0].key=app", "networkPolicy.clientPodSelector.matchExpressions[0].operator=Is"}, "/networkPolicy/clientPodSelector/matchExpressions/0/operator"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := minimal(t, append([]string{"networkPolicy.enabled=true"}, tc.set...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v; want one containing %q", err, tc.want)
			}
		})
	}
}

// TestLeasePerRelease: two releases in one namespace get Leases of their
// own by default, each Role allowing its own; a set name is used as is.
func TestLeasePerRelease(t *testing.T) {
	lease := func(release string, set ...string) (string, []string) {
		vals := mergeValues(t, values.Options{ValueFiles: []string{filepath.Join(chartDir, "ci", "minimal-values.yaml")}, Values: set})
		manifest, err := renderChart(t, loadChart(t), release, releaseNamespace, vals)
		if err != nil {
			t.Fatal(err)
		}
		objs := decode(t, manifest)
		args := flags(one[*appsv1.Deployment](t, objs, "Deployment").Spec.Template.Spec.Containers[0].Args)
		var names []string
		for _, r := range one[*rbacv1.Role](t, objs, "Role").Rules {
			names = append(names, r.ResourceNames...)
		}
		return strings.Join(args["leader-elect-resource-name"], ","), names
	}
	a, aRole := lease("hcloudscale")
	b, bRole := lease("scaler-b")
	if a == b {
		t.Errorf("releases hcloudscale and scaler-b share the Lease %q", a)
	}
	// The release named as the chart keeps the Lease the earlier default
	// named, so that its upgrade keeps one Lease without a lookup.
	if a != "hcloudscale" || b != "scaler-b-hcloudscale" {
		t.Errorf("Leases %q and %q; want hcloudscale and scaler-b-hcloudscale (the full names)", a, b)
	}
	for name, role := range map[string][]string{a: aRole, b: bRole} {
		if !slices.Equal(role, []string{name}) {
			t.Errorf("Role allows Leases %q; want %q", role, name)
		}
	}
	if got, role := lease("scaler-b", "leaderElection.leaseName=shared-lock"); got != "shared-lock" || !slices.Equal(role, []string{"shared-lock"}) {
		t.Errorf("leaseName=shared-lock: flag %q, Role %q", got, role)
	}
}

// TestClusterScopedNamesPerNamespace: one release name in two namespaces
// renders ClusterRoles and bindings of different names, each binding its
// own namespace's service account.
func TestClusterScopedNamesPerNamespace(t *testing.T) {
	vals := mergeValues(t, values.Options{ValueFiles: []string{filepath.Join(chartDir, "ci", "minimal-values.yaml")}, Values: []string{"nodeLifecycle.enabled=true"}})
	seen := map[string]string{}
	for _, ns := range []string{"team-a", "team-b"} {
		manifest, err := renderIn(t, ns, vals)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range decode(t, manifest) {
			if o.GetKind() != "ClusterRole" && o.GetKind() != "ClusterRoleBinding" {
				continue
			}
			key := o.GetKind() + "/" + o.GetName()
			if other, dup := seen[key]; dup {
				t.Errorf("%s in namespaces %s and %s", key, other, ns)
			}
			seen[key] = ns
			if !strings.Contains(o.GetName(), ns) {
				t.Errorf("%s does not name the namespace %s", key, ns)
			}
		}
	}
	if len(seen) != 8 {
		t.Errorf("cluster-scoped objects %q; want 2 ClusterRoles and 2 bindings per namespace", slices.Sorted(func(yield func(string) bool) {
			for k := range seen {
				if !yield(k) {
					return
				}
			}
		}))
	}
}

// TestValuesRefusedBeforeInstall: values that Kubernetes, cert-manager or
// serve would refuse after the install (or that the chart would ignore)
// fail it, naming the values; all of them at once.
func TestValuesRefusedBeforeInstall(t *testing.T) {
	cases := []struct {
		set  []string
		want string
	}{
		{[]string{"rollingUpdate.maxSurge=0", "rollingUpdate.maxUnavailable=0"}, "rollingUpdate.maxSurge and rollingUpdate.maxUnavailable are both 0"},
		{[]string{"rollingUpdate.maxSurge=0%", "rollingUpdate.maxUnavailable=0"}, "rollingUpdate.maxSurge and rollingUpdate.maxUnavailable are both 0"},
		{[]string{"podDisruptionBudget.maxUnavailable=one"}, "/podDisruptionBudget/maxUnavailable"},
		{[]string{"rollingUpdate.maxSurge=-1"}, "/rollingUpdate/maxSurge"},
		{[]string{"tls.certManager.duration=30m", "tls.certManager.renewBefore=10m"}, "tls.certManager.duration: 30m is under an hour"},
		{[]string{"tls.certManager.renewBefore=8760h"}, "tls.certManager.renewBefore (8760h) must stay below tls.certManager.duration (8760h)"},
		{[]string{"tls.certManager.duration=2160h"}, "tls.certManager.renewBefore (2160h) must stay below tls.certManager.duration (2160h)"},
		{[]string{"tls.certManager.renewBefore=1m"}, "tls.certManager.renewBefore: 1m is under 5m"},
		{[]string{"ports.health=8086"}, "ports.grpc and ports.health are both 8086"},
		{[]string{"ports.metrics=8087"}, "ports.health and ports.metrics are both 8087"},
		{[]string{"nodes[0]=5:2:cpx31:fsn1:workers"}, `nodes[0]: "5:2:cpx31:fsn1:workers" has a min size (5) above its max size (2)`},
		{[]string{"rbac.extraRules[0].apiGroups[0]=", "rbac.extraRules[0].resources[0]=configmaps", "rbac.extraRules[0].verbs[0]=get", "leaderElection.enabled=false", "replicas=1"}, "rbac.extraRules are added to the Lease's Role"},
		{[]string{"rbac.extraRules[0].apiGroups[0]=", "rbac.extraRules[0].resources[0]=configmaps", "rbac.extraRules[0].verbs[0]=get", "rbac.create=false"}, "rbac.extraRules are added to the Lease's Role"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.set, ","), func(t *testing.T) {
			_, err := minimal(t, tc.set...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("--set %q: error %v; want one containing %q", tc.set, err, tc.want)
			}
		})
	}
	// Checks (not the schema's) report together: one error lists each.
	_, err := minimal(t, "rollingUpdate.maxSurge=0", "rollingUpdate.maxUnavailable=0", "ports.health=8086", "nodes[0]=5:2:cpx31:fsn1:workers", "tls.certManager.renewBefore=8760h")
	for _, want := range []string{"rollingUpdate.maxSurge", "ports.grpc and ports.health", "nodes[0]", "tls.certManager.renewBefore (8760h)"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("several bad values: error %v; want it to name %q", err, want)
		}
	}
	// Values just inside the bounds install.
	if _, err := minimal(t, "rollingUpdate.maxSurge=25%", "rollingUpdate.maxUnavailable=0", "podDisruptionBudget.maxUnavailable=50%",
		"tls.certManager.duration=1h", "tls.certManager.renewBefore=59m", "nodes[0]=3:3:cpx31:fsn1:workers"); err != nil {
		t.Errorf("values inside the bounds: %v", err)
	}
}

// TestControlPlaneLayoutDrains: the one-control-plane-node layout has no
// disruption budget, which would hold the drain of that node at its
// second replica.
func TestControlPlaneLayoutDrains(t *testing.T) {
	if pdbs := find(decodeFile(t, "control-plane-values.yaml"), "PodDisruptionBudget"); len(pdbs) != 0 {
		t.Errorf("control-plane-values.yaml renders %s", fmtObj(pdbs[0]))
	}
}

// TestGeneratedHeaderCommand: the command that the generated examples'
// header gives renders them, with exactly its --api-versions; without
// them it fails.
func TestGeneratedHeaderCommand(t *testing.T) {
	var apis []string
	for _, m := range regexp.MustCompile(`--api-versions (\S+)`).FindAllStringSubmatch(generatedHeader, -1) {
		apis = append(apis, m[1])
	}
	vals := mergeValues(t, values.Options{ValueFiles: []string{filepath.Join(exampleDir, "hcloudscale-values.yaml")}})
	if _, err := renderWithAPIs(t, loadChart(t), releaseName, releaseNamespace, vals, apis); err != nil {
		t.Errorf("the header's command (--api-versions %q): %v", apis, err)
	}
	if _, err := renderWithAPIs(t, loadChart(t), releaseName, releaseNamespace, vals, nil); err == nil {
		t.Error("rendering without --api-versions succeeds: the test does not show the header's flag is needed")
	}
}

// TestLifecycleRBACIsWhatTheCodeCalls: the node lifecycle's ClusterRole
// grants exactly the requests of packages lifecycle and nodedrain (and
// the Events of serve's recorder); a dry run, which plans only, the reads.
func TestLifecycleRBACIsWhatTheCodeCalls(t *testing.T) {
	reads := []string{"/nodes get", "/nodes list", "/nodes watch", "/pods list", "policy/poddisruptionbudgets list"}
	writes := []string{"/events create", "/events patch", "/nodes patch", "/pods/eviction create"}
	for _, tc := range []struct {
		name string
		set  []string
		want []string
	}{
		{"replacing", []string{"nodeLifecycle.enabled=true"}, append(slices.Clone(reads), writes...)},
		{"dry run", []string{"nodeLifecycle.enabled=true", "nodeLifecycle.dryRun=true"}, reads},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, o := range find(mustMinimal(t, append(tc.set, "nodeLabeller.enabled=false")...), "ClusterRole") {
				for _, r := range typed(t, o).(*rbacv1.ClusterRole).Rules {
					for _, g := range r.APIGroups {
						for _, res := range r.Resources {
							for _, v := range r.Verbs {
								got = append(got, g+"/"+res+" "+v)
							}
						}
					}
				}
			}
			slices.Sort(got)
			slices.Sort(tc.want)
			if !slices.Equal(got, tc.want) {
				t.Errorf("the lifecycle's ClusterRole grants %q; want %q", got, tc.want)
			}
		})
	}
}

// TestSharedIssuerClientName: with a shared issuerRef, or a trust bundle
// (tls.caBundle, whose CAs may sign for others) beside the chart's own CA,
// the client name is random per release (two renders differ, so nobody
// can predict it), the same in the client Certificate, serve's
// --tls-client-name and the Secret that keeps it for upgrades; with the
// chart's own CA alone, or a set tls.clientName, it is the name given.
func TestSharedIssuerClientName(t *testing.T) {
	shared := []string{"tls.certManager.issuerRef.name=shared", "tls.certManager.issuerRef.kind=ClusterIssuer"}
	for _, set := range [][]string{shared, {"tls.caBundle.configMap=hcloudscale-ca"}} {
		checkRandomClientName(t, set)
	}
	for _, set := range [][]string{nil, append(slices.Clone(shared), "tls.clientName=my-autoscaler")} {
		objs := mustMinimal(t, set...)
		want := "hcloudscale-autoscaler"
		if set != nil {
			want = "my-autoscaler"
		}
		if got := clientCertName(t, objs); got != want {
			t.Errorf("--set %q: client name %q; want %q", set, got, want)
		}
		for _, s := range find(objs, "Secret") {
			if strings.HasSuffix(s.GetName(), "-client-name") {
				t.Errorf("--set %q renders %s", set, fmtObj(s))
			}
		}
	}
}

// checkRandomClientName renders the minimal values with set twice: each
// render has a client name of 22 random characters after
// hcloudscale-autoscaler-, the same in the client Certificate, serve's
// --tls-client-name and the Secret that keeps it, and the two differ.
func checkRandomClientName(t *testing.T, set []string) {
	t.Helper()
	names := map[string]bool{}
	for range 2 {
		objs := mustMinimal(t, set...)
		name := clientCertName(t, objs)
		args := flags(one[*appsv1.Deployment](t, objs, "Deployment").Spec.Template.Spec.Containers[0].Args)
		var kept string
		for _, s := range find(objs, "Secret") {
			if s.GetName() == releaseName+"-client-name" {
				kept = fmt.Sprint(s.Object["data"].(map[string]any)["name"])
			}
		}
		if !slices.Equal(args["tls-client-name"], []string{name}) || kept != base64.StdEncoding.EncodeToString([]byte(name)) {
			t.Errorf("--set %q: client Certificate names %q, serve accepts %q, the Secret keeps %q", set, name, args["tls-client-name"], kept)
		}
		if !regexp.MustCompile(`^hcloudscale-autoscaler-[a-z0-9]{22}$`).MatchString(name) {
			t.Errorf("--set %q: client name %q; want hcloudscale-autoscaler- and 22 random characters", set, name)
		}
		names[name] = true
	}
	if len(names) != 2 {
		t.Errorf("--set %q: two installs got the client names %v; want two random ones", set, names)
	}
}
