package hcloudtest

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseSelector(t *testing.T) {
	tests := []struct {
		in   string
		want selector
	}{
		{"", nil},
		{"k", selector{{key: "k", op: opExists}}},
		{" !k ", selector{{key: "k", op: opNotExists}}},
		{"k=v", selector{{key: "k", op: opEquals, values: []string{"v"}}}},
		{"k == v", selector{{key: "k", op: opEquals, values: []string{"v"}}}},
		{"k!=v", selector{{key: "k", op: opNotEquals, values: []string{"v"}}}},
		{"k=", selector{{key: "k", op: opEquals, values: []string{""}}}},
		{"hcloud/node-group in (a, b)", selector{{key: "hcloud/node-group", op: opIn, values: []string{"a", "b"}}}},
		{"k notin (a),x=y", selector{{key: "k", op: opNotIn, values: []string{"a"}}, {key: "x", op: opEquals, values: []string{"y"}}}},
		{"example.com/k.1=v_1", selector{{key: "example.com/k.1", op: opEquals, values: []string{"v_1"}}}},
	}
	for _, tt := range tests {
		got, err := parseSelector(tt.in)
		if err != nil {
			t.Errorf("parseSelector(%q) error: %v", tt.in, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(requirement{})); diff != "" {
			t.Errorf("parseSelector(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}

func TestParseSelectorRejects(t *testing.T) {
	for _, in := range []string{
		",", "a,", ",a", "a,,b", "=v", "k=v=w", "k ~ v", "!k=v", "k in a", "k in (a", "k in a)",
		"k in ((a))", "k in (a,-b)", "-k", "k-=v", "K/x=v", "a/b/c", "k=" + string(make([]byte, 64)),
		"k=\u00e9",
	} {
		if _, err := parseSelector(in); err == nil {
			t.Errorf("parseSelector(%q) = nil error; want a rejection", in)
		}
	}
}

func TestSelectorMatches(t *testing.T) {
	labels := map[string]string{"pool": "a", "env": "prod"}
	tests := []struct {
		sel  string
		want bool
	}{
		{"", true},
		{"pool", true},
		{"!pool", false},
		{"missing!=x", true},
		{"missing notin (x)", true},
		{"missing in (x)", false},
		{"pool=a,env=prod", true},
		{"pool=a,env=dev", false},
	}
	for _, tt := range tests {
		sel, err := parseSelector(tt.sel)
		if err != nil {
			t.Fatalf("parseSelector(%q): %v", tt.sel, err)
		}
		if got := sel.matches(labels); got != tt.want {
			t.Errorf("%q matches %v = %v; want %v", tt.sel, labels, got, tt.want)
		}
	}
}

// FuzzParseSelector checks that the parser never panics and that what it
// accepts has valid keys and values throughout.
func FuzzParseSelector(f *testing.F) {
	for _, seed := range []string{"", "k", "!k", "k=v", "k==v", "k!=v", "k in (a,b)", "k notin (a)", "a=b,c", "(", "k in (,)"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		sel, err := parseSelector(in)
		if err != nil {
			return
		}
		for _, r := range sel {
			if err := validLabelKey(r.key); err != nil {
				t.Errorf("parseSelector(%q) accepted key %q: %v", in, r.key, err)
			}
			for _, v := range r.values {
				if err := validLabelValue(v); err != nil {
					t.Errorf("parseSelector(%q) accepted value %q: %v", in, v, err)
				}
			}
		}
		_ = sel.matches(map[string]string{"k": "v"})
	})
}
