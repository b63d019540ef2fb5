package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/hcloudscale/hcloudscale/cloudinit"
)

// ClusterConfig is the cluster-config JSON document (HCLOUD_CLUSTER_CONFIG
// or HCLOUD_CLUSTER_CONFIG_FILE) after [ParseClusterConfig]: every value
// checked on its own, nothing merged with the environment or --nodes yet.
// Unset optional values are nil or zero.
type ClusterConfig struct {
	ImagesForArch        *ImagesForArch // nil: key absent
	DefaultSubnetIPRange netip.Prefix   // invalid (zero): unset
	NodeConfigs          map[string]*NodeConfig
	ClusterName          string
	// CloudInitTemplate makes every pool's cloudInit a template unless the
	// pool says otherwise; nil: key absent.
	CloudInitTemplate *bool
	// Replace is the top-level replace object, with the defaults filled
	// in; nil: key absent.
	Replace *ClusterReplace

	// Warnings are problems that do not stop loading, such as an empty image
	// spec or upstream's internal keys.
	Warnings []string
}

// NodeConfig is one nodeConfigs entry.
type NodeConfig struct {
	// MinSize, MaxSize, ServerType and Location are the fields of a
	// --nodes spec: an entry that has them declares its pool without one.
	// nil or "": key absent. ServerType and Location are lower-cased.
	MinSize    *int
	MaxSize    *int
	ServerType string
	Location   string

	CloudInit         Secret
	CloudInitTemplate *bool // nil: key absent
	Labels            map[string]string
	ServerLabels      map[string]string
	Taints            []corev1.Taint
	ImagesForArch     *ImagesForArch // nil: key absent
	SubnetIPRange     netip.Prefix
	Firewalls         []string
	PlacementGroup    string
	// PublicIPv4 and PublicIPv6 override HCLOUD_PUBLIC_IPV4/6 for the
	// pool; nil: key absent.
	PublicIPv4 *bool
	PublicIPv6 *bool
	// Offerings: the offerings key as written; nil when absent.
	Offerings []Offering
	// SpreadGroups: the spreadGroups key; false when absent.
	SpreadGroups bool
	MaxPods      int // 0: unset
	Reserved     Reserved
	Autoscaling  *Autoscaling // nil: key absent
	// Replace is the pool's replace object with the defaults filled in
	// (the pool's Pool.Replace); nil: key absent.
	Replace *Replace
}

// ParseClusterConfig parses and checks a cluster-config document (plain
// JSON, not base64). Every key and value is checked on its own; an unknown
// key, a duplicate key or a malformed value is an error naming its JSON
// path, and all of them are returned at once, joined.
//
// A key that differs from a known one only in case is taken for it with a
// warning naming the canonical spelling (upstream decoded with
// encoding/json, which ignores case); two keys of one object that differ
// only in case are an error. A key that is unknown, such as a typo, is an
// error reported with the key it probably means. Upstream's internal isUsingNewFormat and
// legacyConfig keys, which upstream decoded and then ignored, are ignored
// with a warning.
func ParseClusterConfig(data []byte) (*ClusterConfig, error) {
	var p problems
	cc, err := p.clusterConfig(data)
	if err != nil {
		return nil, err
	}
	if err := p.err(); err != nil {
		return nil, err
	}
	return cc, nil
}

