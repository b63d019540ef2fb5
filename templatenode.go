package hcloudscale

import (
	"strings"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/pool"
)

// Names the autoscaler gives its copies of template nodes.
const (
	// LabelTemplateNode is set to "true" on every template node the
	// autoscaler builds, from a pool's TemplateNode or from a real node.
	LabelTemplateNode = "cluster-autoscaler.kubernetes.io/template-node"
	// templateNamePrefix starts the name of a template copied from a real
	// node: template-node-for-<group>-<random digits>, and further
	// -<suffix> parts on the copies the simulation makes of it.
	templateNamePrefix = "template-node-for-"
)

// PoolForTemplateNode returns the pool of one of the autoscaler's template
// nodes (label cluster-autoscaler.kubernetes.io/template-node=true), or
// nil for any other node. A template copied from a real node keeps that
// node's provider ID, which names a server that may long be gone (the
// autoscaler caches templates for years by default), so call it when
// [Cluster.PoolForNode] finds nothing. The pool is found by the node's
// hcloud/node-group label, else by the group in its name,
// template-node-for-<pool>-<digits>[-...]; when pool names are prefixes of
// each other the longest that fits wins. It answers from memory.
func (c *Cluster) PoolForTemplateNode(nodeName string, labels map[string]string) *pool.Pool {
	if labels[LabelTemplateNode] != "true" {
		return nil
	}
	byName := c.pools.Load().byName
	if p := byName[labels[config.LabelNodeGroup]]; p != nil {
		// Every offering's nodes carry the pool's label; the template's
		// type and region tell the offering.
		for _, g := range p.Family() {
			if cfg := g.Config(); cfg.ServerType == labels["node.kubernetes.io/instance-type"] && cfg.Location == labels["topology.kubernetes.io/region"] {
				return g
			}
		}
		return p
	}
	rest, ok := strings.CutPrefix(nodeName, templateNamePrefix)
	if !ok {
		return nil
	}
	var found *pool.Pool
	for name, p := range byName {
		suffix, ok := strings.CutPrefix(rest, name+"-")
		if !ok || !startsWithDigits(suffix) {
			continue
		}
		if found == nil || len(name) > len(found.Name()) {
			found = p
		}
	}
	return found
}

// startsWithDigits reports whether s begins with a run of ASCII digits
// that ends the string or a dash.
func startsWithDigits(s string) bool {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n > 0 && (n == len(s) || s[n] == '-')
}
