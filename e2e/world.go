package e2e

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	"sigs.k8s.io/cluster-autoscaler/pkg/cloudprovider"
	"sigs.k8s.io/cluster-autoscaler/pkg/clusterstate/api"
	caconfig "sigs.k8s.io/cluster-autoscaler/pkg/config"
	"sigs.k8s.io/cluster-autoscaler/pkg/core"
	"sigs.k8s.io/cluster-autoscaler/pkg/test/integration"
	"sigs.k8s.io/yaml"

	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

// Provider is a kind of cloud provider the scenarios run against: our
// in-process adapter, or the autoscaler's externalgrpc client talking to
// `hcloudscale serve`.
type Provider interface {
	// Name is the provider's name in results.
	Name() string
	// Start starts a provider for setup. It ends with the test or with
	// Stop.
	Start(t *testing.T, setup Setup) (cloudprovider.CloudProvider, error)
	// Stop stops p as abruptly as the kind allows: in-flight work is
	// cancelled, nothing is handed over.
	Stop(p cloudprovider.CloudProvider) error
}

// Setup is what a provider is started with.
type Setup struct {
	// Env holds the HCLOUD_* variables (token, endpoint, cluster config).
	Env map[string]string
	// Nodes are the --nodes specs of the pools.
	Nodes []string
	// ListTTL is the time between two server listings to configure.
	ListTTL time.Duration
	// Interval is the action poll interval to configure.
	Interval time.Duration
	// UnavailableTTL is how long a capacity error keeps an offering
	// sold out; zero: the provider's default.
	UnavailableTTL time.Duration
	// SpreadGrace is how long an empty spread placement group the
	// provider created stays before it is deleted; zero: the provider's
	// default.
	SpreadGrace time.Duration
}

// Timing of every scenario: a tenth or less of the production defaults,
// so that a scenario takes seconds.
const (
	loopPeriod      = time.Second            // --scan-interval (10 s)
	unneededTime    = 3 * time.Second        // --scale-down-unneeded-time (10 min)
	provisionTime   = 10 * time.Second       // --max-node-provision-time (15 min)
	listTTL         = 2 * time.Second        // hcloudscale's listing TTL (1 min)
	actionDuration  = 300 * time.Millisecond // every fake API action
	createDuration  = 500 * time.Millisecond // create_server
	kubeletInterval = 100 * time.Millisecond
	clusterName     = "e2e"
	statusConfigMap = "cluster-autoscaler-status"
	statusNamespace = "kube-system"
)

// poolSpec is one pool of a scenario: its --nodes spec, what its cluster
// config says, and how its servers join the cluster.
type poolSpec struct {
	name, serverType, location string
	min, max                   int
	labels                     map[string]string
	taints                     []corev1.Taint
	placementGroup             string
	// cloudInit is the pool's cloud-init ("#cloud-config\n" when empty);
	// replace its replace object of the cluster config (nil: none).
	cloudInit string
	replace   map[string]any
	// offerings are the pool's offerings after its own type and
	// location, as {serverType, location}.
	offerings [][2]string
	// private turns off both public IPs of the pool's servers
	// (publicIPv4 and publicIPv6 false); it needs withNetwork.
	private bool
	// spread puts the pool's servers in spread placement groups the
	// provider creates and deletes (spreadGroups).
	spread bool
}

func (p poolSpec) nodesFlag() string {
	return fmt.Sprintf("%d:%d:%s:%s:%s", p.min, p.max, p.serverType, p.location, p.name)
}