// clusterConfig records the problems of the document in p and returns what
// could be decoded, so that Load can still check it against the --nodes
// pools; it fails only when data is not a JSON object.
func (p *problems) clusterConfig(data []byte) (*ClusterConfig, error) {
	if err := checkSyntax(data); err != nil {
		return nil, err
	}
	if k := jsonKind(data); k != "an object" {
		return nil, fmt.Errorf("want a JSON object, got %s", k)
	}
	cc := &ClusterConfig{NodeConfigs: map[string]*NodeConfig{}}
	warningsBefore := len(p.warnings)
	p.fields("", data, map[string]func(string, json.RawMessage){
		"imagesForArch": func(path string, raw json.RawMessage) {
			cc.ImagesForArch = p.images(path, raw)
		},
		"defaultSubnetIPRange": func(path string, raw json.RawMessage) {
			cc.DefaultSubnetIPRange = p.prefix(path, raw)
		},
		"nodeConfigs": func(path string, raw json.RawMessage) {
			p.members(path, raw, func(name string, raw json.RawMessage) {
				np := childPath(path, name)
				if isNull(raw) {
					p.addf(np, "want an object, got null: write {} for a pool that takes every default")
					return
				}
				cc.NodeConfigs[name] = p.nodeConfig(np, raw)
			})
		},
		"clusterName": func(path string, raw json.RawMessage) {
			if s, ok := p.str(path, raw); ok && s != "" {
				p.add(path, CheckClusterName(s))
				cc.ClusterName = s
			}
		},
		"cloudInitTemplate": p.optionalBool(&cc.CloudInitTemplate),
		"replace": func(path string, raw json.RawMessage) {
			cc.Replace = p.clusterReplace(path, raw)
		},
		"isUsingNewFormat": func(path string, _ json.RawMessage) {
			p.warnf(path, "ignored: an internal field of the upstream provider, which ignored it too")
		},
		"legacyConfig": func(path string, _ json.RawMessage) {
			p.warnf(path, "ignored: an internal field of the upstream provider, which ignored it too; use HCLOUD_CLOUD_INIT and HCLOUD_IMAGE for the legacy format")
		},
	})
	// Whether a cloudInit is a template is known once the whole document
	// is read: the top-level key may follow nodeConfigs.
	for _, name := range sortedKeys(cc.NodeConfigs) {
		nc := cc.NodeConfigs[name]
		path := childPath("nodeConfigs", name) + ".cloudInit"
		if cc.isTemplate(nc) {
			_, err := cloudinit.Parse(nc.CloudInit.Reveal())
			p.add(path, templateError(err))
		} else {
			p.add(path, checkCloudInit(nc.CloudInit.Reveal()))
		}
	}
	cc.Warnings = append([]string(nil), p.warnings[warningsBefore:]...)
	return cc, nil
}

// isTemplate reports whether a pool's cloudInit is a template: the pool's
// cloudInitTemplate, else the document's, else not.
func (cc *ClusterConfig) isTemplate(nc *NodeConfig) bool {
	switch {
	case nc.CloudInitTemplate != nil:
		return *nc.CloudInitTemplate
	case cc.CloudInitTemplate != nil:
		return *cc.CloudInitTemplate
	}
	return false
}

func (p *problems) nodeConfig(path string, raw json.RawMessage) *NodeConfig {
	nc := &NodeConfig{}
	p.fields(path, raw, map[string]func(string, json.RawMessage){
		"minSize":           p.size(&nc.MinSize),
		"maxSize":           p.size(&nc.MaxSize),
		"serverType":        p.offering(&nc.ServerType),
		"location":          p.offering(&nc.Location),
		"cloudInit":         p.cloudInit(&nc.CloudInit),
		"cloudInitTemplate": p.optionalBool(&nc.CloudInitTemplate),
		"labels": func(path string, raw json.RawMessage) {
			nc.Labels = p.stringMap(path, raw)
			p.checkKubeLabels(path, nc.Labels)
		},
		"serverLabels": func(path string, raw json.RawMessage) {
			nc.ServerLabels = p.stringMap(path, raw)
			p.checkServerLabels(path, nc.ServerLabels)
		},
		"taints":         func(path string, raw json.RawMessage) { nc.Taints = p.taints(path, raw) },
		"imagesForArch":  func(path string, raw json.RawMessage) { nc.ImagesForArch = p.images(path, raw) },
		"subnetIPRange":  func(path string, raw json.RawMessage) { nc.SubnetIPRange = p.prefix(path, raw) },
		"firewalls":      func(path string, raw json.RawMessage) { nc.Firewalls = p.firewalls(path, raw) },
		"placementGroup": p.placementGroup(&nc.PlacementGroup),
		"publicIPv4":     p.optionalBool(&nc.PublicIPv4),
		"publicIPv6":     p.optionalBool(&nc.PublicIPv6),
		"spreadGroups": func(path string, raw json.RawMessage) {
			nc.SpreadGroups, _ = p.boolean(path, raw)
		},
		"offerings":   func(path string, raw json.RawMessage) { nc.Offerings = p.offerings(path, raw) },
		"maxPods":     p.maxPods(&nc.MaxPods),
		"reserved":    func(path string, raw json.RawMessage) { nc.Reserved = p.reserved(path, raw) },
		"autoscaling": func(path string, raw json.RawMessage) { nc.Autoscaling = p.autoscaling(path, raw) },
		"replace":     func(path string, raw json.RawMessage) { nc.Replace = p.replace(path, raw) },
	})
	if nc.SpreadGroups && nc.PlacementGroup != "" {
		p.addf(path+".spreadGroups", "true together with placementGroup %q: a pool's servers go either into the one group it names or into groups hcloudscale creates for it", nc.PlacementGroup)
	}
	if nc.MinSize != nil && nc.MaxSize != nil && *nc.MinSize > *nc.MaxSize {
		p.addf(path+".minSize", "%d is greater than maxSize %d", *nc.MinSize, *nc.MaxSize)
	}
	return nc
}

