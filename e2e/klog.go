package e2e

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
)

// LogTo sends the autoscaler's klog output to path (a new file in the
// temporary directory if empty), names the file on stderr, and returns a
// function that flushes and closes it. The verbosity is $E2E_KLOG_V (0 by
// default).
func LogTo(path string) (func(), error) {
	if path == "" {
		path = filepath.Join(os.TempDir(), fmt.Sprintf("hcloudscale-e2e-%d.log", os.Getpid()))
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	set := map[string]string{"logtostderr": "false", "alsologtostderr": "false"}
	if v := os.Getenv("E2E_KLOG_V"); v != "" {
		set["v"] = v
	}
	for k, v := range set {
		if err := fs.Set(k, v); err != nil {
			return nil, fmt.Errorf("klog -%s: %w", k, err)
		}
	}
	klog.SetOutput(f)
	fmt.Fprintf(os.Stderr, "autoscaler log: %s\n", path)
	return func() { klog.Flush(); _ = f.Close() }, nil
}

// ScaleSizes returns the cluster sizes listed in $E2E_SCALE, comma
// separated, and skips the test if there are none.
func ScaleSizes(t *testing.T) []int {
	var sizes []int
	for _, f := range strings.Split(os.Getenv("E2E_SCALE"), ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			t.Fatalf("E2E_SCALE: %q is not a cluster size", f)
		}
		sizes = append(sizes, n)
	}
	if len(sizes) == 0 {
		t.Skip("set E2E_SCALE to cluster sizes, e.g. 1000,5000")
	}
	return sizes
}

// ProviderLog is a logger for a provider under test that writes into the
// autoscaler's log, each line prefixed "hcloudscale: ".
func ProviderLog() *zap.Logger {
	return zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()), zapcore.AddSync(klogWriter{}), zap.InfoLevel))
}

// klogWriter writes our provider's log into the autoscaler's log.
type klogWriter struct{}

func (klogWriter) Write(b []byte) (int, error) {
	klog.InfoDepth(1, "hcloudscale: "+strings.TrimSpace(string(b)))
	return len(b), nil
}
