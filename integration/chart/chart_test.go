// Package chart tests charts/hcloudscale with the Helm library: lint,
// rendering with every example values file, the values schema, the RBAC
// the values produce, and that the files generated from the chart
// (examples/externalgrpc) are current.
package chart

import (
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/cli/values"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hcloudscale/hcloudscale/config"
)

// TestLint runs helm lint, strict (warnings fail), with every example
// values file.
func TestLint(t *testing.T) {
	for _, file := range valuesFiles(t) {
		t.Run(filepath.Base(file), func(t *testing.T) {
			lint := action.NewLint()
			lint.Strict = true
			lint.Namespace = releaseNamespace
			res := lint.Run([]string{chartDir}, mergeValues(t, values.Options{ValueFiles: []string{file}}))
			if res.TotalChartsLinted != 1 {
				t.Errorf("linted %d charts; want 1", res.TotalChartsLinted)
			}
			for _, m := range res.Messages {
				t.Logf("lint: %s", m)
			}
			for _, err := range res.Errors {
				t.Errorf("lint: %v", err)
			}
		})
	}
}

// TestDefaultValuesNameWhatIsMissing: the default values alone do not
// install; one error names every value to set, all at once.
func TestDefaultValuesNameWhatIsMissing(t *testing.T) {
	_, err := render(t, mergeValues(t, values.Options{}))
	for _, want := range []string{"image.repository is required", "nodes: no pools: set nodes",
		"hcloud.token or hcloud.existingSecret is required", "clusterConfig.json or clusterConfig.existingName is required"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("default values: error %v; want one containing %q", err, want)
		}
	}
	set := []string{"image.repository=registry.example.com/hcloudscale", "nodes[0]=0:10:cpx31:fsn1:workers", "hcloud.token=x", "clusterConfig.existingName=cluster-config"}
	if _, err := render(t, mergeValues(t, values.Options{Values: set})); err != nil {
		t.Errorf("--set %q: %v", set, err)
	}
}

// TestNodeLifecycleFlags: nodeLifecycle.enabled passes --replace-nodes,
// dryRun --replace-dry-run, and a dry run without the lifecycle is refused.
func TestNodeLifecycleFlags(t *testing.T) {
	set := []string{"image.repository=registry.example.com/hcloudscale", "nodes[0]=0:10:cpx31:fsn1:workers", "hcloud.token=x", "clusterConfig.existingName=cluster-config"}
	objs := mustRender(t, mergeValues(t, values.Options{Values: append(set, "nodeLifecycle.enabled=true", "nodeLifecycle.dryRun=true")}))
	dep := one[*appsv1.Deployment](t, objs, "Deployment")
	args := flags(dep.Spec.Template.Spec.Containers[0].Args)
	if _, ok := args["replace-nodes"]; !ok {
		t.Errorf("no --replace-nodes in %q", dep.Spec.Template.Spec.Containers[0].Args)
	}
	if _, ok := args["replace-dry-run"]; !ok {
		t.Errorf("no --replace-dry-run in %q", dep.Spec.Template.Spec.Containers[0].Args)
	}
	if _, err := render(t, mergeValues(t, values.Options{Values: append(set, "nodeLifecycle.dryRun=true")})); err == nil || !strings.Contains(err.Error(), "nodeLifecycle.dryRun needs nodeLifecycle.enabled") {
		t.Errorf("dryRun alone: %v", err)
	}
}