// optionalBool decodes a boolean into a new *bool at dst.
func (p *problems) optionalBool(dst **bool) func(string, json.RawMessage) {
	return func(path string, raw json.RawMessage) {
		if b, ok := p.boolean(path, raw); ok {
			*dst = &b
		}
	}
}

// size decodes a pool size, not negative, into dst.
func (p *problems) size(dst **int) func(string, json.RawMessage) {
	return func(path string, raw json.RawMessage) {
		if n, ok := p.integer(path, raw); ok {
			if n < 0 {
				p.addf(path, "%d is negative", n)
				return
			}
			*dst = &n
		}
	}
}

// offering decodes a server type or location, lower-cased, into dst.
func (p *problems) offering(dst *string) func(string, json.RawMessage) {
	return func(path string, raw json.RawMessage) {
		s, ok := p.str(path, raw)
		switch {
		case !ok:
		case s == "":
			p.addf(path, "empty")
		case checkNoSpace(s) != nil:
			p.addf(path, "%q %w", s, checkNoSpace(s))
		default:
			*dst = strings.ToLower(s)
		}
	}
}

// cloudInit decodes a cloud-init into dst, refusing invalid UTF-8 as
// written (encoding/json would turn it into U+FFFD).
func (p *problems) cloudInit(dst *Secret) func(string, json.RawMessage) {
	return func(path string, raw json.RawMessage) {
		if err := checkUTF8(bytes.TrimPrefix(raw, []byte{'"'})); err != nil {
			p.add(path, err)
			return
		}
		if s, ok := p.str(path, raw); ok {
			*dst = Secret(s)
		}
	}
}

// taints decodes and checks an array of taints.
func (p *problems) taints(path string, raw json.RawMessage) []corev1.Taint {
	var taints []corev1.Taint
	p.array(path, raw, func(path string, raw json.RawMessage) {
		var t corev1.Taint
		p.fields(path, raw, map[string]func(string, json.RawMessage){
			"key":    func(path string, raw json.RawMessage) { t.Key, _ = p.str(path, raw) },
			"value":  func(path string, raw json.RawMessage) { t.Value, _ = p.str(path, raw) },
			"effect": func(path string, raw json.RawMessage) { s, _ := p.str(path, raw); t.Effect = corev1.TaintEffect(s) },
			// Upstream decoded corev1.Taint, so a taint copied from a
			// node may carry timeAdded; it means nothing here.
			"timeAdded": func(path string, _ json.RawMessage) { p.warnf(path, "ignored: a template taint has no time") },
		})
		taints = append(taints, t)
	})
	p.checkTaints(path, taints)
	return taints
}

// firewalls decodes an array of firewall names or IDs.
func (p *problems) firewalls(path string, raw json.RawMessage) []string {
	var out []string
	p.array(path, raw, func(path string, raw json.RawMessage) {
		if s, ok := p.str(path, raw); ok {
			if err := checkReference(s); err != nil {
				p.add(path, err)
				return
			}
			out = append(out, s)
		}
	})
	return out
}

// placementGroup decodes a placement group's name or ID into dst.
func (p *problems) placementGroup(dst *string) func(string, json.RawMessage) {
	return func(path string, raw json.RawMessage) {
		if s, ok := p.str(path, raw); ok && s != "" {
			p.add(path, checkReference(s))
			*dst = s
		}
	}
}

