package cloudinit

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// data is the dot of a template. Its methods are the template's fields;
// text/template calls them when an action names them.
type data struct{ v Values }

// Pool is the pool's name.
func (d *data) Pool() string { return d.v.Pool }

// ServerName is the server's name, which the kubelet takes as node name.
func (d *data) ServerName() string { return d.v.Server }

// Cluster is the cluster name, empty when none is configured.
func (d *data) Cluster() string { return d.v.Cluster }

// Location is the server's location, such as fsn1.
func (d *data) Location() string { return d.v.Location }

// ServerType is the server type, such as cpx31.
func (d *data) ServerType() string { return d.v.ServerType }

// Arch is the server type's architecture: amd64 or arm64.
func (d *data) Arch() string { return d.v.Arch }

// Labels are all of the pool's labels.
func (d *data) Labels() map[string]string { return maps.Clone(d.v.Labels) }

// Taints are the pool's taints.
func (d *data) Taints() []corev1.Taint { return slices.Clone(d.v.Taints) }

// NodeLabels is the value of the kubelet's --node-labels: the labels
// the kubelet may set ([KubeletMaySet]) as k=v, comma-separated, sorted.
func (d *data) NodeLabels() string {
	var parts []string
	for _, k := range d.kubeletLabels() {
		parts = append(parts, k+"="+d.v.Labels[k])
	}
	return strings.Join(parts, ",")
}

// NodeTaints is the value of the kubelet's --register-with-taints:
// k=v:Effect (k:Effect without a value), comma-separated, in the pool's
// order.
func (d *data) NodeTaints() string {
	parts := make([]string, len(d.v.Taints))
	for i, t := range d.v.Taints {
		parts[i] = taintString(t)
	}
	return strings.Join(parts, ",")
}

// KubeletFlags are --node-labels and --register-with-taints, each left
// out when empty.
func (d *data) KubeletFlags() string {
	var flags []string
	if s := d.NodeLabels(); s != "" {
		flags = append(flags, "--node-labels="+s)
	}
	if s := d.NodeTaints(); s != "" {
		flags = append(flags, "--register-with-taints="+s)
	}
	return strings.Join(flags, " ")
}

// K3sFlags are k3s's repeated --node-label and --node-taint flags.
func (d *data) K3sFlags() string {
	var flags []string
	for _, k := range d.kubeletLabels() {
		flags = append(flags, "--node-label="+k+"="+d.v.Labels[k])
	}
	for _, t := range d.v.Taints {
		flags = append(flags, "--node-taint="+taintString(t))
	}
	return strings.Join(flags, " ")
}

// KubeadmKubeletExtraArgs is the kubeletExtraArgs list of a kubeadm
// v1beta4 nodeRegistration, as a YAML flow sequence (JSON), with the
// node-labels argument; [] when the kubelet sets no label.
func (d *data) KubeadmKubeletExtraArgs() string {
	type arg struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	}
	args := []arg{}
	if s := d.NodeLabels(); s != "" {
		args = append(args, arg{"node-labels", s})
	}
	return mustJSON(args)
}

// KubeadmTaints is the taints list of a kubeadm nodeRegistration, as a
// YAML flow sequence (JSON); [] for a pool without taints, which keeps
// kubeadm from adding a default taint.
func (d *data) KubeadmTaints() string {
	type taint struct {
		Key    string `json:"key"`
		Value  string `json:"value,omitempty"`
		Effect string `json:"effect"`
	}
	out := make([]taint, len(d.v.Taints))
	for i, t := range d.v.Taints {
		out[i] = taint{t.Key, t.Value, string(t.Effect)}
	}
	return mustJSON(out)
}

// TalosNodeLabels is Talos's machine.nodeLabels, the labels the kubelet
// may set, as a YAML flow mapping (JSON).
func (d *data) TalosNodeLabels() string {
	m := map[string]string{}
	for _, k := range d.kubeletLabels() {
		m[k] = d.v.Labels[k]
	}
	return mustJSON(m)
}

// TalosNodeTaints is Talos's machine.nodeTaints, key to value:Effect (to
// Effect without a value), as a YAML flow mapping (JSON). Talos keys taints
// by key only, so two taints with one key are an error.
func (d *data) TalosNodeTaints() (string, error) {
	m := map[string]string{}
	for _, t := range d.v.Taints {
		if _, dup := m[t.Key]; dup {
			return "", fmt.Errorf("two taints with key %s cannot be written as Talos nodeTaints, which holds one per key", t.Key)
		}
		v := string(t.Effect)
		if t.Value != "" {
			v = t.Value + ":" + v
		}
		m[t.Key] = v
	}
	return mustJSON(m), nil
}

// kubeletLabels returns the keys of the labels the kubelet may set, sorted.
func (d *data) kubeletLabels() []string {
	var keys []string
	for _, k := range slices.Sorted(maps.Keys(d.v.Labels)) {
		if KubeletMaySet(k) {
			keys = append(keys, k)
		}
	}
	return keys
}

func taintString(t corev1.Taint) string {
	if t.Value == "" {
		return t.Key + ":" + string(t.Effect)
	}
	return t.Key + "=" + t.Value + ":" + string(t.Effect)
}

// mustJSON marshals values that cannot fail to marshal (strings, maps and
// slices of them). encoding/json sorts map keys.
func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