// TestPoolsFromNodesOrClusterConfig: a release needs a pool, from nodes or
// declared in the cluster config (an entry with any of minSize, maxSize,
// serverType, location set, keys in any case, as serve reads it); a config
// in an object of the user's is left to serve. A cluster config that is
// not a JSON object fails the install, naming the value. The rule is
// serve's: every config the chart takes without nodes gives serve's
// configuration the pools wanted, and every one it refuses for want of a
// pool, serve refuses too.
func TestPoolsFromNodesOrClusterConfig(t *testing.T) {
	base := []string{"image.repository=registry.example.com/hcloudscale", "hcloud.token=x"}
	for _, tc := range []struct {
		name     string
		set      []string
		json     any // clusterConfig.json, when set
		wantErr  string
		wantArgs []string // the --nodes flags
		// The pools serve's configuration has from the rendered pod's
		// files; nil when the config is not the chart's.
		wantPools []string
	}{
		{name: "declared in JSON text", json: `{"nodeConfigs": {"workers": {"maxSize": 10, "serverType": "cpx31", "location": "fsn1"}}}`, wantPools: []string{"workers"}},
		{name: "declared as YAML", json: map[string]any{"nodeConfigs": map[string]any{"workers": map[string]any{"minSize": 1, "maxSize": 3, "serverType": "cx22", "location": "hel1"}}}, wantPools: []string{"workers"}},
		{name: "one pool of two declared", json: `{"nodeConfigs": {"a": {"cloudInit": "x"}, "b": {"location": "nbg1", "serverType": "cx22", "maxSize": 1}}}`, wantPools: []string{"b"}},
		{name: "nodeConfigs without pools", json: `{"nodeConfigs": {"workers": {"cloudInit": "x"}}}`, wantErr: "nodes: no pools"},
		{name: "no nodeConfigs", json: `{"clusterName": "prod"}`, wantErr: "nodes: no pools"},
		{name: "null nodeConfigs", json: map[string]any{"nodeConfigs": nil}, wantErr: "nodes: no pools"},
		{name: "not JSON", json: `{"nodeConfigs": {`, wantErr: "clusterConfig.json: not a JSON object"},
		{name: "not JSON, with nodes", set: []string{"nodes[0]=0:1:cpx31:fsn1:w"}, json: `nodeConfigs: {}`, wantErr: "clusterConfig.json: not a JSON object"},
		{name: "a Secret of the user's", set: []string{"clusterConfig.existingName=cc"}},
		{name: "a Secret of the user's, and a value beside it", set: []string{"clusterConfig.existingName=cc"}, json: "not JSON", wantErr: "clusterConfig.json and clusterConfig.existingName are both set"},
		{name: "keys in another case", json: `{"NodeConfigs": {"w": {"MaxSize": 1, "ServerType": "cx22", "Location": "fsn1"}}}`, wantPools: []string{"w"}},
		{name: "a null field", json: `{"nodeConfigs": {"w": {"minSize": null, "cloudInit": "#cloud-config\n"}}}`, wantErr: "nodes: no pools"},
		{name: "a null field as YAML", json: map[string]any{"nodeConfigs": map[string]any{"w": map[string]any{"maxSize": nil}}}, wantErr: "nodes: no pools"},
		{name: "an empty server type", json: `{"nodeConfigs": {"w": {"serverType": "", "cloudInit": "x"}}}`, wantErr: "nodes: no pools"},
		{name: "JSON null, with nodes", set: []string{"nodes[0]=0:1:cpx31:fsn1:w"}, json: `null`, wantErr: "clusterConfig.json: not a JSON object"},
		{name: "a JSON array", json: ` [{"nodeConfigs": {}}]`, wantErr: "clusterConfig.json: not a JSON object"},
		{name: "nodes and a declared pool", set: []string{"nodes[0]=0:1:cpx31:fsn1:w"}, json: `{"nodeConfigs": {"w": {}, "v": {"maxSize": 2, "serverType": "cx22", "location": "fsn1"}}}`,
			wantArgs: []string{"0:1:cpx31:fsn1:w"}, wantPools: []string{"w", "v"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vals := mergeValues(t, values.Options{Values: append(slices.Clone(base), tc.set...)})
			if tc.json != nil {
				cc, _ := vals["clusterConfig"].(map[string]any)
				if cc == nil {
					cc = map[string]any{}
					vals["clusterConfig"] = cc
				}
				cc["json"] = tc.json
			}
			manifest, err := render(t, vals)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v; want one containing %q", err, tc.wantErr)
				}
				if strings.HasPrefix(tc.wantErr, "nodes:") {
					doc, ok := tc.json.(string)
					if !ok {
						b, err := json.Marshal(tc.json)
						if err != nil {
							t.Fatal(err)
						}
						doc = string(b)
					}
					env := config.MapEnv(map[string]string{config.EnvToken: "x", config.EnvClusterConfigFile: "/cc.json"}, map[string]string{"/cc.json": doc})
					if _, err := config.Load(env, toStrings(lookup(vals, "nodes"))); err == nil {
						t.Errorf("serve's configuration takes %s, which the chart refuses", doc)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			objs := decode(t, manifest)
			dep := one[*appsv1.Deployment](t, objs, "Deployment")
			if got := flags(dep.Spec.Template.Spec.Containers[0].Args)["nodes"]; !slices.Equal(got, tc.wantArgs) {
				t.Errorf("--nodes %q; want %q", got, tc.wantArgs)
			}
			if tc.wantPools != nil {
				cfg, err := loadRenderedConfig(t, objs, dep)
				if err != nil {
					t.Fatalf("serve's configuration from the rendered pod: %v", err)
				}
				var pools []string
				for _, p := range cfg.Pools {
					pools = append(pools, p.Name)
				}
				if !slices.Equal(pools, tc.wantPools) {
					t.Errorf("serve's pools %q; want %q", pools, tc.wantPools)
				}
			}
		})
	}
}

// TestRenderExamples renders the chart with every example values file
// and checks what every configuration must have: built-in objects that
// decode strictly (no unknown field), objects in the release namespace
// (the Lease's Role in the Lease's), a pod that runs as the image allows,
// volumes of objects that the chart makes or the values name, and serve's
// arguments from the values.
func TestRenderExamples(t *testing.T) {
	for _, file := range valuesFiles(t) {
		t.Run(filepath.Base(file), func(t *testing.T) {
			vals := mergeValues(t, values.Options{ValueFiles: []string{file}})
			objs := mustRender(t, vals)
			checkRendered(t, objs, vals)
		})
	}
}

func checkRendered(t *testing.T, objs []*unstructured.Unstructured, vals map[string]any) {
	t.Helper()
	leaseNS := releaseNamespace
	if ns := lookup(vals, "leaderElection", "leaseNamespace"); ns != nil && ns != "" {
		leaseNS = ns.(string)
	}
	for _, o := range objs {
		if builtIn(o) {
			typed(t, o)
		}
		switch {
		case o.GetKind() == "ClusterRole" || o.GetKind() == "ClusterRoleBinding":
			if o.GetNamespace() != "" {
				t.Errorf("%s has a namespace", fmtObj(o))
			}
		case o.GetKind() == "Role" || o.GetKind() == "RoleBinding":
			if o.GetNamespace() != leaseNS {
				t.Errorf("%s; want it in the Lease's namespace %s", fmtObj(o), leaseNS)
			}
		case o.GetNamespace() != releaseNamespace:
			t.Errorf("%s; want it in the release namespace %s", fmtObj(o), releaseNamespace)
		}
	}

	dep := one[*appsv1.Deployment](t, objs, "Deployment")
	pod := dep.Spec.Template.Spec
	if sc := pod.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser != 65532 ||
		sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext %+v; want non-root 65532 (the Dockerfile's USER) with the RuntimeDefault seccomp profile", sc)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers; want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container securityContext %+v; want a read-only root, no privilege escalation, all capabilities dropped", sc)
	}
	for name, p := range map[string]*corev1.Probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		if p == nil || p.GRPC == nil || p.GRPC.Port != containerPort(t, c, "health") {
			t.Errorf("%s probe %+v; want gRPC on the health port", name, p)
		}
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources %+v; want a CPU request and a memory limit", c.Resources)
	}
	if pod.ServiceAccountName == "" || len(find(objs, "ServiceAccount")) != 1 || find(objs, "ServiceAccount")[0].GetName() != pod.ServiceAccountName {
		t.Errorf("the pod's service account %q is not the chart's", pod.ServiceAccountName)
	}

	// serve's configuration package takes what the pod would read, when
	// the chart makes the cluster config, with every --nodes pool.
	if lookupOr(vals, "", "clusterConfig", "existingName") == "" {
		cfg, err := loadRenderedConfig(t, objs, dep)
		if err != nil {
			t.Errorf("serve's configuration from the rendered pod: %v", err)
		} else {
			for _, spec := range toStrings(lookup(vals, "nodes")) {
				name := spec[strings.LastIndex(spec, ":")+1:]
				if cfg.Pool(name) == nil {
					t.Errorf("serve's configuration lacks pool %s of nodes", name)
				}
			}
			if len(cfg.Pools) == 0 {
				t.Error("serve's configuration has no pool")
			}
		}
	}

	args := flags(c.Args)
	if c.Args[0] != "serve" {
		t.Errorf("args %q; want serve first", c.Args)
	}
	wantNodes := toStrings(lookup(vals, "nodes"))
	if !slices.Equal(args["nodes"], wantNodes) {
		t.Errorf("--nodes %q; want %q from the values", args["nodes"], wantNodes)
	}
	if got := fmt.Sprint(*dep.Spec.Replicas); got != fmt.Sprint(lookupOr(vals, 2, "replicas")) {
		t.Errorf("replicas %s; want %v", got, lookupOr(vals, 2, "replicas"))
	}
	leader := lookupOr(vals, true, "leaderElection", "enabled") == true
	if _, on := args["leader-elect"]; on != leader {
		t.Errorf("--leader-elect %v; want %v", on, leader)
	}
	if !leader && dep.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("strategy %s without leader election; want Recreate, so that two processes never write at once", dep.Spec.Strategy.Type)
	}
	labeller := lookupOr(vals, true, "nodeLabeller", "enabled") == true
	if _, on := args["label-nodes"]; on != labeller {
		t.Errorf("--label-nodes %v; want %v", on, labeller)
	}
	replaces := lookupOr(vals, false, "nodeLifecycle", "enabled") == true
	if _, on := args["replace-nodes"]; on != replaces {
		t.Errorf("--replace-nodes %v; want %v", on, replaces)
	}
	if _, on := args["replace-dry-run"]; on != (replaces && lookupOr(vals, false, "nodeLifecycle", "dryRun") == true) {
		t.Errorf("--replace-dry-run %v with nodeLifecycle %v", on, lookup(vals, "nodeLifecycle"))
	}
	for _, flag := range []string{"tls-cert", "tls-key", "tls-client-ca"} {
		if len(args[flag]) != 1 || !mounted(pod, args[flag][0]) {
			t.Errorf("--%s %q is not in a mounted volume", flag, args[flag])
		}
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	for _, name := range []string{"HCLOUD_TOKEN_FILE", "HCLOUD_CLUSTER_CONFIG_FILE"} {
		if !mounted(pod, env[name]) {
			t.Errorf("%s %q is not in a mounted volume", name, env[name])
		}
	}
	if _, ok := env["HCLOUD_TOKEN"]; ok {
		t.Error("HCLOUD_TOKEN is set; want the token in a file only")
	}
	for _, m := range c.VolumeMounts {
		if m.SubPath != "" {
			t.Errorf("volume mount %s uses subPath %q: the kubelet does not update such files", m.Name, m.SubPath)
		}
	}
	// Volumes refer to objects the chart makes, or that the values name.
	made := map[string]bool{}
	for _, o := range objs {
		made[o.GetKind()+"/"+o.GetName()] = true
	}
	for _, cert := range find(objs, "Certificate") {
		secret, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
		made["Secret/"+secret] = true
	}
	given := map[string]bool{}
	for _, path := range [][]string{{"hcloud", "existingSecret"}, {"tls", "serverSecret"}} {
		if v, ok := lookup(vals, path...).(string); ok && v != "" {
			given["Secret/"+v] = true
		}
	}
	if v, ok := lookup(vals, "clusterConfig", "existingName").(string); ok && v != "" {
		given[fmt.Sprint(lookupOr(vals, "Secret", "clusterConfig", "kind"))+"/"+v] = true
	}
	if v, ok := lookup(vals, "tls", "caBundle", "configMap").(string); ok && v != "" {
		given["ConfigMap/"+v] = true
	}
	for _, v := range pod.Volumes {
		var ref string
		switch {
		case v.Secret != nil:
			ref = "Secret/" + v.Secret.SecretName
		case v.ConfigMap != nil:
			ref = "ConfigMap/" + v.ConfigMap.Name
		default:
			continue
		}
		if !made[ref] && !given[ref] {
			t.Errorf("volume %s refers to %s, which the chart does not make and the values do not name", v.Name, ref)
		}
	}
	// The Service and the disruption budget select the pods.
	svc := one[*corev1.Service](t, objs, "Service")
	for k, v := range svc.Spec.Selector {
		if dep.Spec.Template.Labels[k] != v {
			t.Errorf("Service selector %v does not select the pods %v", svc.Spec.Selector, dep.Spec.Template.Labels)
		}
	}
	for _, p := range svc.Spec.Ports {
		if containerPort(t, c, p.TargetPort.String()) != p.Port {
			t.Errorf("Service port %s: %d to %s; want the container port of that name", p.Name, p.Port, p.TargetPort.String())
		}
	}
	checkRBAC(t, objs, dep, args)
}

