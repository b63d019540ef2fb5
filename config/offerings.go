package config

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// Offering is one server type in one location that a pool may run on.
type Offering struct {
	ServerType string // lower-case
	Location   string // lower-case
}

// String returns "<serverType>-<location>".
func (o Offering) String() string { return o.ServerType + "-" + o.Location }

// MaxOfferings is the most offerings a pool may list: every offering
// must rank above [PriorityOthers] in [Config.Priorities].
const MaxOfferings = 20

// GroupSeparator separates a pool's name from the offering in the node
// group ID of every offering but the first. Pool names cannot contain it.
const GroupSeparator = "@"

// GroupID returns the node group ID of offering i of a pool whose
// offerings are offerings: the pool's name for the first offering (so
// upstream IDs stay), "<pool>@<serverType>-<location>" for a later one.
func GroupID(pool string, offerings []Offering, i int) string {
	if i == 0 {
		return pool
	}
	return pool + GroupSeparator + offerings[i].String()
}

// PoolOfGroup returns the name of the pool a node group ID belongs to:
// the part before GroupSeparator, or the whole ID.
func PoolOfGroup(id string) string {
	name, _, _ := strings.Cut(id, GroupSeparator)
	return name
}

// PoolOfferings returns the pool's offerings in order: Offerings when
// set, else the one offering {ServerType, Location}.
func (p *Pool) PoolOfferings() []Offering {
	if len(p.Offerings) > 0 {
		return p.Offerings
	}
	return []Offering{{ServerType: p.ServerType, Location: p.Location}}
}

// OfferingGroups returns the node groups of the pool, one per offering in
// order: copies of the pool whose Name is the group's ID, whose
// ServerType and Location are the offering's and whose Family is the
// pool's name. A pool with one offering returns itself, Family set.
func (p *Pool) OfferingGroups() []Pool {
	family := p.FamilyName()
	offs := p.PoolOfferings()
	out := make([]Pool, len(offs))
	for i, o := range offs {
		g := *p
		g.Family = family
		g.Name = GroupID(family, offs, i)
		g.ServerType, g.Location = o.ServerType, o.Location
		if i > 0 {
			g.Origin = p.OfferingSetting(i)
		}
		out[i] = g
	}
	return out
}

// OfferingSetting names, for messages, the setting that declares offering
// i of the pool: the key it was written at
// ("nodeConfigs.workers.offerings[1]"); for the first offering Origin,
// which declares its server type and location, followed by its key when
// the list repeats it ("--nodes[0] (workers), nodeConfigs.workers.offerings[0]");
// for a pool built in code "<Origin> offering <i> (<serverType>-<location>)".
func (p *Pool) OfferingSetting(i int) string {
	key := ""
	if i < len(p.OfferingOrigins) {
		key = p.OfferingOrigins[i]
	}
	switch {
	case i == 0 && key != "" && p.Origin != "":
		return p.Origin + ", " + key
	case key != "":
		return key
	case i == 0:
		return p.Origin
	}
	return fmt.Sprintf("%s offering %d (%s)", p.Origin, i, p.PoolOfferings()[i])
}

// FamilyName returns the name of the pool this node group is an offering
// of: Family, or Name when Family is unset.
func (p *Pool) FamilyName() string {
	if p.Family != "" {
		return p.Family
	}
	return p.Name
}

// OfferingIndex returns the index of the pool's own ServerType and
// Location in its offerings, -1 when they are not one of them.
func (p *Pool) OfferingIndex() int {
	for i, o := range p.PoolOfferings() {
		if o.ServerType == p.ServerType && o.Location == p.Location {
			return i
		}
	}
	return -1
}

// NodeGroups returns the node groups of every pool, in the order of
// Pools and, within a pool, of its offerings (see [Pool.OfferingGroups]).
func (c *Config) NodeGroups() []Pool {
	var out []Pool
	for i := range c.Pools {
		out = append(out, c.Pools[i].OfferingGroups()...)
	}
	return out
}

// offerings decodes a nodeConfigs entry's offerings: an array of
// {serverType, location} objects, both required.
func (p *problems) offerings(path string, raw json.RawMessage) []Offering {
	var out []Offering
	before := len(p.errs)
	p.array(path, raw, func(ep string, raw json.RawMessage) {
		var o Offering
		before := len(p.errs)
		p.fields(ep, raw, map[string]func(string, json.RawMessage){
			"serverType": p.offering(&o.ServerType),
			"location":   p.offering(&o.Location),
		})
		if len(p.errs) == before {
			if o.ServerType == "" {
				p.addf(ep+".serverType", "required")
			}
			if o.Location == "" {
				p.addf(ep+".location", "required")
			}
		}
		// A wrong element stays as a zero Offering so that the later
		// checks name the others by the index they were written at.
		if len(p.errs) > before {
			o = Offering{}
		}
		out = append(out, o)
	})
	if out == nil && len(p.errs) == before {
		p.addf(path, "empty: list at least the pool's own serverType and location, or leave offerings out")
	}
	return out
}

