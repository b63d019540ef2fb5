package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/hcloudscale/hcloudscale/config"
)

// TestEveryHelpHasOneStyle checks that the help of every command spells
// flags as they are written (two dashes, one for a single letter) and ends
// with its environment, exit codes and an example.
func TestEveryHelpHasOneStyle(t *testing.T) {
	t.Parallel()
	singleDash := regexp.MustCompile(`(?m)^  -[a-z][a-z-]+`)
	for _, c := range commands() {
		t.Run(c.name, func(t *testing.T) {
			r := runCmd(t, c.run, config.MapEnv(nil, nil), "--help")
			if r.code != exitOK || r.stderr != "" {
				t.Fatalf("%s --help = %d, stderr %q; want 0 and none", c.name, r.code, r.stderr)
			}
			for _, want := range []string{"Usage: hcloudscale " + c.name, "Environment variables", "\nExit codes: ", "\nExamples:\n  "} {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("%s --help lacks %q:\n%s", c.name, want, r.stdout)
				}
			}
			if m := singleDash.FindString(r.stdout); m != "" {
				t.Errorf("%s --help lists %q with one dash", c.name, m)
			}
			if strings.Contains(r.stdout, "  --o ") {
				t.Errorf("%s --help lists -o as --o", c.name)
			}
		})
	}
	if r := runCmd(t, runStatus, config.MapEnv(nil, nil), "--help"); !strings.Contains(r.stdout, "Replacements in\nprogress") {
		t.Errorf("status --help does not name its replacements section:\n%s", r.stdout)
	}
	r := runCmd(t, runReplace, config.MapEnv(nil, nil), "--help")
	for _, want := range []string{"repair:not_ready", "the pool's last stop", "HCLOUD_ENDPOINT_INSECURE"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("replace --help lacks %q", want)
		}
	}
}