// maxPods decodes a node's pod capacity into dst.
func (p *problems) maxPods(dst *int) func(string, json.RawMessage) {
	return func(path string, raw json.RawMessage) {
		if n, ok := p.integer(path, raw); ok {
			if n < MinMaxPods || n > MaxMaxPods {
				p.addf(path, "%d is out of range %d..%d", n, MinMaxPods, MaxMaxPods)
				return
			}
			*dst = n
		}
	}
}

// declaresPools reports whether any entry declares a pool.
func (cc *ClusterConfig) declaresPools() bool {
	for _, nc := range cc.NodeConfigs {
		if nc.declaresPool() {
			return true
		}
	}
	return false
}

// declaresPool reports whether the entry has any of the --nodes fields.
func (nc *NodeConfig) declaresPool() bool {
	return nc.MinSize != nil || nc.MaxSize != nil || nc.ServerType != "" || nc.Location != ""
}

// images decodes an imagesForArch object. An empty spec is unset: upstream
// picked the newest snapshot of the project for it, which is rarely meant.
func (p *problems) images(path string, raw json.RawMessage) *ImagesForArch {
	im := &ImagesForArch{}
	spec := func(dst *ImageSpec) func(string, json.RawMessage) {
		return func(path string, raw json.RawMessage) {
			s, ok := p.str(path, raw)
			switch {
			case !ok:
			case s == "":
				p.warnf(path, "empty image spec is treated as unset (upstream chose the newest snapshot of the project)")
			default:
				if err := CheckImageSpec(ImageSpec(s)); err != nil {
					p.add(path, err)
					return
				}
				*dst = ImageSpec(s)
			}
		}
	}
	p.fields(path, raw, map[string]func(string, json.RawMessage){
		string(ArchAMD64): spec(&im.AMD64),
		string(ArchARM64): spec(&im.ARM64),
	})
	return im
}

// prefix decodes a CIDR. Hetzner networks are IPv4 only, and a range must
// be written as its network address so that containment is unambiguous.
func (p *problems) prefix(path string, raw json.RawMessage) netip.Prefix {
	s, ok := p.str(path, raw)
	if !ok {
		return netip.Prefix{}
	}
	pfx, err := ParseSubnet(s)
	if err != nil {
		p.add(path, err)
		return netip.Prefix{}
	}
	return pfx
}

// ParseSubnet parses an IPv4 CIDR such as "10.0.1.0/24" and requires it to
// be the network address of the range.
func ParseSubnet(s string) (netip.Prefix, error) {
	pfx, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not a CIDR such as 10.0.1.0/24", s)
	}
	if !pfx.Addr().Is4() {
		return netip.Prefix{}, fmt.Errorf("%q is not an IPv4 range; Hetzner networks are IPv4", s)
	}
	if m := pfx.Masked(); m != pfx {
		return netip.Prefix{}, fmt.Errorf("%q has host bits set, did you mean %q", s, m)
	}
	return pfx, nil
}

func (p *problems) reserved(path string, raw json.RawMessage) Reserved {
	var r Reserved
	q := func(dst *resource.Quantity) func(string, json.RawMessage) {
		return func(path string, raw json.RawMessage) {
			s, ok := p.str(path, raw)
			if !ok {
				return
			}
			v, err := resource.ParseQuantity(s)
			switch {
			case err != nil:
				p.addf(path, "%q is not a quantity such as 100m, 512Mi or 1Gi", s)
			case v.Sign() < 0:
				p.addf(path, "%q is negative", s)
			default:
				*dst = v
			}
		}
	}
	p.fields(path, raw, map[string]func(string, json.RawMessage){
		"cpu":               q(&r.CPU),
		"memory":            q(&r.Memory),
		"ephemeral-storage": q(&r.EphemeralStorage),
	})
	return r
}