// poolOfferings returns the offerings of a pool whose --nodes (or
// nodeConfigs) type and location are first and whose entry lists written:
// first written or not, then the others in the order written; and the
// key each was written at ("" for first when it is not written). A
// duplicate, or first written at another place than the first, is
// reported at path.
func (p *problems) poolOfferings(path string, first Offering, written []Offering) (offerings []Offering, origins []string) {
	if len(written) == 0 {
		return nil, nil
	}
	out, keys := []Offering{first}, []string{""}
	seen := map[Offering]int{}
	for i, o := range written {
		ip := indexPath(path, i)
		switch j, dup := seen[o]; {
		case o == Offering{}:
			continue // reported when decoded
		case dup:
			p.addf(ip, "%s is listed already at %s", o, indexPath(path, j))
		case o == first && i != 0:
			p.addf(ip, "%s is the pool's own serverType and location, which are always the first offering: move it to %s or leave it out", o, indexPath(path, 0))
		case o == first:
			keys[0] = ip
		default:
			out, keys = append(out, o), append(keys, ip)
		}
		seen[o] = i
	}
	if len(out) == 1 {
		return nil, nil
	}
	return out, keys
}

// validateOfferings checks a resolved pool's Offerings.
func (p *problems) validateOfferings(path string, pool *Pool) {
	if len(pool.Offerings) == 0 {
		return
	}
	if pool.Family != "" && pool.Family != pool.Name {
		// A node group of an offering: its Name is the group ID.
		return
	}
	if first := pool.Offerings[0]; first.ServerType != pool.ServerType || first.Location != pool.Location {
		p.addf(indexPath(path, 0), "%s, want the pool's own serverType and location %s-%s first", first, pool.ServerType, pool.Location)
	}
	if len(pool.Offerings) > MaxOfferings {
		p.addf(path, "%d offerings, at most %d", len(pool.Offerings), MaxOfferings)
	}
	seen := map[Offering]int{}
	for i, o := range pool.Offerings {
		ip := indexPath(path, i)
		for _, f := range []struct{ field, v string }{{"serverType", o.ServerType}, {"location", o.Location}} {
			switch {
			case f.v == "":
				p.addf(ip+"."+f.field, "required")
			case strings.ToLower(f.v) != f.v:
				p.addf(ip+"."+f.field, "%q is not lower-case", f.v)
			default:
				p.add(ip+"."+f.field, checkNoSpace(f.v))
			}
		}
		if j, dup := seen[o]; dup {
			p.addf(ip, "%s is listed already at %s", o, indexPath(path, j))
		}
		seen[o] = i
	}
	if pool.SpreadGroups {
		p.addf(path, "set together with spreadGroups, which one pool of several offerings cannot share yet: use placementGroup or no placement group")
	}
}

// Priority is one entry of the autoscaler's priority expander: node
// groups whose ID matches one of Patterns rank at Value (higher wins).
type Priority struct {
	Value    int
	Patterns []string
}

// Priority values of [Config.Priorities].
const (
	// PriorityFirst is the priority of every pool's first offering; each
	// later offering ranks one lower.
	PriorityFirst = 100
	// PriorityOthers ranks every group no pattern names (other providers'
	// groups), so that the expander never drops them.
	PriorityOthers = 1
)

// Priorities returns the priority-expander entries that make the
// autoscaler follow each pool's order of offerings: the first offering
// of every pool at PriorityFirst, the second one lower, and so on, then
// ".*" at PriorityOthers; highest first. Each pattern matches one node
// group ID exactly.
func (c *Config) Priorities() []Priority {
	var out []Priority
	for i := range c.Pools {
		for j, g := range c.Pools[i].OfferingGroups() {
			for len(out) <= j {
				out = append(out, Priority{Value: PriorityFirst - len(out)})
			}
			out[j].Patterns = append(out[j].Patterns, "^"+regexp.QuoteMeta(g.Name)+"$")
		}
	}
	return append(out, Priority{Value: PriorityOthers, Patterns: []string{".*"}})
}

// PrioritiesYAML renders ps as the value of the priority expander
// ConfigMap's "priorities" key: one line per priority, highest first.
func PrioritiesYAML(ps []Priority) string {
	var b strings.Builder
	for _, p := range ps {
		quoted := make([]string, len(p.Patterns))
		for i, pat := range p.Patterns {
			quoted[i] = "'" + strings.ReplaceAll(pat, "'", "''") + "'"
		}
		fmt.Fprintf(&b, "%d: [%s]\n", p.Value, strings.Join(quoted, ", "))
	}
	return b.String()
}
