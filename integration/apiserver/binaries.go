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

// kubeAPIServerBinary returns the path of kube-apiserver, building it
// into the cache when it is missing or stale. logf reports a build.
func kubeAPIServerBinary(logf func(string, ...any)) (string, error) {
	if p := os.Getenv(EnvKubeAPIServer); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("$%s: %w", EnvKubeAPIServer, err)
		}
		return p, nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("kube-apiserver: no cache directory (set $%s): %w", EnvKubeAPIServer, err)
	}
	dir := filepath.Join(cache, "hcloudscale")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "kube-apiserver")
	src, err := kubeAPIServerModule()
	if err != nil {
		return "", err
	}
	pin, err := pinOf(src)
	if err != nil {
		return "", err
	}

	// One build at a time across processes: the others wait for it and
	// then find the binary.
	unlock, err := lockFile(bin + ".lock")
	if err != nil {
		return "", err
	}
	defer unlock()

	stamp := bin + ".pin"
	if _, err := os.Stat(bin); err == nil {
		// A binary without a stamp was built by hand or by CI from the
		// same module; one with another stamp comes from another pin.
		old, err := os.ReadFile(stamp)
		if err != nil || bytes.Equal(bytes.TrimSpace(old), []byte(pin)) {
			return bin, nil
		}
		logf("kube-apiserver in %s was built from another pin of %s; rebuilding", dir, src)
	}
	logf("building kube-apiserver from %s into %s (10-15 minutes when nothing is cached)", src, dir)
	start := time.Now()
	tmp := fmt.Sprintf("%s.%d.tmp", bin, os.Getpid())
	cmd := exec.Command("go", "build", "-o", tmp, "k8s.io/kubernetes/cmd/kube-apiserver")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("building kube-apiserver in %s: %w\n%s", src, err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", err
	}
	if err := os.WriteFile(stamp, []byte(pin+"\n"), 0o644); err != nil {
		return "", err
	}
	logf("built kube-apiserver in %s", time.Since(start).Round(time.Second))
	return bin, nil
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