// world is one scenario: the fake Hetzner API, the fake Kubernetes of the
// autoscaler's integration framework, the simulated kubelet and
// scheduler, our provider and the autoscaler's real loop.
type world struct {
	t     *testing.T
	ctx   context.Context
	fake  *hcloudtest.Server
	pools []poolSpec
	infra *integration.TestInfrastructure
	kube  *kubeClients

	kind     Provider
	kubelet  *Kubelet
	sched    *Scheduler
	provider *swappable
	ca       core.Autoscaler
	options  caconfig.AutoscalingOptions
	listTTL  time.Duration
	// priorities, if set, are the priority expander's (withPriorities);
	// priorityData, if set, is its ConfigMap's data as written
	// (withPriorityData).
	priorities   map[int][]string
	priorityData string
	// unavailableTTL is Setup.UnavailableTTL, spreadGrace
	// Setup.SpreadGrace.
	unavailableTTL time.Duration
	spreadGrace    time.Duration
	// network is HCLOUD_NETWORK (withNetwork), networkID its ID; empty:
	// none.
	network   string
	networkID int64

	stats stats
	bgErr chan error
	// background is write-locked while the kubelet's and the scheduler's
	// steps are paused (pauseBackground); each step holds a read lock.
	background sync.RWMutex

	placementGroups map[string]int64 // IDs by name

	// file is set when the pools are declared in a cluster-config file
	// (withConfigFile) instead of --nodes.
	file *configFile
	// replace is the cluster config's top-level replace object; nil: none.
	replace map[string]any
}

func (w *world) placementGroupID(name string) int64 { return w.placementGroups[name] }

// stats are the figures a scenario records.
type stats struct {
	loops      int
	loopTime   time.Duration   // inside RunOnce
	loopTimes  []time.Duration // of each RunOnce
	loopStarts []time.Time     // of each RunOnce
	loopErrs   int
	start      time.Time
}

type kubeClients = integration.FakeSet

type worldOption func(*world)

// withBackoff sets the autoscaler's node-group backoff to its flag
// defaults; the integration defaults have none.
func withBackoff(w *world) {
	o := &w.options
	o.InitialNodeGroupBackoffDuration = 5 * time.Minute
	o.MaxNodeGroupBackoffDuration = 30 * time.Minute
	o.NodeGroupBackoffResetTimeout = 3 * time.Hour
}

// withNetwork adds a network of that name to the fake and puts every
// pool's servers on it (HCLOUD_NETWORK).
func withNetwork(name string) worldOption {
	return func(w *world) {
		id, err := w.fake.AddNetwork(hcloudtest.Network{Name: name, IPRange: "10.0.0.0/8",
			Subnets: []hcloudtest.Subnet{{IPRange: "10.0.0.0/16"}}})
		if err != nil {
			w.t.Fatal(err)
		}
		w.network, w.networkID = name, id
	}
}

// withOptions changes the autoscaler's options.
func withOptions(f func(*caconfig.AutoscalingOptions)) worldOption {
	return func(w *world) { f(&w.options) }
}

// withServers adds n running servers of pool to the fake before the
// provider starts, as a cluster that exists already.
func withServers(pool string, n int) worldOption {
	return func(w *world) {
		for i := range n {
			if _, err := w.fake.AddServer(hcloudtest.ServerInfo{Name: fmt.Sprintf("%s-%05d", pool, i),
				Labels: map[string]string{ServerLabelNodeGroup: pool, "hcloudscale/cluster": clusterName}}); err != nil {
				w.t.Fatal(err)
			}
		}
	}
}

// withListTTL sets our provider's listing TTL.
func withListTTL(d time.Duration) worldOption {
	return func(w *world) { w.listTTL = d }
}

func newWorld(t *testing.T, kind Provider, pools []poolSpec, opts ...worldOption) *world {
	t.Helper()
	klog.Infof("=== %s", t.Name())
	registerAutoscalerMetrics()
	// The metrics are the process's: drop what an earlier scenario's
	// autoscaler left (a backoff gauge stays at 1 otherwise).
	legacyregistry.Reset()
	ctx, cancel := context.WithCancel(context.Background())
	fake := hcloudtest.NewServer(
		hcloudtest.WithDefaultActionDuration(actionDuration),
		hcloudtest.WithActionDuration("create_server", createDuration),
	)
	w := &world{t: t, ctx: ctx, kind: kind, fake: fake, pools: pools, bgErr: make(chan error, 16)}
	w.addPlacementGroups()
	w.options = autoscalingOptions(kind)
	w.listTTL = listTTL
	for _, o := range opts {
		o(w)
	}

	w.infra = integration.SetupInfrastructure(t)
	w.kube = w.infra.Fakes
	w.kubelet = NewKubelet(fake, w.kube.KubeClient, "", kubeletPools(pools))
	w.sched = NewScheduler(w.kube.KubeClient)
	w.provider = &swappable{}
	w.provider.set(w.startProvider())

	var bg sync.WaitGroup
	t.Cleanup(func() {
		if w.ca != nil {
			w.ca.ExitCleanUp()
		}
		cancel()
		bg.Wait()
		// A hard stop may report the work it cancelled.
		if err := kind.Stop(w.provider.current()); err != nil {
			t.Logf("stop the provider: %v", err)
		}
		fake.Close()
	})
	w.build()
	report := func(err error) {
		select {
		case w.bgErr <- err:
		default:
		}
	}
	bg.Go(func() { w.runBackground(ctx, w.kubelet.Step, report) })
	bg.Go(func() { w.runBackground(ctx, w.sched.Step, report) })
	w.stats.start = time.Now()
	return w
}

