package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

// zoneinfoDirs are where Go's time package looks for the time-zone
// database on Linux (after $ZONEINFO, which the test unsets), and the Go
// installation's copy it reads last.
func zoneinfoDirs() []string {
	return []string{"/usr/share/zoneinfo", "/usr/share/lib/zoneinfo", "/usr/lib/locale/TZ", "/etc/zoneinfo",
		filepath.Join(runtime.GOROOT(), "lib", "time")}
}

// withoutZoneinfo returns a command that runs bin with args in a mount
// namespace of its own, where an empty directory hides every place the
// time-zone database could be read from, as in the scratch image. The
// script checks that Europe/Berlin is gone before it starts bin.
func withoutZoneinfo(t *testing.T, bin string, args ...string) *exec.Cmd {
	t.Helper()
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("needs unshare(1) to hide the time-zone database")
	}
	ns := []string{"--mount"}
	if os.Geteuid() != 0 {
		ns = append(ns, "--map-root-user")
	}
	if out, err := exec.Command(unshare, append(ns, "true")...).CombinedOutput(); err != nil {
		t.Skipf("cannot create a mount namespace (%v: %s)", err, bytes.TrimSpace(out))
	}
	empty := t.TempDir()
	script := `set -e
empty=$1; shift
for d in ` + strings.Join(zoneinfoDirs(), " ") + `; do
	if [ -d "$d" ]; then mount --bind "$empty" "$d"; fi
done
for d in ` + strings.Join(zoneinfoDirs(), " ") + `; do
	if [ -e "$d/Europe/Berlin" ] || [ -e "$d/zoneinfo.zip" ]; then echo "still visible: $d" >&2; exit 99; fi
done
exec "$@"`
	cmd := exec.Command(unshare, append(ns, "sh", "-c", script, "sh", empty, bin)...)
	cmd.Args = append(cmd.Args, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")} // no ZONEINFO, GOROOT or TZ
	return cmd
}

// dockerfileBinary returns $HCLOUDSCALE_TZ_BINARY, such as a binary built
// as the Dockerfile builds it, or builds hcloudscale with the Dockerfile's
// flags but two: CGO_ENABLED=0 and -trimpath would compile every
// dependency again (minutes), and neither changes where the time package
// looks for zones, except that -trimpath drops the Go installation's
// copy, which the test hides anyway.
func dockerfileBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("HCLOUDSCALE_TZ_BINARY"); bin != "" {
		return bin
	}
	bin := filepath.Join(t.TempDir(), "hcloudscale")
	cmd := exec.Command("go", "build", "-buildvcs=false", "-ldflags", "-s -w", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestWindowTimeZoneWithoutZoneinfo runs validate and serve, built as the
// Dockerfile builds them, on a machine without a time-zone database, as
// in the scratch image, with a maintenance window in Europe/Berlin.
func TestWindowTimeZoneWithoutZoneinfo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	// Skips before the build when no namespace can be made.
	probe := withoutZoneinfo(t, "true")
	if out, err := probe.CombinedOutput(); err != nil {
		t.Fatalf("hiding the time-zone database: %v\n%s", err, out)
	}
	bin := dockerfileBinary(t)
	fake := hcloudtest.NewServer()
	t.Cleanup(fake.Close)
	doc, err := json.Marshal(map[string]any{
		"replace": map[string]any{"windows": []any{map[string]any{"schedule": "0 2 * * 1-5", "duration": "3h", "timeZone": "Europe/Berlin"}}},
		"nodeConfigs": map[string]any{"workers": map[string]any{
			"cloudInit": "#cloud-config\n",
			"replace":   map[string]any{"drift": []string{"image"}, "windows": []any{map[string]any{"schedule": "0 22 * * *", "duration": "2h", "timeZone": "Europe/Berlin"}}},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "cluster-config.json")
	if err := os.WriteFile(file, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{config.EnvToken + "=" + fake.Token(), config.EnvEndpoint + "=" + fake.URL(), config.EnvClusterConfigFile + "=" + file}
	nodes := "--nodes=0:3:cpx21:fsn1:workers"

	t.Run("validate", func(t *testing.T) {
		cmd := withoutZoneinfo(t, bin, "validate", nodes)
		cmd.Env = append(cmd.Env, env...)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "The configuration is valid") {
			t.Fatalf("validate without zoneinfo: %v\n%s", err, out)
		}
	})
	t.Run("serve", func(t *testing.T) {
		cmd := withoutZoneinfo(t, bin, "serve", nodes, "--listen", "127.0.0.1:0", "--metrics-listen", "", "--log-level", "info")
		cmd.Env = append(cmd.Env, env...)
		var stderr syncBuffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for !strings.Contains(stderr.String(), `"msg":"serving"`) {
			select {
			case err := <-exited:
				t.Fatalf("serve exited before serving (%v); stderr:\n%s", err, stderr.String())
			case <-ctx.Done():
				_ = cmd.Process.Kill()
				t.Fatalf("serve did not start; stderr:\n%s", stderr.String())
			case <-time.After(20 * time.Millisecond):
			}
		}
		// unshare runs serve in its own process (exec), so the signal
		// reaches it.
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("serve after SIGTERM: %v; stderr:\n%s", err, stderr.String())
			}
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("serve did not stop on SIGTERM; stderr:\n%s", stderr.String())
		}
	})
}
