package nodesim

import (
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

// Server is the Kubernetes API. It is safe for concurrent use.
type Server struct {
	http *httptest.Server

	mu     sync.Mutex // guards the fields below
	nodes  map[string]*corev1.Node
	rv     int         // the last resourceVersion handed out
	events []nodeEvent // every change, in resourceVersion order
	change *sync.Cond  // broadcast on each event and on Close
	closed bool
}

// nodeEvent is a change of a node, as a watch sends it.
type nodeEvent struct {
	Type   watch.EventType `json:"type"`
	Object *corev1.Node    `json:"object"`
}

// NewServer starts a Server with no nodes on 127.0.0.1.
func NewServer() *Server {
	s := &Server{nodes: map[string]*corev1.Node{}}
	s.change = sync.NewCond(&s.mu)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/nodes", s.listNodes)
	mux.HandleFunc("GET /api/v1/nodes/{name}", s.getNode)
	mux.HandleFunc("PATCH /api/v1/nodes/{name}", s.patchNode)
	mux.HandleFunc("GET /api/v1/pods", emptyList("PodList", "v1"))
	mux.HandleFunc("GET /api/v1/namespaces/{ns}/pods", emptyList("PodList", "v1"))
	mux.HandleFunc("GET /apis/policy/v1/poddisruptionbudgets", emptyList("PodDisruptionBudgetList", "policy/v1"))
	mux.HandleFunc("GET /apis/policy/v1/namespaces/{ns}/poddisruptionbudgets", emptyList("PodDisruptionBudgetList", "policy/v1"))
	mux.HandleFunc("GET /apis/coordination.k8s.io/v1/leases", emptyList("LeaseList", "coordination.k8s.io/v1"))
	mux.HandleFunc("GET /apis/coordination.k8s.io/v1/namespaces/{ns}/leases", emptyList("LeaseList", "coordination.k8s.io/v1"))
	mux.HandleFunc("POST /api/v1/namespaces/{ns}/events", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(body)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("%s %s is not served", r.Method, r.URL.Path))
	})
	s.http = httptest.NewServer(mux)
	return s
}

// URL is the API's address, such as http://127.0.0.1:41234.
func (s *Server) URL() string { return s.http.URL }

// Close ends the watches, stops the server and waits for its requests.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	s.change.Broadcast()
	s.mu.Unlock()
	s.http.Close()
}

// Client returns a client-go clientset for the API.
func (s *Server) Client() (kubernetes.Interface, error) {
	return kubernetes.NewForConfig(&rest.Config{Host: s.URL(), UserAgent: "hcloudscale-demo"})
}

// Kubeconfig returns a kubeconfig whose current context is the API.
func (s *Server) Kubeconfig() []byte {
	return fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: demo
  cluster:
    server: %s
users:
- name: demo
  user: {}
contexts:
- name: demo
  context:
    cluster: demo
    user: demo
current-context: demo
`, s.URL())
}

// Sync plays the kubelets of servers, a listing of the fake API: a Ready
// node for each running server, NotReady for each other one that has a
// node, and no node for a server that is gone.
func (s *Server) Sync(servers []hcloudtest.ServerInfo) {
	s.mu.Lock()
	defer s.mu.Unlock()
	live := map[string]bool{}
	for _, sv := range servers {
		live[sv.Name] = true
		running := sv.Status == hcloud.ServerStatusRunning
		n, ok := s.nodes[sv.Name]
		switch {
		case !ok && running:
			s.nodes[sv.Name] = s.newNode(sv)
		case ok && nodeReady(n) != running:
			setReady(n, running)
			s.bump(n, watch.Modified)
		}
	}
	for name, n := range s.nodes {
		if !live[name] {
			delete(s.nodes, name)
			s.bump(n, watch.Deleted)
		}
	}
}

// Nodes returns copies of the nodes, by name.
func (s *Server) Nodes() []corev1.Node {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]corev1.Node, 0, len(s.nodes))
	for _, name := range slices.Sorted(maps.Keys(s.nodes)) {
		out = append(out, *s.nodes[name].DeepCopy())
	}
	return out
}

func (s *Server) newNode(sv hcloudtest.ServerInfo) *corev1.Node {
	n := &corev1.Node{
		TypeMeta: metav1.TypeMeta{Kind: "Node", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{
			Name:              sv.Name,
			UID:               types.UID("node-" + strconv.FormatInt(sv.ID, 10)),
			CreationTimestamp: metav1.Now(),
			Labels:            map[string]string{"kubernetes.io/hostname": sv.Name, "node.kubernetes.io/instance-type": sv.ServerType, "topology.kubernetes.io/region": sv.Location},
		},
		Spec: corev1.NodeSpec{ProviderID: "hcloud://" + strconv.FormatInt(sv.ID, 10)},
	}
	setReady(n, true)
	s.bump(n, watch.Added)
	return n
}

// bump gives n the next resourceVersion and tells the watches that it
// was added, modified or deleted.
func (s *Server) bump(n *corev1.Node, typ watch.EventType) {
	s.rv++
	n.ResourceVersion = strconv.Itoa(s.rv)
	s.events = append(s.events, nodeEvent{Type: typ, Object: n.DeepCopy()})
	s.change.Broadcast()
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func setReady(n *corev1.Node, ready bool) {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	now := metav1.Now()
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, LastHeartbeatTime: now, LastTransitionTime: now}}
}
