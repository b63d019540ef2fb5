package apiserver_test

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hcloudscale/hcloudscale/integration/apiserver"
)

func TestMain(m *testing.M) { os.Exit(apiserver.Main(m)) }

const manifests = `
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: harness
data:
  a: "1"
---
# an empty document
---
apiVersion: v1
kind: Namespace
metadata:
  name: harness
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: read-configmaps
  namespace: harness
rules:
  - apiGroups: [""]
    resources: [configmaps]
    verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: reader
  namespace: harness
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: read-configmaps
subjects:
  - kind: ServiceAccount
    name: reader
    namespace: harness
`

// TestApplyAndServiceAccount applies objects as admin (the namespace
// after the object in it), then checks that a service account's
// kubeconfig gets what its Role allows and nothing more, and that the
// audit log tells the two apart.
func TestApplyAndServiceAccount(t *testing.T) {
	s := apiserver.Shared(t)
	s.Apply(t, []byte(manifests))
	admin := s.AdminClient(t)
	cm, err := admin.CoreV1().ConfigMaps("harness").Get(t.Context(), "settings", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the applied ConfigMap: %v", err)
	}
	if cm.Data["a"] != "1" {
		t.Errorf("ConfigMap data = %v; want a=1", cm.Data)
	}
	// Applying again changes nothing and does not fail.
	s.Apply(t, []byte(manifests))

	path := s.ServiceAccountKubeconfig(t, "harness", "reader")
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	sa, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sa.CoreV1().ConfigMaps("harness").Get(t.Context(), "settings", metav1.GetOptions{}); err != nil {
		t.Errorf("service account get configmap: %v; want allowed by its Role", err)
	}
	_, err = sa.CoreV1().ConfigMaps("harness").List(t.Context(), metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("service account list configmaps: %v; want forbidden", err)
	}

	user := "system:serviceaccount:harness:reader"
	var got []string
	for _, e := range s.AuditEvents(t) {
		if e.User == user && e.Resource == "configmaps" {
			got = append(got, e.Verb+" "+e.Namespace+"/"+e.Name+" "+strconv.Itoa(e.Code))
			if !slices.Contains(e.Groups, "system:serviceaccounts:harness") {
				t.Errorf("groups of %s = %v; want system:serviceaccounts:harness among them", user, e.Groups)
			}
			if e.Completed.Before(e.Received) {
				t.Errorf("event completed at %s before it was received at %s", e.Completed, e.Received)
			}
		}
	}
	want := []string{"get harness/settings 200", "list harness/ 403"}
	if !slices.Equal(got, want) {
		t.Errorf("audit events of %s = %q; want %q", user, got, want)
	}
}

// TestDryRun checks that a dry run stores nothing and that errors name
// the object.
func TestDryRun(t *testing.T) {
	s := apiserver.Shared(t)
	s.Apply(t, []byte(`
apiVersion: v1
kind: ConfigMap
metadata:
  name: dry
data:
  a: "1"
`), apiserver.DryRun())
	_, err := s.AdminClient(t).CoreV1().ConfigMaps("default").Get(t.Context(), "dry", metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("after a dry run, get = %v; want not found", err)
	}

	err = s.TryApply(t.Context(), []byte(`
apiVersion: v1
kind: ConfigMap
metadata:
  name: fine
  namespace: default
---
apiVersion: v1
kind: Service
metadata:
  name: broken
  namespace: default
spec:
  ports:
    - port: 99999
`), apiserver.DryRun())
	if err == nil || !strings.Contains(err.Error(), "Service default/broken") || strings.Contains(err.Error(), "fine") {
		t.Errorf("TryApply of an invalid Service = %v; want an error naming Service default/broken only", err)
	}
}

// TestStart starts a server of the test's own and checks that the audit
// log attributes the admin's requests to the admin, with their status.
func TestStart(t *testing.T) {
	s := apiserver.Start(t)
	_, err := s.AdminClient(t).CoreV1().Namespaces().Get(t.Context(), "no-such-namespace", metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("get a namespace that does not exist: %v; want not found", err)
	}
	found := false
	for _, e := range s.AuditEvents(t) {
		if e.Resource == "namespaces" && e.Name == "no-such-namespace" {
			found = true
			if e.User != s.AdminUser() || e.Verb != "get" || e.Code != 404 || e.Stage != "ResponseComplete" {
				t.Errorf("audit event %+v; want %s's get answered 404", e, s.AdminUser())
			}
		}
	}
	if !found {
		t.Error("the audit log has no event for the get")
	}
}
