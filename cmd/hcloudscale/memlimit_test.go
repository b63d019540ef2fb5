package main

import (
	"strings"
	"testing"

	"github.com/hcloudscale/hcloudscale/config"
)

func TestMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		name    string
		vars    map[string]string
		want    int64
		wantErr string
	}{
		{"unset", nil, 0, ""},
		{"the chart's 384Mi", map[string]string{envMemoryLimit: "402653184"}, 362387865, ""},
		{"GOMEMLIMIT wins", map[string]string{envMemoryLimit: "402653184", "GOMEMLIMIT": "100MiB"}, 0, ""},
		{"a quantity, not bytes", map[string]string{envMemoryLimit: "384Mi"}, 0, envMemoryLimit + `="384Mi"`},
		{"zero", map[string]string{envMemoryLimit: "0"}, 0, "in bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := memoryLimit(config.MapEnv(tc.vars, nil))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("memoryLimit(%v) error %v; want one containing %q", tc.vars, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("memoryLimit(%v) = %d, %v; want %d", tc.vars, got, err, tc.want)
			}
		})
	}
}
