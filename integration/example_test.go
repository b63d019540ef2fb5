package integration

import (
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// exampleBinary is examples/replicated-autoscaler built once per test
// binary from this repository.
var exampleBinary struct {
	once sync.Once
	path string
	err  error
}

func replicatedAutoscaler(t *testing.T) string {
	t.Helper()
	exampleBinary.once.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		dir, err := os.MkdirTemp("", "replicated-autoscaler-")
		if err != nil {
			exampleBinary.err = err
			return
		}
		exampleBinary.path = filepath.Join(dir, "replicated-autoscaler")
		cmd := exec.Command("go", "build", "-o", exampleBinary.path, "./examples/replicated-autoscaler")
		cmd.Dir = filepath.Join(filepath.Dir(file), "..")
		cmd.Env = append(os.Environ(), "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			exampleBinary.err = fmt.Errorf("go build ./examples/replicated-autoscaler: %w\n%s", err, out)
		}
	})
	if exampleBinary.err != nil {
		t.Fatal(exampleBinary.err)
	}
	return exampleBinary.path
}

// startExample starts one replica of examples/replicated-autoscaler,
// keeping the pool at size, with the scenarios' Lease timings.
func (c *cluster) startExample(t *testing.T, id string, size int) *replica {
	t.Helper()
	r := &replica{id: id, token: tokenOf(id), logPath: filepath.Join(t.TempDir(), id+".log"), exited: make(chan struct{})}
	f, err := os.Create(r.logPath)
	if err != nil {
		t.Fatal(err)
	}
	r.cmd = exec.Command(replicatedAutoscaler(t),
		fmt.Sprintf("--nodes=0:%d:cpx31:fsn1:%s", c.opts.max, pool), fmt.Sprintf("--size=%d", size), "--interval=200ms",
		"--lease-namespace="+c.ns, "--lease-name="+leaseName, "--identity="+id,
		"--lease-duration="+leaseDuration.String(), "--renew-deadline="+renewDeadline.String(),
		"--retry-period="+retryPeriod.String(), "--write-grace="+writeGrace.String())
	r.cmd.Stdout, r.cmd.Stderr = f, f
	r.cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "KUBECONFIG=" + c.kubeconfig,
		"HCLOUD_TOKEN=" + r.token, "HCLOUD_ENDPOINT=" + c.hc.URL(),
		"HCLOUD_CLUSTER_CONFIG=" + base64.StdEncoding.EncodeToString([]byte(defaultClusterConfig)),
	}
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := r.cmd.Start(); err != nil {
		_ = f.Close()
		t.Fatal(err)
	}
	go func() {
		r.err = r.cmd.Wait()
		_ = f.Close()
		close(r.exited)
	}()
	t.Cleanup(func() {
		r.stop()
		if t.Failed() {
			t.Logf("log of %s (%v):\n%s", r.id, r.err, tail(r.logPath, 12000))
		}
	})
	return r
}

// TestLibraryExampleHasOneWriter runs two replicas of the library's
// replicated-autoscaler example on a real API server: the first creates
// the Lease and leads after the lease duration and the write grace; the
// leader is stopped (SIGTERM) with creates in flight, the other resumes
// them and tops the pool up. The pool ends at its size, each server once,
// and no replica wrote while it did not hold the Lease.
func TestLibraryExampleHasOneWriter(t *testing.T) {
	c := newCluster(t, clusterOptions{max: 5, createDuration: 3 * time.Second})
	a := c.startExample(t, "replica-a", 4)
	b := c.startExample(t, "replica-b", 4)
	deadline := time.Now().Add(60 * time.Second)
	for c.hc.Count("POST /servers") < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("no creates 60s after the start; Lease holders: %v", c.leaseTimeline(t))
		}
		time.Sleep(20 * time.Millisecond)
	}
	leader := a
	if h := holderAt(c.leaseTimeline(t), time.Now()); h == b.id {
		leader = b
	}
	stopped := time.Now()
	leader.signal(t, syscall.SIGTERM)
	if err := leader.waitExit(t, 40*time.Second); err != nil {
		t.Errorf("%s exited with %v after SIGTERM; want 0", leader.id, err)
	}
	other := a
	if leader == a {
		other = b
	}
	if at, ok := acquiredBy(c.leaseTimeline(t), other.id, stopped); !ok {
		t.Errorf("%s did not take the Lease over", other.id)
	} else {
		t.Logf("%s took the Lease over %s after the SIGTERM", other.id, at.Sub(stopped).Round(time.Millisecond))
	}
	servers := c.settle(t, 4, 3*time.Second, 60*time.Second)
	names := map[string]bool{}
	for _, s := range servers {
		if names[s.Name] {
			t.Errorf("server name %s used twice", s.Name)
		}
		names[s.Name] = true
	}
	if len(servers) != 4 {
		t.Errorf("pool %s has %d servers; want 4", pool, len(servers))
	}
	if w := c.writesByNonHolder(t); len(w) > 0 {
		t.Errorf("%d mutating Hetzner requests from a replica that did not hold the Lease:\n%s", len(w), strings.Join(w, "\n"))
	}
	if f := c.forbidden(t); len(f) > 0 {
		t.Errorf("the API server refused the service account %d times: %v", len(f), f)
	}
}