// allowed is every rule serve needs, by flag: the Lease (create, and get
// and update of its name) and, for the node labeller, nodes.
var allowed = map[string][]string{
	"coordination.k8s.io/leases": {"create", "get", "update"},
	"/nodes":                     {"list", "watch", "update"},
}

// checkRBAC: the Role grants the Lease serve's flags name, in their
// namespace, to the pod's service account; the ClusterRole exists only
// with --label-nodes; nothing grants more than serve needs.
func checkRBAC(t *testing.T, objs []*unstructured.Unstructured, dep *appsv1.Deployment, args map[string][]string) {
	t.Helper()
	sa := dep.Spec.Template.Spec.ServiceAccountName
	var rules []rbacv1.PolicyRule
	roles := find(objs, "Role")
	if _, on := args["leader-elect"]; on {
		name, ns := args["leader-elect-resource-name"], args["leader-elect-resource-namespace"]
		if len(name) != 1 || len(ns) != 1 {
			t.Fatalf("--leader-elect-resource-name %q, --leader-elect-resource-namespace %q; want both, once", name, ns)
		}
		role := one[*rbacv1.Role](t, objs, "Role")
		if role.Namespace != ns[0] {
			t.Errorf("Role in %s; want the Lease's namespace %s", role.Namespace, ns[0])
		}
		granted := map[string]bool{}
		for _, r := range role.Rules {
			if slices.Contains(r.APIGroups, "coordination.k8s.io") && slices.Contains(r.Resources, "leases") &&
				(len(r.ResourceNames) == 0 || slices.Contains(r.ResourceNames, name[0])) {
				for _, v := range r.Verbs {
					granted[v] = true
				}
			}
			if len(r.ResourceNames) > 0 && !slices.Equal(r.ResourceNames, name) {
				t.Errorf("Role rule %+v names another Lease than %s", r, name[0])
			}
		}
		for _, v := range []string{"get", "create", "update"} {
			if !granted[v] {
				t.Errorf("Role does not grant %s on the Lease %s/%s", v, ns[0], name[0])
			}
		}
		rb := one[*rbacv1.RoleBinding](t, objs, "RoleBinding")
		if rb.Namespace != ns[0] || rb.RoleRef.Name != role.Name || rb.RoleRef.Kind != "Role" ||
			len(rb.Subjects) != 1 || rb.Subjects[0].Kind != "ServiceAccount" || rb.Subjects[0].Name != sa || rb.Subjects[0].Namespace != dep.Namespace {
			t.Errorf("RoleBinding %+v; want the Role bound to %s/%s", rb, dep.Namespace, sa)
		}
		rules = append(rules, role.Rules...)
	} else if len(roles) > 0 || len(find(objs, "RoleBinding")) > 0 {
		t.Errorf("a Role or RoleBinding without --leader-elect: %q", kinds(objs))
	}
	if _, on := args["label-nodes"]; on {
		cr := one[*rbacv1.ClusterRole](t, objs, "ClusterRole")
		crb := one[*rbacv1.ClusterRoleBinding](t, objs, "ClusterRoleBinding")
		if crb.RoleRef.Name != cr.Name || len(crb.Subjects) != 1 || crb.Subjects[0].Name != sa || crb.Subjects[0].Namespace != dep.Namespace {
			t.Errorf("ClusterRoleBinding %+v; want the ClusterRole bound to %s/%s", crb, dep.Namespace, sa)
		}
		var verbs []string
		for _, r := range cr.Rules {
			verbs = append(verbs, r.Verbs...)
		}
		if !slices.Equal(verbs, allowed["/nodes"]) {
			t.Errorf("ClusterRole verbs %q; want %q, what the node labeller does", verbs, allowed["/nodes"])
		}
		rules = append(rules, cr.Rules...)
	} else if len(find(objs, "ClusterRole"))+len(find(objs, "ClusterRoleBinding")) > 0 {
		t.Errorf("a ClusterRole without --label-nodes: %q", kinds(objs))
	}
	for _, r := range rules {
		if len(r.NonResourceURLs) > 0 {
			t.Errorf("rule %+v grants non-resource URLs", r)
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					if !slices.Contains(allowed[g+"/"+res], v) {
						t.Errorf("rule %+v grants %s on %s/%s, which serve does not use", r, v, g, res)
					}
				}
			}
		}
	}
}

