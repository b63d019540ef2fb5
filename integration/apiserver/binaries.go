package apiserver

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"time"
)

// Environment variables the harness reads.
const (
	// EnvKubeAPIServer names a kube-apiserver binary to use instead of
	// the cached build.
	EnvKubeAPIServer = "KUBE_APISERVER"
	// EnvKubeControllerManager and EnvKubeScheduler do the same for
	// kube-controller-manager and kube-scheduler.
	EnvKubeControllerManager = "KUBE_CONTROLLER_MANAGER"
	EnvKubeScheduler         = "KUBE_SCHEDULER"
	// EnvRequired set to 1 turns a missing etcd from a skip into a
	// failure, so that CI cannot pass without running the tests.
	EnvRequired = "HCLOUDSCALE_INTEGRATION"
)

// errMissing marks a binary that is not installed: a reason to skip.
var errMissing = errors.New("not installed")

// etcdBinary returns the path of etcd.
func etcdBinary() (string, error) {
	p, err := exec.LookPath("etcd")
	if err != nil {
		return "", fmt.Errorf("etcd %w (Debian: apt-get install etcd-server): %v", errMissing, err)
	}
	return p, nil
}

// The control-plane binaries the harness runs, each with the environment
// variable that names a binary to use instead of the cached build.
const (
	kubeAPIServer         = "kube-apiserver"
	kubeControllerManager = "kube-controller-manager"
	kubeScheduler         = "kube-scheduler"
)

var binaryEnv = map[string]string{
	kubeAPIServer:         EnvKubeAPIServer,
	kubeControllerManager: EnvKubeControllerManager,
	kubeScheduler:         EnvKubeScheduler,
}

// controlPlaneBinary returns the path of one of the control-plane
// binaries: the one its environment variable names, else the cached
// build, building all three into the cache (in one go build, about 11
// minutes cold on 2 cores) when any is missing or the pinning module has
// changed since. logf reports a build.
func controlPlaneBinary(name string, logf func(string, ...any)) (string, error) {
	if p := os.Getenv(binaryEnv[name]); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("$%s: %w", binaryEnv[name], err)
		}
		return p, nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("%s: no cache directory (set $%s): %w", name, binaryEnv[name], err)
	}
	dir := filepath.Join(cache, "hcloudscale", "control-plane")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	src, err := kubeAPIServerModule()
	if err != nil {
		return "", err
	}
	pin, err := pinOf(src)
	if err != nil {
		return "", err
	}

	// One build at a time across processes: the others wait for it and
	// then find the binaries.
	unlock, err := lockFile(filepath.Join(dir, "build.lock"))
	if err != nil {
		return "", err
	}
	defer unlock()

	stamp := filepath.Join(dir, "pin")
	if old, err := os.ReadFile(stamp); err == nil && bytes.Equal(bytes.TrimSpace(old), []byte(pin)) && allIn(dir) {
		return filepath.Join(dir, name), nil
	}
	logf("building kube-apiserver, kube-controller-manager and kube-scheduler from %s into %s (10-15 minutes when nothing is cached)", src, dir)
	start := time.Now()
	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.Command("go", "build", "-o", tmp+string(filepath.Separator),
		"k8s.io/kubernetes/cmd/"+kubeAPIServer, "k8s.io/kubernetes/cmd/"+kubeControllerManager, "k8s.io/kubernetes/cmd/"+kubeScheduler)
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the control plane in %s: %w\n%s", src, err, out)
	}
	_ = os.Remove(stamp)
	for _, b := range []string{kubeAPIServer, kubeControllerManager, kubeScheduler} {
		if err := os.Rename(filepath.Join(tmp, b), filepath.Join(dir, b)); err != nil {
			return "", err
		}
	}
	if err := os.WriteFile(stamp, []byte(pin+"\n"), 0o644); err != nil {
		return "", err
	}
	logf("built the control plane in %s", time.Since(start).Round(time.Second))
	return filepath.Join(dir, name), nil
}

// allIn tells whether dir holds the three binaries.
func allIn(dir string) bool {
	for _, b := range []string{kubeAPIServer, kubeControllerManager, kubeScheduler} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return false
		}
	}
	return true
}

// kubeAPIServerModule returns the directory of the module that pins
// kube-apiserver: ../kubeapiserver from this package's source.
func kubeAPIServerModule() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("kube-apiserver: cannot locate the harness source")
	}
	dir := filepath.Join(filepath.Dir(file), "..", "kubeapiserver")
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return "", fmt.Errorf("kube-apiserver: the module that pins it: %w (set $%s)", err, EnvKubeAPIServer)
	}
	return filepath.Clean(dir), nil
}

// pinOf is a digest of the pinning module's go.mod and go.sum.
func pinOf(dir string) (string, error) {
	h := sha256.New()
	for _, name := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return "", err
		}
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// lockFile takes an exclusive advisory lock on path, waiting for it.
func lockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
	}, nil
}
