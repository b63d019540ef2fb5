package main

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

// TestStatusOfferingsSection: for a pool of several offerings, status
// says which group a scale-up goes to now, and per offering whether it
// can be scaled up now and the servers on it, each server named with the
// offering it runs on where that is not its group's. The expected rows
// are built from the fake API's servers and status's JSON, not copied
// from the output.
func TestStatusOfferingsSection(t *testing.T) {
	t.Parallel()
	p := newFakeProject(t)
	// The first offering is sold out in the catalogue.
	if err := p.api.SetServerTypeAvailable("cax21", "hel1", false); err != nil {
		t.Fatal(err)
	}
	labels := poolLabels("arm-batch-hel1", "prod")
	removedLabels := poolLabels("arm-batch-hel1", "prod")
	removedLabels[config.LabelOffering] = "cax11-hel1"
	addServers(t, p,
		hcloudtest.ServerInfo{Name: "hel-1", ServerType: "cax31", Location: "hel1", Labels: labels},
		hcloudtest.ServerInfo{Name: "hel-2", ServerType: "cax21", Location: "fsn1", Labels: labels},
		// On no offering of the pool: in the first group.
		hcloudtest.ServerInfo{Name: "hel-3", ServerType: "cax31", Location: "fsn1", Labels: labels},
		// Created for an offering the pool no longer lists.
		hcloudtest.ServerInfo{Name: "hel-4", ServerType: "cax11", Location: "hel1", Labels: removedLabels},
	)
	api, err := p.api.Client().Server.All(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	runsOn := map[string]string{}
	for _, s := range api {
		runsOn[s.Name] = s.ServerType.Name + "-" + s.Location.Name
	}

	js := runCmd(t, runStatus, p.env(t, nil), append([]string{"-o", "json"}, exampleNodes...)...)
	if js.code != exitOK {
		t.Fatalf("status -o json = %d; stderr:\n%s", js.code, js.stderr)
	}
	type row struct{ Group, Offering, Now, Servers string }
	var want []row
	next := ""
	for _, ps := range decodeJSON[statusResult](t, js).Pools {
		if ps.Pool != "arm-batch-hel1" {
			continue
		}
		off := ps.ServerType + "-" + ps.Location
		now := ps.Offering
		switch {
		case ps.Removed:
			now = "removed (no scale-up)"
		case !ps.Available:
			now = "sold out until " + ps.Unavailable[0].Until.Local().Format("15:04")
		case next == "":
			next = ps.Name
		}
		var names []string
		for _, in := range ps.Instances {
			if in.Offering != runsOn[in.Name] {
				t.Errorf("JSON: instance %s on %q; the API says %q", in.Name, in.Offering, runsOn[in.Name])
			}
			if runsOn[in.Name] != off {
				names = append(names, in.Name+" (on "+runsOn[in.Name]+")")
			} else {
				names = append(names, in.Name)
			}
		}
		servers := "-"
		if len(names) > 0 {
			servers = fmt.Sprintf("%d: %s", len(names), strings.Join(names, ", "))
		}
		want = append(want, row{ps.Name, off, now, servers})
	}
	if next != "arm-batch-hel1@cax31-hel1" || len(want) != 4 {
		t.Fatalf("JSON: first available %q among %d groups; want arm-batch-hel1@cax31-hel1 among 4", next, len(want))
	}

	text := runCmd(t, runStatus, p.env(t, nil), exampleNodes...).stdout
	_, section, ok := strings.Cut(text, "\nOfferings\n")
	if !ok {
		t.Fatalf("status output has no Offerings section:\n%s", text)
	}
	section, _, _ = strings.Cut(section, "\n\n")
	lines := strings.Split(section, "\n")
	if lines[0] != "  arm-batch-hel1: scale-ups go to "+next {
		t.Errorf("first line %q; want the pool and %s", lines[0], next)
	}
	// Pools of one offering have no rows; the header is the second line.
	var got []row
	cell := regexp.MustCompile(`\s{2,}`)
	for _, l := range lines[2:] {
		f := cell.Split(strings.TrimSpace(l), 4)
		if len(f) != 4 {
			t.Fatalf("row %q has %d cells; want 4\n%s", l, len(f), section)
		}
		got = append(got, row{f[0], f[1], f[2], f[3]})
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("offerings section (-want +got):\n%s\noutput:\n%s", diff, section)
	}
}