// TestRBACFollowsTheLeaseFlags: the Lease's name and namespace from the
// values reach serve's flags and the Role together; turning leader
// election or the labeller off removes their RBAC.
func TestRBACFollowsTheLeaseFlags(t *testing.T) {
	minimal := filepath.Join(chartDir, "ci", "minimal-values.yaml")
	for _, tc := range []struct {
		name      string
		set       []string
		wantKinds []string // RBAC kinds
	}{
		{"defaults", nil, []string{"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}},
		{"lease name", []string{"leaderElection.leaseName=other-lock"}, []string{"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}},
		{"lease namespace", []string{"leaderElection.leaseName=lock", "leaderElection.leaseNamespace=leases"}, []string{"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}},
		{"no labeller", []string{"nodeLabeller.enabled=false"}, []string{"Role", "RoleBinding"}},
		{"no leader election", []string{"leaderElection.enabled=false", "replicas=1"}, []string{"ClusterRole", "ClusterRoleBinding"}},
		{"neither", []string{"leaderElection.enabled=false", "replicas=1", "nodeLabeller.enabled=false"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vals := mergeValues(t, values.Options{ValueFiles: []string{minimal}, Values: tc.set})
			objs := mustRender(t, vals)
			checkRendered(t, objs, vals)
			var got []string
			for _, o := range objs {
				if strings.HasPrefix(o.GetAPIVersion(), "rbac.authorization.k8s.io/") {
					got = append(got, o.GetKind())
				}
			}
			slices.Sort(got)
			if diff := cmp.Diff(tc.wantKinds, got); diff != "" {
				t.Errorf("RBAC kinds (-want +got):\n%s", diff)
			}
			dep := one[*appsv1.Deployment](t, objs, "Deployment")
			args := flags(dep.Spec.Template.Spec.Containers[0].Args)
			if name := lookup(vals, "leaderElection", "leaseName"); name != nil && lookup(vals, "leaderElection", "enabled") != false {
				if !slices.Equal(args["leader-elect-resource-name"], []string{name.(string)}) {
					t.Errorf("--leader-elect-resource-name %q; want %s", args["leader-elect-resource-name"], name)
				}
			}
		})
	}
	// More than one replica needs leader election.
	_, err := render(t, mergeValues(t, values.Options{ValueFiles: []string{minimal}, Values: []string{"leaderElection.enabled=false"}}))
	if err == nil || !strings.Contains(err.Error(), "replicas: more than one replica needs leaderElection.enabled") {
		t.Errorf("two replicas without leader election: error %v; want one naming replicas", err)
	}
}

// TestSchemaRejectsTypos: a misspelt or misplaced key, or a value of the
// wrong form, fails the install with an error that names it.
func TestSchemaRejectsTypos(t *testing.T) {
	minimal := filepath.Join(chartDir, "ci", "minimal-values.yaml")
	for _, tc := range []struct {
		set  string
		want []string // in the error
	}{
		{"replica=3", []string{"additional properties 'replica' not allowed"}},
		{"leaderElection.leaseNmae=x", []string{"/leaderElection", "'leaseNmae' not allowed"}},
		{"nodeLabeler.enabled=false", []string{"'nodeLabeler' not allowed"}},
		{"hcloud.publicIpv4=false", []string{"/hcloud", "'publicIpv4' not allowed"}},
		{"metrics.serviceMonitor.enable=true", []string{"/metrics/serviceMonitor", "'enable' not allowed"}},
		{"tls.certManager.issuerRef.kind=Issuers", []string{"/tls/certManager/issuerRef/kind"}},
		{"nodes[0]=0:10:cpx31:workers", []string{"/nodes/0", "does not match pattern"}},
		{"serve.logLevel=verbose", []string{"/serve/logLevel"}},
		{"serve.rpcTimeout=4sec", []string{"/serve/rpcTimeout", "does not match pattern"}},
		{"ports.grpc=70000", []string{"/ports/grpc"}},
		{"hcloud.publicIPv4=yes", []string{"/hcloud/publicIPv4"}},
		{"clusterConfig.kind=configmap", []string{"/clusterConfig/kind"}},
		{"tls.caBundle.configmap=hcloudscale-ca", []string{"/tls/caBundle", "'configmap' not allowed"}},
		{"tls.caBundle.configMap=Hcloudscale_CA", []string{"/tls/caBundle/configMap", "does not match pattern"}},
		{"autoscalerCloudConfig.caBundleDir=ca-bundle", []string{"/autoscalerCloudConfig/caBundleDir", "does not match pattern"}},
	} {
		t.Run(tc.set, func(t *testing.T) {
			vals := mergeValues(t, values.Options{ValueFiles: []string{minimal}, Values: []string{tc.set}})
			_, err := render(t, vals)
			if err == nil {
				t.Fatalf("--set %s: installs; want a schema error", tc.set)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("--set %s: error %q; want it to contain %q", tc.set, err, w)
				}
			}
		})
	}
	// Every level the chart defines refuses unknown keys.
	schema := readJSON(t, filepath.Join(chartDir, "values.schema.json"))
	var walk func(path string, s map[string]any)
	walk = func(path string, s map[string]any) {
		props, ok := s["properties"].(map[string]any)
		if !ok {
			return
		}
		if s["additionalProperties"] != false {
			t.Errorf("values.schema.json %s: additionalProperties is not false", path)
		}
		for _, k := range slices.Sorted(maps.Keys(props)) {
			walk(path+"."+k, props[k].(map[string]any))
		}
	}
	walk("(root)", schema)
	// And the schema knows every key of values.yaml.
	defaults := mergeValues(t, values.Options{ValueFiles: []string{filepath.Join(chartDir, "values.yaml")}})
	if _, err := render(t, mergeValues(t, values.Options{ValueFiles: []string{filepath.Join(chartDir, "values.yaml"), minimal}})); err != nil {
		t.Errorf("values.yaml with the minimum: %v", err)
	}
	if len(defaults) == 0 {
		t.Error("values.yaml is empty")
	}
}

// TestReadmeInstall renders each install command of charts/hcloudscale's
// README (the documented minimum, and the pools in the cluster config)
// with its --set, --set-file and -f flags.
func TestReadmeInstall(t *testing.T) {
	for name, opts := range readmeInstalls(t) {
		t.Run(name, func(t *testing.T) {
			vals := mergeValues(t, opts)
			objs := mustRender(t, vals)
			checkRendered(t, objs, vals)
		})
	}
}

// readmeInstalls returns the values of each of the README's
// `helm install hcloudscale charts/hcloudscale ...` commands, named
// "README install N" in the README's order.
func readmeInstalls(t *testing.T) map[string]values.Options {
	t.Helper()
	block := regexp.MustCompile("(?s)```sh\n(helm install hcloudscale charts/hcloudscale .*?)\n```")
	readme := string(readFile(t, filepath.Join(chartDir, "README.md")))
	cmds := block.FindAllStringSubmatch(readme, -1)
	if len(cmds) < 2 {
		t.Fatalf("README.md has %d ```sh blocks starting with `helm install hcloudscale charts/hcloudscale`; want the minimum and the one with pools in the cluster config", len(cmds))
	}
	// The repository's README has the minimum too.
	root := block.FindAllStringSubmatch(string(readFile(t, "../../README.md")), -1)
	if len(root) != 1 {
		t.Fatalf("the repository's README.md has %d chart install commands; want 1", len(root))
	}
	cmds = append(cmds, root...)
	out := map[string]values.Options{}
	for n, cmd := range cmds {
		line := strings.ReplaceAll(cmd[1], "\\\n", " ")
		opts, namespace, switches := parseHelmCommand(t, line, "../../")
		if len(switches) > 0 {
			t.Errorf("README install command %q: %q are not understood by this test", line, switches)
		}
		if namespace != releaseNamespace {
			t.Errorf("README installs into %q; the tests and examples assume %s", namespace, releaseNamespace)
		}
		if len(opts.Values) == 0 || len(opts.FileValues)+len(opts.ValueFiles) == 0 {
			t.Errorf("README install command %q: want --set flags and a cluster config from a file", line)
		}
		out[fmt.Sprintf("README install %d", n+1)] = opts
	}
	return out
}

// parseHelmCommand reads a `helm install|upgrade hcloudscale
// charts/hcloudscale ...` command line: its values (files named from
// root, the repository's root), its namespace, and the flags without a
// value it does not know (e.g. --reset-then-reuse-values).
func parseHelmCommand(t *testing.T, line, root string) (opts values.Options, namespace string, switches []string) {
	t.Helper()
	fields := regexp.MustCompile(`'[^']*'|\S+`).FindAllString(line, -1)
	for i := 0; i < len(fields); i++ {
		arg := func() string {
			i++
			if i >= len(fields) {
				t.Fatalf("%s without a value", fields[i-1])
			}
			return strings.Trim(fields[i], "'")
		}
		switch fields[i] {
		case "--namespace", "-n":
			namespace = arg()
		case "--set":
			opts.Values = append(opts.Values, arg())
		case "--set-file":
			k, v, _ := strings.Cut(arg(), "=")
			opts.FileValues = append(opts.FileValues, k+"="+root+v)
		case "-f", "--values":
			opts.ValueFiles = append(opts.ValueFiles, root+arg())
		case "helm", "install", "upgrade", "hcloudscale", "charts/hcloudscale":
		default:
			switches = append(switches, fields[i])
		}
	}
	return opts, namespace, switches
}

// loadRenderedConfig loads serve's configuration as the rendered pod
// would: its --nodes flags, its literal environment, and the files of the
// chart's Secrets and ConfigMaps at the paths its *_FILE variables name.
func loadRenderedConfig(t *testing.T, objs []*unstructured.Unstructured, dep *appsv1.Deployment) (*config.Config, error) {
	t.Helper()
	pod := dep.Spec.Template.Spec
	c := pod.Containers[0]
	volFiles := volumeFiles(t, objs, pod, "test-token")
	vars := map[string]string{}
	files := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil {
			continue
		}
		vars[e.Name] = e.Value
		if !strings.HasSuffix(e.Name, "_FILE") {
			continue
		}
		file, _ := inVolume(c, e.Value)
		b, ok := volFiles[file]
		if !ok {
			t.Fatalf("%s=%s: no file of the chart's objects there", e.Name, e.Value)
		}
		files[e.Value] = string(b)
	}
	return config.Load(config.MapEnv(vars, files), flags(c.Args)["nodes"])
}

// flags maps serve's --name=value arguments to their values; a flag
// without a value maps to an empty list.
func flags(args []string) map[string][]string {
	out := map[string][]string{}
	for _, a := range args[1:] {
		name, value, hasValue := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !hasValue {
			out[name] = out[name][:0:0]
			continue
		}
		out[name] = append(out[name], value)
	}
	return out
}

func containerPort(t *testing.T, c corev1.Container, name string) int32 {
	t.Helper()
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	t.Errorf("no container port %q", name)
	return 0
}

// mounted reports whether path is in a volume the container mounts.
func mounted(pod corev1.PodSpec, path string) bool {
	for _, m := range pod.Containers[0].VolumeMounts {
		if path != "" && strings.HasPrefix(path, strings.TrimSuffix(m.MountPath, "/")+"/") {
			return true
		}
	}
	return false
}

// lookup returns the value at path in nested values, or nil.
func lookup(vals map[string]any, path ...string) any {
	var v any = vals
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func lookupOr(vals map[string]any, def any, path ...string) any {
	if v := lookup(vals, path...); v != nil {
		return v
	}
	return def
}

func toStrings(v any) []string {
	var out []string
	if l, ok := v.([]any); ok {
		for _, e := range l {
			out = append(out, fmt.Sprint(e))
		}
	}
	return out
}
