package apiserver

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// An Option adds to what [Start] runs beside etcd and kube-apiserver.
type Option func(*startOptions)

type startOptions struct {
	controllers []string
	scheduler   bool
}

// WithControllers runs kube-controller-manager with the named controllers
// (its --controllers flag), as the admin user, without leader election or
// a cloud provider. "deployment", "replicaset" and "disruption" make
// Deployments roll out and PodDisruptionBudgets hold as in a cluster: the
// Eviction API refuses every pod a budget covers until the disruption
// controller has computed the budget's status. Add "garbagecollector" for
// owner references, "podgc" for pods of deleted nodes.
func WithControllers(names ...string) Option {
	return func(o *startOptions) { o.controllers = append(o.controllers, names...) }
}

// WithScheduler runs kube-scheduler as the admin user, without leader
// election: pods are bound to Nodes that fit them. No kubelet runs; see
// [Kubelet].
func WithScheduler() Option {
	return func(o *startOptions) { o.scheduler = true }
}

// startExtras starts what opts ask for once kube-apiserver is ready.
func (s *Server) startExtras(o startOptions, logf func(string, ...any)) error {
	if len(o.controllers) == 0 && !o.scheduler {
		return nil
	}
	kubeconfig, err := s.writeAdminKubeconfig()
	if err != nil {
		return err
	}
	type extra struct {
		name string
		args []string
	}
	var extras []extra
	if len(o.controllers) > 0 {
		extras = append(extras, extra{kubeControllerManager, []string{
			"--controllers=" + strings.Join(o.controllers, ","),
			"--use-service-account-credentials=false",
		}})
	}
	if o.scheduler {
		extras = append(extras, extra{kubeScheduler, nil})
	}
	ports, err := freePorts(len(extras))
	if err != nil {
		return err
	}
	for i, e := range extras {
		bin, err := controlPlaneBinary(e.name, logf)
		if err != nil {
			return err
		}
		args := append([]string{
			"--kubeconfig=" + kubeconfig,
			"--authentication-kubeconfig=" + kubeconfig,
			"--authorization-kubeconfig=" + kubeconfig,
			"--leader-elect=false",
			"--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(ports[i]),
		}, e.args...)
		p, err := startProcess(filepath.Join(s.Dir, e.name+".log"), bin, args...)
		if err != nil {
			return err
		}
		s.procs = append(s.procs, p)
		if err := waitHealthy(p, ports[i]); err != nil {
			return err
		}
		logf("%s running (log %s)", e.name, p.log)
	}
	return nil
}

// writeAdminKubeconfig writes a kubeconfig of the admin user into s.Dir.
func (s *Server) writeAdminKubeconfig() (string, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["integration"] = &clientcmdapi.Cluster{Server: s.URL, CertificateAuthorityData: s.caPEM}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: s.adminToken}
	cfg.Contexts["integration"] = &clientcmdapi.Context{Cluster: "integration", AuthInfo: "admin"}
	cfg.CurrentContext = "integration"
	path := filepath.Join(s.Dir, "admin.kubeconfig")
	return path, clientcmd.WriteToFile(*cfg, path)
}

// waitHealthy polls the /healthz of a component serving on port (its
// self-signed certificate is not checked: loopback, a test's own
// process).
func waitHealthy(p *process, port int) error {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback health check of a test process
	}}
	defer client.CloseIdleConnections()
	url := fmt.Sprintf("https://127.0.0.1:%d/healthz", port)
	deadline := time.Now().Add(startTimeout)
	for time.Now().Before(deadline) {
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited before it was healthy: %v\n%s", p.name, p.err, p.logTail())
		default:
		}
		if resp, err := client.Get(url); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("%s not healthy after %s\n%s", p.name, startTimeout, p.logTail())
}
