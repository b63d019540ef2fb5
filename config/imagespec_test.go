package config

import (
	"strings"
	"testing"
)

func TestCheckImageSpec(t *testing.T) {
	tests := []struct {
		spec    ImageSpec
		wantErr string // "" for valid
	}{
		{"ubuntu-24.04", ""},
		{"123456789", ""},
		{"my-snapshot", ""},
		{"customized_ubuntu=true", ""},
		{"role==k8s", ""},
		{"role!=old", ""},
		{"!deprecated", ""},
		{"k8s", ""}, // a name, or a bare-key selector: well formed either way
		{"role=k8s, version in (1.30, 1.31), !old", ""},
		{"arch notin (x86)", ""},
		{"example.com/role=k8s", ""},

		{"", "empty image spec"},
		{" ubuntu-24.04", "leading or trailing whitespace"},
		{"ubuntu 24.04", "contains whitespace"},
		{"ubuntu\t24.04", "contains control characters"},
		{ImageSpec(strings.Repeat("a", 1025)), "at most 1024"},
		{"role=", ""}, // an empty value is a valid label value
		{"=k8s", "empty label key"},
		{"role=a b", "label value"},
		{"role=(x", "unclosed '('"},
		{"role=a!b", "unexpected operator in value"},
		{"a,,b", "empty requirement"},
		{"version in ()", "empty value list"},
		{"version in (1,", "unclosed '('"},
		{"version in 1)", "unbalanced ')'"},
		{"version in ((1))", "nested parentheses"},
		{"version within (1)", `want "key in (values)"`},
		{"version in (1) x", "text after ')'"},
		{"a b,c=d", "want key=value"},
		{"-bad=1", "label key"},
	}
	for _, tt := range tests {
		t.Run(string(tt.spec), func(t *testing.T) {
			err := CheckImageSpec(tt.spec)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("CheckImageSpec(%q) = %v; want nil", tt.spec, err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("CheckImageSpec(%q) = %v; want an error containing %q", tt.spec, err, tt.wantErr)
			}
		})
	}
}

func TestCheckServerLabel(t *testing.T) {
	tests := []struct {
		key, value, wantErr string
	}{
		{"env", "prod", ""},
		{"example.com/team", "", ""},
		{"a.b_c-d", "A.b_c-1", ""},
		{strings.Repeat("k", 63), strings.Repeat("v", 63), ""},
		{strings.Repeat("k", 64), "v", "not a valid Hetzner label key"},
		{"k", strings.Repeat("v", 64), "not a valid Hetzner label value"},
		{"", "v", "not a valid Hetzner label key"},
		{"-k", "v", "not a valid Hetzner label key"},
		{"k", "v-", "not a valid Hetzner label value"},
		{"hetzner.cloud/managed", "x", "Hetzner reserves"},
		{"hcloud/node-group", "x", "set by hcloudscale"},
		{"hcloudscale/cluster", "x", "set by hcloudscale"},
		{"hcloudscale/offering", "cx33-nbg1", "set by hcloudscale"},
	}
	for _, tt := range tests {
		t.Run(tt.key+"="+tt.value, func(t *testing.T) {
			err := CheckServerLabel(tt.key, tt.value)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("CheckServerLabel(%q, %q) = %v; want nil", tt.key, tt.value, err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("CheckServerLabel(%q, %q) = %v; want an error containing %q", tt.key, tt.value, err, tt.wantErr)
			}
		})
	}
}
