package apiserver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// callTimeout bounds each call the harness makes to the API server.
const callTimeout = 30 * time.Second

// AdminConfig returns a client configuration with full rights (group
// system:masters). Each call returns a new copy.
func (s *Server) AdminConfig() *rest.Config {
	return &rest.Config{
		Host:            s.URL,
		BearerToken:     s.adminToken,
		TLSClientConfig: rest.TLSClientConfig{CAData: s.caPEM},
		UserAgent:       "hcloudscale-integration",
		QPS:             100,
		Burst:           200,
	}
}

// AdminClient returns a clientset with full rights.
func (s *Server) AdminClient(t testing.TB) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(s.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// AdminUser is the user name the admin credentials authenticate as, as
// it shows in [AuditEvent.User].
func (s *Server) AdminUser() string { return adminUser }

// ServiceAccountKubeconfig writes a kubeconfig file whose credentials
// authenticate as the service account namespace/name, and returns its
// path. It creates the namespace and the service account when they do
// not exist, and gets the token from the TokenRequest API, valid for an
// hour: the user is system:serviceaccount:<namespace>:<name>, in the
// groups system:serviceaccounts, system:serviceaccounts:<namespace> and
// system:authenticated, so Roles bound to the service account apply, and
// nothing else.
func (s *Server) ServiceAccountKubeconfig(t testing.TB, namespace, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	token, err := s.serviceAccountToken(ctx, namespace, name)
	if err != nil {
		t.Fatalf("service account %s/%s: %v", namespace, name, err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["integration"] = &clientcmdapi.Cluster{Server: s.URL, CertificateAuthorityData: s.caPEM}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["integration"] = &clientcmdapi.Context{Cluster: "integration", AuthInfo: name, Namespace: namespace}
	cfg.CurrentContext = "integration"
	dir, err := os.MkdirTemp(t.TempDir(), "kubeconfig-")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, namespace+"-"+name+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func (s *Server) serviceAccountToken(ctx context.Context, namespace, name string) (string, error) {
	c, err := kubernetes.NewForConfig(s.AdminConfig())
	if err != nil {
		return "", err
	}
	_, err = c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("creating the namespace: %w", err)
	}
	_, err = c.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("creating the service account: %w", err)
	}
	hour := int64(3600)
	tr, err := c.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &hour},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("requesting a token: %w", err)
	}
	return tr.Status.Token, nil
}
