package main

import (
	"runtime"
	"testing"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/config"
)

func TestVersion(t *testing.T) {
	oldVersion, oldCommit := hcloudscale.Version, commit
	t.Cleanup(func() { hcloudscale.Version, commit = oldVersion, oldCommit })
	hcloudscale.Version, commit = "v1.2.3", "0123abc"
	want := "hcloudscale v1.2.3 (commit 0123abc, " + runtime.Version() + ")\n"
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}} {
		r := runCmd(t, run, config.Env{}, args...)
		if r.code != exitOK || r.stdout != want || r.stderr != "" {
			t.Errorf("hcloudscale %v = %d, stdout %q, stderr %q; want 0, %q", args, r.code, r.stdout, r.stderr, want)
		}
	}
	if r := runCmd(t, run, config.Env{}, "version", "extra"); r.code != exitUsage {
		t.Errorf("hcloudscale version extra = %d; want %d", r.code, exitUsage)
	}

	// Without link-time values the build's own stamp or a placeholder
	// fills in; never an empty field.
	hcloudscale.Version, commit = "", ""
	b := readBuildInfo()
	if b.Version == "" || b.Commit == "" || b.GoVersion != runtime.Version() {
		t.Errorf("readBuildInfo() = %+v; want every field set", b)
	}
}