// runBackground calls step every kubeletInterval until ctx ends, except
// while the world is paused. Errors go to report.
func (w *world) runBackground(ctx context.Context, step func(context.Context) error, report func(error)) {
	t := time.NewTicker(kubeletInterval)
	defer t.Stop()
	for {
		if w.background.TryRLock() {
			err := step(ctx)
			w.background.RUnlock()
			if err != nil && ctx.Err() == nil {
				report(err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// pauseBackground stops the simulated kubelet and scheduler until the
// returned function is called, so that a measurement of the autoscaler's
// loop at steady state shares the machine with nothing but the autoscaler,
// its provider and the in-memory APIs. In a cluster they run on other
// machines; here each step lists every node and pod, which at thousands of
// nodes keeps a core busy. It waits for the steps under way.
func (w *world) pauseBackground() (resume func()) {
	w.background.Lock()
	return w.background.Unlock
}

// addPlacementGroups adds to the fake each placement group a pool names.
func (w *world) addPlacementGroups() {
	w.t.Helper()
	w.placementGroups = map[string]int64{}
	for _, p := range w.pools {
		if p.placementGroup == "" || w.placementGroups[p.placementGroup] != 0 {
			continue
		}
		id, err := w.fake.AddPlacementGroup(hcloudtest.PlacementGroup{Name: p.placementGroup})
		if err != nil {
			w.t.Fatal(err)
		}
		w.placementGroups[p.placementGroup] = id
	}
}

// kubeletPools are the labels and taints the kubelet registers each pool's
// nodes with.
func kubeletPools(pools []poolSpec) map[string]KubeletPool {
	kpools := map[string]KubeletPool{}
	for _, p := range pools {
		nl := map[string]string{ServerLabelNodeGroup: p.name}
		for k, v := range p.labels {
			nl[k] = v
		}
		kpools[p.name] = KubeletPool{NodeLabels: nl, Taints: p.taints}
	}
	return kpools
}

// autoscalingOptions are the autoscaler's options of every scenario,
// before a scenario's own changes.
func autoscalingOptions(kind Provider) caconfig.AutoscalingOptions {
	return integration.NewTestConfig().WithOverrides(
		integration.WithCloudProviderName(kind.Name()),
		integration.WithScaleDownUnneededTime(unneededTime),
		func(o *caconfig.AutoscalingOptions) {
			o.NodeGroupDefaults.MaxNodeProvisionTime = provisionTime
			o.NodeGroupDefaults.ScaleDownUnreadyTime = 5 * time.Minute
			o.ScanInterval = loopPeriod
			// The status ConfigMap stays off: writing it races with
			// the loop inside the core (go test -race reports
			// clusterstate/utils.WriteStatusConfigMap).
			o.WriteStatusConfigMap = false
			o.StatusConfigMapName = statusConfigMap
			o.ConfigNamespace = statusNamespace
		},
	).ResolveOptions()
}

// build builds a new autoscaler over the world's provider and fakes.
func (w *world) build() {
	w.t.Helper()
	ca, _, err := integration.DefaultAutoscalingBuilder(w.options, w.infra).WithCloudProvider(w.provider).Build(w.ctx)
	if err != nil {
		w.t.Fatalf("build autoscaler: %v", err)
	}
	if w.priorities != nil || w.priorityData != "" {
		w.installPriorityExpander(ca)
	}
	// As the autoscaler's main does: Start runs the refresh of its
	// instances cache in the background.
	if err := ca.Start(); err != nil {
		w.t.Fatalf("start autoscaler: %v", err)
	}
	w.ca = ca
}

// startProvider starts a provider of the world's kind.
func (w *world) startProvider() cloudprovider.CloudProvider {
	w.t.Helper()
	p, err := w.kind.Start(w.t, Setup{
		Env:            w.env(),
		Nodes:          w.nodesFlags(),
		ListTTL:        w.listTTL,
		Interval:       100 * time.Millisecond,
		UnavailableTTL: w.unavailableTTL,
		SpreadGrace:    w.spreadGrace,
	})
	if err != nil {
		w.t.Fatalf("start %s: %v", w.kind.Name(), err)
	}
	return p
}

// env is the environment of the provider: HCLOUD_* pointing at the fake.
func (w *world) env() map[string]string {
	env := map[string]string{
		"HCLOUD_TOKEN":    w.fake.Token(),
		"HCLOUD_ENDPOINT": w.fake.URL(),
	}
	if w.network != "" {
		env["HCLOUD_NETWORK"] = w.network
	}
	if w.file != nil {
		w.file.write(w.t, w.clusterConfig(w.file.pools, true))
		env["HCLOUD_CLUSTER_CONFIG_FILE"] = w.file.path()
		return env
	}
	env["HCLOUD_CLUSTER_CONFIG"] = base64.StdEncoding.EncodeToString(w.clusterConfig(w.pools, false))
	return env
}

// clusterConfig is the cluster-config document of pools; declare puts
// their --nodes fields in it.
func (w *world) clusterConfig(pools []poolSpec, declare bool) []byte {
	nodeConfigs := map[string]any{}
	for _, p := range pools {
		nc := map[string]any{"cloudInit": cmp.Or(p.cloudInit, "#cloud-config\n")}
		if p.replace != nil {
			nc["replace"] = p.replace
		}
		if declare {
			nc["serverType"], nc["location"], nc["minSize"], nc["maxSize"] = p.serverType, p.location, p.min, p.max
		}
		if len(p.labels) > 0 {
			nc["labels"] = p.labels
		}
		if len(p.taints) > 0 {
			var ts []map[string]string
			for _, t := range p.taints {
				ts = append(ts, map[string]string{"key": t.Key, "value": t.Value, "effect": string(t.Effect)})
			}
			nc["taints"] = ts
		}
		if p.placementGroup != "" {
			nc["placementGroup"] = p.placementGroup
		}
		if p.private {
			nc["publicIPv4"], nc["publicIPv6"] = false, false
		}
		if p.spread {
			nc["spreadGroups"] = true
		}
		if len(p.offerings) > 0 {
			var offs []map[string]string
			for _, o := range p.offerings {
				offs = append(offs, map[string]string{"serverType": o[0], "location": o[1]})
			}
			nc["offerings"] = offs
		}
		nodeConfigs[p.name] = nc
	}
	cc := map[string]any{
		"clusterName":   clusterName,
		"imagesForArch": map[string]string{"amd64": "ubuntu-24.04", "arm64": "ubuntu-24.04"},
		"nodeConfigs":   nodeConfigs,
	}
	if w.replace != nil {
		cc["replace"] = w.replace
	}
	doc, err := json.Marshal(cc)
	if err != nil {
		w.t.Fatal(err)
	}
	return doc
}

func (w *world) nodesFlags() []string {
	if w.file != nil {
		return nil // the file declares them
	}
	var specs []string
	for _, p := range w.pools {
		specs = append(specs, p.nodesFlag())
	}
	return specs
}

// restartProvider stops our provider the hard way and starts a new one
// under the running autoscaler, which keeps its state: what a restart of
// `hcloudscale serve` is to an autoscaler using externalgrpc.
func (w *world) restartProvider() {
	w.t.Helper()
	klog.Infof("e2e: restarting the provider")
	if err := w.kind.Stop(w.provider.current()); err != nil {
		w.t.Logf("stop the old provider: %v", err)
	}
	w.provider.set(w.startProvider())
}

// restartAutoscaler builds a new autoscaler over the same provider: the
// new one has none of the old one's state (scale-up requests, backoff).
func (w *world) restartAutoscaler() {
	w.t.Helper()
	klog.Infof("e2e: restarting the autoscaler")
	w.ca.ExitCleanUp()
	// A new process has new informers; the scheduler framework cannot be
	// built twice on one factory.
	fakes := *w.infra.Fakes
	fakes.InformerFactory = informers.NewSharedInformerFactory(fakes.KubeClient, 0)
	infra := *w.infra
	infra.Fakes = &fakes
	infra.Manager = integration.MustCreateControllerRuntimeMgr(w.t)
	w.infra, w.kube = &infra, &fakes
	w.build()
}

// loopAt returns the number of the loop running or last run at t: the
// count of loops started at or before t.
func (w *world) loopAt(t time.Time) int {
	n := 0
	for _, s := range w.stats.loopStarts {
		if !s.After(t) {
			n++
		}
	}
	return n
}

// runOnce runs one autoscaler loop once the informers have caught up.
func (w *world) runOnce() {
	w.t.Helper()
	select {
	case err := <-w.bgErr:
		w.t.Logf("kubelet or scheduler: %v", err)
	default:
	}
	w.waitSynced()
	start := time.Now()
	err := w.ca.RunOnce(w.ctx, start)
	took := time.Since(start)
	w.stats.loopTime += took
	w.stats.loopTimes = append(w.stats.loopTimes, took)
	w.stats.loopStarts = append(w.stats.loopStarts, start)
	w.stats.loops++
	if err != nil {
		w.stats.loopErrs++
		klog.Warningf("e2e: RunOnce: %v", err)
	}
}

// loopUntil runs the autoscaler every loopPeriod until done holds, for at
// most timeout; check, if set, runs after every loop and fails the test
// as soon as an invariant breaks.
func (w *world) loopUntil(what string, timeout time.Duration, done func() bool, check func()) {
	w.t.Helper()
	deadline := time.Now().Add(timeout)
	next := time.Now()
	for !done() {
		if time.Now().After(deadline) {
			w.t.Fatalf("%s: not reached after %v (%d loops)\n%s", what, timeout, w.stats.loops, w.describe())
		}
		time.Sleep(time.Until(next))
		next = next.Add(loopPeriod)
		w.runOnce()
		if check != nil {
			check()
		}
	}
}

// waitFor polls cond, without running the autoscaler, for at most
// timeout.
func (w *world) waitFor(what string, timeout time.Duration, cond func() bool) {
	w.t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			w.t.Fatalf("%s: not reached after %v\n%s", what, timeout, w.describe())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// loopFor runs the autoscaler for d, calling check after every loop.
func (w *world) loopFor(d time.Duration, check func()) {
	w.t.Helper()
	end := time.Now().Add(d)
	w.loopUntil("", d+time.Minute, func() bool { return time.Now().After(end) }, check)
}

// waitSynced waits until the informers the autoscaler reads hold what the
// fake clientset holds, so that a loop never sees half of a change.
func (w *world) waitSynced() {
	w.t.Helper()
	f := w.kube.InformerFactory
	podLister, nodeLister := f.Core().V1().Pods().Lister(), f.Core().V1().Nodes().Lister()
	for i := 0; ; i++ {
		pods, err1 := w.kube.KubeClient.CoreV1().Pods(metav1.NamespaceAll).List(w.ctx, metav1.ListOptions{})
		nodes, err2 := w.kube.KubeClient.CoreV1().Nodes().List(w.ctx, metav1.ListOptions{})
		if err1 != nil || err2 != nil {
			w.t.Fatalf("list: %v %v", err1, err2)
		}
		cachedPods, _ := podLister.List(labels.Everything())
		cachedNodes, _ := nodeLister.List(labels.Everything())
		if samePods(pods.Items, cachedPods) && sameNodes(nodes.Items, cachedNodes) {
			return
		}
		if i > 2000 {
			w.t.Fatal("informers did not catch up in 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func samePods(live []corev1.Pod, cached []*corev1.Pod) bool {
	if len(live) != len(cached) {
		return false
	}
	byName := map[string]*corev1.Pod{}
	for _, p := range cached {
		byName[p.Namespace+"/"+p.Name] = p
	}
	for i := range live {
		c, ok := byName[live[i].Namespace+"/"+live[i].Name]
		if !ok || !apiequality.Semantic.DeepEqual(&live[i], c) {
			return false
		}
	}
	return true
}

func sameNodes(live []corev1.Node, cached []*corev1.Node) bool {
	if len(live) != len(cached) {
		return false
	}
	byName := map[string]*corev1.Node{}
	for _, n := range cached {
		byName[n.Name] = n
	}
	for i := range live {
		c, ok := byName[live[i].Name]
		if !ok || !apiequality.Semantic.DeepEqual(&live[i], c) {
			return false
		}
	}
	return true
}

// addPods creates pods, pending.
func (w *world) addPods(pods ...*corev1.Pod) {
	w.t.Helper()
	for _, p := range pods {
		if _, err := w.kube.KubeClient.CoreV1().Pods(p.Namespace).Create(w.ctx, p, metav1.CreateOptions{}); err != nil {
			w.t.Fatal(err)
		}
	}
}

// deletePods deletes every pod whose name starts with prefix.
func (w *world) deletePods(prefix string) {
	w.t.Helper()
	for _, p := range w.pods() {
		if strings.HasPrefix(p.Name, prefix) {
			err := w.kube.KubeClient.CoreV1().Pods(p.Namespace).Delete(w.ctx, p.Name, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				w.t.Fatal(err)
			}
		}
	}
}

func (w *world) pods() []corev1.Pod {
	w.t.Helper()
	l, err := w.kube.KubeClient.CoreV1().Pods(metav1.NamespaceAll).List(w.ctx, metav1.ListOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	return l.Items
}

func (w *world) nodes() []corev1.Node {
	w.t.Helper()
	l, err := w.kube.KubeClient.CoreV1().Nodes().List(w.ctx, metav1.ListOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	return l.Items
}

// servers returns the servers of pool (every pool if empty) in the fake.
func (w *world) servers(pool string) []hcloudtest.ServerInfo {
	w.t.Helper()
	sel := ServerLabelNodeGroup
	if pool != "" {
		sel += "=" + pool
	}
	s, err := w.fake.Servers(sel)
	if err != nil {
		w.t.Fatal(err)
	}
	return s
}

// boundOn returns how many pods whose name starts with prefix are bound
// to nodes of pool.
func (w *world) boundOn(prefix, pool string) int {
	return w.boundOnLabel(prefix, ServerLabelNodeGroup, pool)
}

// boundOnLabel counts the pods whose name starts with prefix that are
// bound to nodes labelled key=value.
func (w *world) boundOnLabel(prefix, key, value string) int {
	nodes := map[string]string{}
	for _, n := range w.nodes() {
		nodes[n.Name] = n.Labels[key]
	}
	count := 0
	for _, p := range w.pods() {
		if strings.HasPrefix(p.Name, prefix) && p.Spec.NodeName != "" && nodes[p.Spec.NodeName] == value {
			count++
		}
	}
	return count
}

func (w *world) pending() int {
	count := 0
	for _, p := range w.pods() {
		if p.Spec.NodeName == "" {
			count++
		}
	}
	return count
}

// target returns the autoscaler's view of a node group's target size
// through our provider.
func (w *world) target(pool string) int {
	w.t.Helper()
	for _, g := range w.provider.current().NodeGroups() {
		if g.Id() == pool {
			n, err := g.TargetSize()
			if err != nil {
				w.t.Fatal(err)
			}
			return n
		}
	}
	w.t.Fatalf("no node group %s", pool)
	return 0
}

// instances returns the instances our provider reports for pool.
func (w *world) instances(pool string) []cloudprovider.Instance {
	w.t.Helper()
	for _, g := range w.provider.current().NodeGroups() {
		if g.Id() == pool {
			in, err := g.Nodes()
			if err != nil {
				w.t.Fatal(err)
			}
			return in
		}
	}
	w.t.Fatalf("no node group %s", pool)
	return nil
}

// status reads the autoscaler's status ConfigMap.
func (w *world) status() *api.ClusterAutoscalerStatus {
	w.t.Helper()
	cm, err := w.kube.KubeClient.CoreV1().ConfigMaps(statusNamespace).Get(w.ctx, statusConfigMap, metav1.GetOptions{})
	if err != nil {
		w.t.Fatalf("status ConfigMap: %v", err)
	}
	var s api.ClusterAutoscalerStatus
	if err := yaml.Unmarshal([]byte(cm.Data["status"]), &s); err != nil {
		w.t.Fatalf("status ConfigMap: %v\n%s", err, cm.Data["status"])
	}
	return &s
}

// groupStatus returns the autoscaler's status of one node group.
func (w *world) groupStatus(pool string) api.NodeGroupStatus {
	w.t.Helper()
	for _, g := range w.status().NodeGroups {
		if g.Name == pool {
			return g
		}
	}
	w.t.Fatalf("no status for node group %s", pool)
	return api.NodeGroupStatus{}
}

// noLeak checks that every server of the pools has a node and every node
// a server, and that each pool's target equals its servers.
func (w *world) noLeak() {
	w.t.Helper()
	nodes := map[string]bool{}
	for _, n := range w.nodes() {
		nodes[strings.TrimPrefix(n.Spec.ProviderID, "hcloud://")] = true
	}
	servers := w.servers("")
	for _, s := range servers {
		if !nodes[fmt.Sprint(s.ID)] {
			w.t.Errorf("server %s (%d, %s) has no node: leaked", s.Name, s.ID, s.Status)
		}
	}
	if len(nodes) != len(servers) {
		w.t.Errorf("%d nodes, %d servers", len(nodes), len(servers))
	}
	for _, p := range w.pools {
		if w.file != nil && !w.hasGroup(p.name) {
			// Not declared (yet, or any more): it must have no server.
			if n := len(w.servers(p.name)); n != 0 {
				w.t.Errorf("pool %s has no node group but %d servers", p.name, n)
			}
			continue
		}
		if got, want := w.target(p.name), len(w.servers(p.name)); len(p.offerings) == 0 && got != want {
			w.t.Errorf("pool %s: target %d, %d servers", p.name, got, want)
		}
		for _, o := range p.offeringGroups() {
			if got, want := w.target(o.id), w.serversOfType(p.name, o.serverType, o.location); got != want {
				w.t.Errorf("pool %s, offering %s: target %d, %d servers", p.name, o.id, got, want)
			}
		}
	}
}

// describe summarises the world for a failure message.
func (w *world) describe() string {
	var b strings.Builder
	for _, p := range w.pools {
		var names []string
		for _, s := range w.servers(p.name) {
			names = append(names, fmt.Sprintf("%s(%d,%s)", s.Name, s.ID, s.Status))
		}
		var ins []string
		for _, in := range w.instances(p.name) {
			s := in.Id
			if in.Status != nil {
				s += fmt.Sprintf("(%v", in.Status.State)
				if in.Status.ErrorInfo != nil {
					s += "," + in.Status.ErrorInfo.ErrorCode
				}
				s += ")"
			}
			ins = append(ins, s)
		}
		fmt.Fprintf(&b, "pool %s: target %d; servers %v; instances %v\n", p.name, w.target(p.name), names, ins)
	}
	var nodes []string
	for _, n := range w.nodes() {
		nodes = append(nodes, fmt.Sprintf("%s(%s,ready=%v)", n.Name, n.Spec.ProviderID, ready(&n)))
	}
	sort.Strings(nodes)
	fmt.Fprintf(&b, "nodes %v\npending pods %d\n", nodes, w.pending())
	return b.String()
}

// record logs the scenario's figures in a form BENCHMARKS.md quotes.
func (w *world) record(name string) {
	w.t.Helper()
	counts := w.fake.Counts()
	total := 0
	var keys []string
	for k, v := range counts {
		total += v
		keys = append(keys, fmt.Sprintf("%s=%d", k, v))
	}
	slices.Sort(keys)
	w.t.Logf("RESULT %s provider=%s loops=%d seconds=%.1f loop_ms_avg=%.1f loop_errors=%d requests=%d %s",
		name, w.kind.Name(), w.stats.loops, time.Since(w.stats.start).Seconds(),
		float64(w.stats.loopTime.Microseconds())/1000/float64(max(w.stats.loops, 1)), w.stats.loopErrs, total, strings.Join(keys, " "))
}
