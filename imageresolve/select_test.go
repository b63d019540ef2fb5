package imageresolve

import (
	"strconv"
	"strings"
	"testing"

	"github.com/hcloudscale/hcloudscale/config"
)

func TestSelect(t *testing.T) {
	both := func(amd, arm config.ImageSpec) config.ImagesForArch {
		return config.ImagesForArch{AMD64: amd, ARM64: arm}
	}
	tests := []struct {
		name     string
		pool     config.ImagesForArch
		global   config.ImagesForArch
		fallback config.ImageSpec
		arch     config.Arch
		want     config.ImageSpec
	}{
		{"pool wins over global and fallback", both("pool-x86", "pool-arm"), both("global-x86", "global-arm"), "env", config.ArchAMD64, "pool-x86"},
		{"pool wins for arm64 too", both("pool-x86", "pool-arm"), both("global-x86", "global-arm"), "env", config.ArchARM64, "pool-arm"},
		{"global when the pool has no entry for the arch", both("pool-x86", ""), both("global-x86", "global-arm"), "env", config.ArchARM64, "global-arm"},
		{"pool entry for the other arch does not hide global", both("", "pool-arm"), both("global-x86", ""), "env", config.ArchAMD64, "global-x86"},
		{"fallback when neither pool nor global has the arch", both("pool-x86", ""), both("global-x86", ""), "env", config.ArchARM64, "env"},
		{"fallback when nothing is configured", both("", ""), both("", ""), "ubuntu-24.04", config.ArchAMD64, "ubuntu-24.04"},
		{"empty when nothing at all is set", both("", ""), both("", ""), "", config.ArchARM64, ""},
		{"empty for an unknown arch even with a fallback", both("a", "b"), both("c", "d"), "env", config.Arch("s390x"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Select(tt.pool, tt.global, tt.fallback, tt.arch); got != tt.want {
				t.Errorf("Select(%+v, %+v, %q, %s) = %q; want %q", tt.pool, tt.global, tt.fallback, tt.arch, got, tt.want)
			}
		})
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		spec config.ImageSpec
		want Kind
		why  string
	}{
		{"", KindEmpty, "unset"},
		{"114690387", KindID, "digits"},
		{"0", KindID, "digits, even if no image has it"},
		{"9223372036854775807", KindID, "max int64"},
		{"9223372036854775808", KindName, "overflows int64, cannot be an ID"},
		{"-1", KindName, "signs are not IDs"},
		{"+1", KindName, "signs are not IDs"},
		{"ubuntu-24.04", KindName, "system image name"},
		{"golden", KindName, "could be a name; falls back to selector at lookup"},
		{"role=worker", KindSelector, "equality"},
		{"role!=worker", KindSelector, "inequality"},
		{"!legacy", KindSelector, "absence"},
		{"role=worker,os=talos", KindSelector, "conjunction"},
		{"env in (prod,staging)", KindSelector, "set membership"},
		{"12=3", KindSelector, "digits with selector syntax"},
	}
	for _, tt := range tests {
		t.Run(string(tt.spec), func(t *testing.T) {
			if got := Classify(tt.spec); got != tt.want {
				t.Errorf("Classify(%q) = %v; want %v (%s)", tt.spec, got, tt.want, tt.why)
			}
		})
	}
}

func TestKindString(t *testing.T) {
	tests := []struct {
		kind Kind
		want string
	}{
		{KindEmpty, "empty"},
		{KindID, "ID"},
		{KindName, "name"},
		{KindSelector, "label selector"},
		{Kind(42), "Kind(42)"},
	}
	for _, tt := range tests {
		if got := tt.kind.String(); got != tt.want {
			t.Errorf("Kind(%d).String() = %q; want %q", int(tt.kind), got, tt.want)
		}
	}
}

// FuzzClassify checks Classify's promises on arbitrary specs: an ID is
// exactly a sign-less int64, a selector always carries selector syntax, and
// only the empty spec is empty.
func FuzzClassify(f *testing.F) {
	for _, s := range []string{"", "0", "114690387", "9223372036854775808", "-1", "ubuntu-24.04", "golden", "a=b", "k in (x,y)", "!k", " "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		kind := Classify(config.ImageSpec(s))
		id, err := strconv.ParseInt(s, 10, 64)
		isUnsignedInt := err == nil && id >= 0 && s[0] != '+' && s[0] != '-'
		switch kind {
		case KindEmpty:
			if s != "" {
				t.Errorf("Classify(%q) = %v for a non-empty spec", s, kind)
			}
		case KindID:
			if !isUnsignedInt {
				t.Errorf("Classify(%q) = ID, but it is no sign-less int64", s)
			}
		case KindSelector:
			if !strings.ContainsAny(s, selectorOnly) {
				t.Errorf("Classify(%q) = selector without selector syntax", s)
			}
		case KindName:
			if isUnsignedInt || strings.ContainsAny(s, selectorOnly) {
				t.Errorf("Classify(%q) = name, but it is an ID or selector", s)
			}
		default:
			t.Errorf("Classify(%q) = %v, not a defined kind", s, kind)
		}
	})
}
