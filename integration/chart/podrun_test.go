package chart

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/integration/apiserver"
)

// The helpers here run the chart's rendered pod as a process: its
// service account and RBAC applied for real, its volumes as files under a
// temporary root, its arguments and environment with loopback listeners.

// applyChartRBAC applies the rendered ServiceAccount, Roles, RoleBindings,
// ClusterRoles and ClusterRoleBindings to the API server, after the
// namespaces given and those the objects are in. It returns how many
// objects it applied.
func applyChartRBAC(t *testing.T, s *apiserver.Server, objs []*unstructured.Unstructured, namespaces ...string) int {
	t.Helper()
	var rbac []string
	for _, o := range objs {
		switch o.GetKind() {
		case "ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding":
			j, err := o.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			rbac = append(rbac, string(j))
			if ns := o.GetNamespace(); ns != "" && !slices.Contains(namespaces, ns) {
				namespaces = append(namespaces, ns)
			}
		}
	}
	var docs []string
	for _, ns := range namespaces {
		docs = append(docs, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "+ns+"\n")
	}
	if len(docs) > 0 {
		s.Apply(t, []byte(strings.Join(docs, "---\n")))
	}
	if len(rbac) > 0 {
		s.Apply(t, []byte(strings.Join(rbac, "\n---\n")))
	}
	return len(rbac)
}

// podRemap returns where a path of container c is under root, where
// writePodFiles puts the pod's volumes.
func podRemap(t *testing.T, c corev1.Container, root string) func(string) string {
	return func(path string) string {
		t.Helper()
		file, ok := inVolume(c, path)
		if !ok {
			t.Fatalf("%s is in no mounted volume", path)
		}
		return filepath.Join(root, file)
	}
}

// writePodFiles writes every volume of the pod under root, each in its
// directory as the kubelet writes it: the files of the chart's Secrets
// and ConfigMaps (token in place of the token Secret's), and the server
// certificate for host with its CA in the "tls" volume, as cert-manager
// makes it. The client certificate carries the name of the chart's
// client Certificate, which --tls-client-name requires.
func writePodFiles(t *testing.T, objs []*unstructured.Unstructured, pod corev1.PodSpec, root, token, host string) *testCerts {
	t.Helper()
	certs := newTestCerts(t, host, clientCertName(t, objs))
	writePodVolumes(t, objs, pod, root, token, certs)
	return certs
}

// writePodVolumes is writePodFiles with the server certificate of certs.
func writePodVolumes(t *testing.T, objs []*unstructured.Unstructured, pod corev1.PodSpec, root, token string, certs *testCerts) {
	t.Helper()
	files := volumeFiles(t, objs, pod, token)
	for name, content := range certs.serverFiles() {
		files["tls/"+name] = content
	}
	byVolume := map[string]map[string][]byte{}
	for path, content := range files {
		vol, name, _ := strings.Cut(path, "/")
		if byVolume[vol] == nil {
			byVolume[vol] = map[string][]byte{}
		}
		byVolume[vol][name] = content
	}
	for vol, files := range byVolume {
		writeVolume(t, filepath.Join(root, vol), files)
	}
}

// podProcess is how the container's process is started outside a pod.
type podProcess struct {
	Root       string // where the volumes are, see writePodFiles
	Kubeconfig string // the service account's, for the in-cluster credentials
	Endpoint   string // the Hetzner API's URL
	PodName    string // metadata.name
	Namespace  string // metadata.namespace
}

// command returns serve's arguments and environment from the rendered
// container: loopback listeners on free ports, file paths under Root,
// short shutdown timeouts, the downward API's fields, $KUBECONFIG for the
// pod's service account and the Hetzner API at Endpoint.
func (p podProcess) command(t *testing.T, c corev1.Container) (args, env []string) {
	t.Helper()
	remap := podRemap(t, c, p.Root)
	for _, a := range c.Args {
		name, value, _ := strings.Cut(a, "=")
		switch name {
		case "--listen", "--health-listen", "--metrics-listen":
			a = name + "=127.0.0.1:0"
		case "--tls-cert", "--tls-key", "--tls-client-ca", "--tls-client-pinned":
			a = name + "=" + remap(value)
		case "--shutdown-timeout", "--drain-timeout":
			a = name + "=5s"
		}
		args = append(args, a)
	}
	env = []string{"KUBECONFIG=" + p.Kubeconfig, "HOME=" + p.Root, "PATH=" + os.Getenv("PATH")}
	for _, e := range c.Env {
		switch {
		case e.Name == config.EnvEndpoint:
			// The fake's, below.
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			env = append(env, e.Name+"="+p.PodName)
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			env = append(env, e.Name+"="+p.Namespace)
		case e.ValueFrom != nil && e.ValueFrom.ResourceFieldRef != nil && e.ValueFrom.ResourceFieldRef.Resource == "limits.memory":
			// What the kubelet sets: the container's limit in bytes.
			env = append(env, fmt.Sprintf("%s=%d", e.Name, c.Resources.Limits.Memory().Value()))
		case strings.HasSuffix(e.Name, "_FILE"):
			env = append(env, e.Name+"="+remap(e.Value))
		case e.ValueFrom == nil:
			env = append(env, e.Name+"="+e.Value)
		default:
			t.Fatalf("env %s: %+v is not handled", e.Name, e.ValueFrom)
		}
	}
	env = append(env, config.EnvEndpoint+"="+p.Endpoint)
	return args, env
}

// serveProcess is a running hcloudscale binary and its JSON log.
type serveProcess struct {
	cmd     *exec.Cmd
	logs    *lineLog
	exited  chan error
	stopped bool
}

// startServe starts the built binary with args and env; the test's
// cleanup kills it if it still runs.
func startServe(t *testing.T, args, env []string) *serveProcess {
	t.Helper()
	p := &serveProcess{cmd: exec.Command(buildServe(t), args...), logs: &lineLog{}, exited: make(chan error, 1)}
	p.cmd.Env = env
	p.cmd.Stderr = p.logs
	p.cmd.Stdout = io.Discard
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	t.Cleanup(func() {
		if !p.stopped {
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
	return p
}

// waitLog waits up to a minute for a log line with message msg and
// returns it; the test fails with the log if the process exits first.
func (p *serveProcess) waitLog(t *testing.T, msg string) map[string]any {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		if l := p.logs.find(msg); l != nil {
			return l
		}
		select {
		case err := <-p.exited:
			p.stopped = true
			t.Fatalf("serve exited (%v) before %q; log:\n%s", err, msg, p.logs)
		case <-deadline:
			t.Fatalf("no %q in 60s; log:\n%s", msg, p.logs)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// terminate sends SIGTERM, as the kubelet does, and wants a clean exit.
func (p *serveProcess) terminate(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.exited:
		p.stopped = true
		if err != nil {
			t.Errorf("serve exited with %v after SIGTERM; log:\n%s", err, p.logs)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not exit after SIGTERM; log:\n%s", p.logs)
	}
}

// checkGRPCHealth is the kubelet's gRPC probe: the health service's
// Check for service, in plaintext, must answer SERVING.
func checkGRPCHealth(t *testing.T, addr, service string) {
	t.Helper()
	hc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer hc.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if res, err := healthpb.NewHealthClient(hc).Check(ctx, &healthpb.HealthCheckRequest{Service: service}); err != nil || res.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health check of %q at %s: %v, %v; want SERVING", service, addr, res, err)
	}
}

// serviceAccountDid returns what user did on the API server, as
// "verb resource namespace", failing the test for every 403 it got.
func serviceAccountDid(t *testing.T, s *apiserver.Server, user string) map[string]bool {
	t.Helper()
	did := map[string]bool{}
	for _, e := range s.AuditEvents(t) {
		if e.User != user || e.Stage != "ResponseComplete" && e.Stage != "ResponseStarted" {
			continue
		}
		if e.Code == http.StatusForbidden {
			t.Errorf("403: %s %s/%s %s/%s (%s)", e.Verb, e.APIGroup, e.Resource, e.Namespace, e.Name, e.RequestURI)
		}
		did[e.Verb+" "+e.Resource+" "+e.Namespace] = true
	}
	return did
}

// serviceAccountUser is the API server's user name of a service account.
func serviceAccountUser(ns, name string) string {
	return fmt.Sprintf("system:serviceaccount:%s:%s", ns, name)
}

// all returns every JSON line of the log.
func (l *lineLog) all() []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(l.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}
