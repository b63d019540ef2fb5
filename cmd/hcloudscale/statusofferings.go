package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/hcloudscale/hcloudscale/config"
)

// maxOfferingServers is how many server names a row of the offerings
// section lists before it counts the rest.
const maxOfferingServers = 5

// printOfferings shows, per pool of several offerings (or with a removed
// offering's group), which offering a scale-up goes to now, each
// offering's group and whether it can be scaled up now, and the servers
// on it; a server whose own type or location is not its group's is named
// with the offering it runs on.
func printOfferings(w io.Writer, res *statusResult) {
	var order []string
	groups := map[string][]poolStatus{}
	for _, p := range res.Pools {
		if groups[p.Pool] == nil {
			order = append(order, p.Pool)
		}
		groups[p.Pool] = append(groups[p.Pool], p)
	}
	header := false
	for _, name := range order {
		gs := groups[name]
		if len(gs) < 2 {
			continue
		}
		if !header {
			fmt.Fprintf(w, "\nOfferings\n")
			header = true
		}
		next := "none: every offering is sold out or removed"
		for _, g := range gs {
			if g.Available && !g.Removed {
				next = g.Name
				break
			}
		}
		fmt.Fprintf(w, "  %s: scale-ups go to %s\n", name, next)
		tb := newTable(w, "    GROUP", "OFFERING", "NOW", "SERVERS")
		for _, g := range gs {
			off := config.Offering{ServerType: g.ServerType, Location: g.Location}.String()
			tb.row("    "+g.Name, off, offeringNow(&g), offeringServers(&g, off))
		}
		tb.flush()
	}
}

// offeringNow says whether a node group's offering can be scaled up now.
func offeringNow(g *poolStatus) string {
	switch {
	case g.Removed:
		return "removed (no scale-up)"
	case !g.Available:
		for _, u := range g.Unavailable {
			if u.ServerType == g.ServerType && u.Location == g.Location && u.PlacementGroup == "" {
				return "sold out until " + u.Until.Local().Format("15:04")
			}
		}
		return "sold out"
	}
	return g.Offering
}

// offeringServers lists the servers of a node group whose offering is off:
// "-" for none, names (with their own offering where it is not off), at
// most maxOfferingServers, then how many more.
func offeringServers(g *poolStatus, off string) string {
	var names []string
	for i, in := range g.Instances {
		if i == maxOfferingServers {
			names = append(names, fmt.Sprintf("and %d more", len(g.Instances)-i))
			break
		}
		name := in.Name
		if in.Offering != "" && in.Offering != off {
			name += " (on " + in.Offering + ")"
		}
		names = append(names, name)
	}
	if len(names) == 0 {
		return "-"
	}
	return fmt.Sprintf("%d: %s", len(g.Instances), strings.Join(names, ", "))
}
