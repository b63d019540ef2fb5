package adapter

import (
	"errors"
	"regexp"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
)

// klogLine is one line of klog's text format:
// I0301 12:00:00.000000   12345 file.go:42] "msg" key="value"
var klogLine = regexp.MustCompile(`^([IWEF])\d{4} [\d:.]+\s+\d+ ([^\]]+)\] (.*)$`)

// TestKlogLogger checks that zap's levels reach klog at the documented
// severities and verbosities, with the fields as key/value pairs and the
// file:line of the code that logged.
func TestKlogLogger(t *testing.T) {
	type line struct{ Severity, Location, Text string }
	here := func() string {
		_, file, l, _ := runtime.Caller(1)
		return fileBase(file) + ":" + strconv.Itoa(l+1) // the log call is on the next line
	}
	logAll := func() map[string]string {
		log := NewKlogLogger().Named("pool").With(zap.String("pool", "workers"))
		at := map[string]string{}
		at["debug"] = here()
		log.Debug("listed servers", zap.Int("count", 3))
		at["info"] = here()
		log.Info("scale-up requested", zap.Int("delta", 2))
		at["warn"] = here()
		log.Warn("slow listing", zap.Duration("took", 1500*time.Millisecond), zap.Error(errors.New("deadline")))
		at["error"] = here()
		log.Error("create failed", zap.Error(errors.New("boom")), zap.String("code", "resource_unavailable"))
		return at
	}
	texts := map[string]line{
		"debug": {"I", "", `"pool: listed servers" count=3 pool="workers"`},
		"info":  {"I", "", `"pool: scale-up requested" delta=2 pool="workers"`},
		"warn":  {"W", "", `"pool: slow listing" pool="workers" took="1.5s" err="deadline"`},
		"error": {"E", "", `"pool: create failed" err="boom" code="resource_unavailable" pool="workers"`},
	}
	tests := []struct {
		v    string
		want []string // levels that must appear, in order
	}{
		{"0", []string{"info", "warn", "error"}},
		{"4", []string{"info", "warn", "error"}},
		{"5", []string{"debug", "info", "warn", "error"}},
	}
	for _, tt := range tests {
		t.Run("v="+tt.v, func(t *testing.T) {
			out := captureKlog(t, tt.v)
			at := logAll()
			var want, got []line
			for _, lvl := range tt.want {
				l := texts[lvl]
				l.Location = at[lvl]
				want = append(want, l)
			}
			for _, s := range out.lines() {
				m := klogLine.FindStringSubmatch(s)
				if m == nil {
					t.Errorf("not a klog line: %q", s)
					continue
				}
				got = append(got, line{m[1], m[2], m[3]})
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("klog output at -v=%s (-want +got):\n%s", tt.v, diff)
			}
		})
	}
}

func fileBase(path string) string {
	for i := len(path) - 1; i >= 0; i-- {
		if path[i] == '/' {
			return path[i+1:]
		}
	}
	return path
}