func (p *problems) autoscaling(path string, raw json.RawMessage) *Autoscaling {
	a := &Autoscaling{}
	threshold := func(dst **float64) func(string, json.RawMessage) {
		return func(path string, raw json.RawMessage) {
			if f, ok := p.number(path, raw); ok {
				if f < 0 || f > 1 {
					p.addf(path, "%v is out of range 0..1", f)
					return
				}
				*dst = &f
			}
		}
	}
	duration := func(dst **time.Duration) func(string, json.RawMessage) {
		return func(path string, raw json.RawMessage) {
			s, ok := p.str(path, raw)
			if !ok {
				return
			}
			d, err := time.ParseDuration(s)
			switch {
			case err != nil:
				p.addf(path, "%q is not a duration such as 10m or 1h30m", s)
			case d <= 0:
				p.addf(path, "%q is not positive", s)
			default:
				*dst = &d
			}
		}
	}
	flag := func(dst **bool) func(string, json.RawMessage) {
		return func(path string, raw json.RawMessage) {
			if b, ok := p.boolean(path, raw); ok {
				*dst = &b
			}
		}
	}
	p.fields(path, raw, map[string]func(string, json.RawMessage){
		"scaleDownUtilizationThreshold":    threshold(&a.ScaleDownUtilizationThreshold),
		"scaleDownGpuUtilizationThreshold": threshold(&a.ScaleDownGPUUtilizationThreshold),
		"scaleDownUnneededTime":            duration(&a.ScaleDownUnneededTime),
		"scaleDownUnreadyTime":             duration(&a.ScaleDownUnreadyTime),
		"maxNodeProvisionTime":             duration(&a.MaxNodeProvisionTime),
		"maxNodeStartupTime":               duration(&a.MaxNodeStartupTime),
		"zeroOrMaxNodeScaling":             flag(&a.ZeroOrMaxNodeScaling),
		"allowNonAtomicScaleUpToMax":       flag(&a.AllowNonAtomicScaleUpToMax),
		"ignoreDaemonSetsUtilization":      flag(&a.IgnoreDaemonSetsUtilization),
	})
	if *a == (Autoscaling{}) {
		return nil
	}
	return a
}

// checkCloudInit enforces Hetzner's user-data limit without quoting the
// content, which holds join tokens.
func checkCloudInit(s string) error {
	if err := checkUTF8([]byte(s)); err != nil {
		return err
	}
	if len(s) > MaxCloudInitBytes {
		return fmt.Errorf("cloud-init is %d bytes, Hetzner accepts at most %d", len(s), MaxCloudInitBytes)
	}
	return nil
}

// checkUTF8 rejects user data that is not valid UTF-8, naming the offset
// of the first bad byte but no content. The API carries user data as a
// JSON string, which holds text only: any other byte would reach the
// server as U+FFFD, and cloud-init would not run it.
func checkUTF8(b []byte) error {
	if utf8.Valid(b) {
		return nil
	}
	if len(b) >= 2 && b[0] == 0x1f && b[1] == 0x8b {
		return errors.New("cloud-init is gzip-compressed; Hetzner's API carries user data as text (a JSON string), so send it uncompressed")
	}
	bad := 0
	for bad < len(b) {
		r, size := utf8.DecodeRune(b[bad:])
		if r == utf8.RuneError && size == 1 {
			break
		}
		bad += size
	}
	return fmt.Errorf("cloud-init is not valid UTF-8 (byte %d); Hetzner's API carries user data as text (a JSON string), so binary or compressed user data cannot be sent", bad)
}

// checkReference checks an ID or name of a firewall, placement group, SSH
// key or network: the API would resolve a blank or padded one to nothing.
func checkReference(s string) error {
	switch {
	case s == "":
		return fmt.Errorf("empty ID or name")
	case len(s) > 255:
		return fmt.Errorf("%d characters long, at most 255 allowed", len(s))
	}
	for _, r := range s {
		if r < ' ' || r == 0x7f {
			return fmt.Errorf("%q contains control characters", s)
		}
	}
	if s[0] == ' ' || s[len(s)-1] == ' ' {
		return fmt.Errorf("%q has leading or trailing spaces", s)
	}
	return nil
}

// CheckClusterName checks a cluster name, which becomes the value of the
// LabelCluster server label.
func CheckClusterName(name string) error {
	if name == "" {
		return fmt.Errorf("empty cluster name")
	}
	if err := checkKubeLabelValue(name); err != nil {
		return fmt.Errorf("cluster name must be a valid Hetzner label value: %w", err)
	}
	return nil
}
