package config

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
)

// reservedLabelPrefix is reserved by Hetzner for its own server labels.
const reservedLabelPrefix = "hetzner.cloud"

// LabelReplaces is a server label that hcloudscale puts, next to
// LabelNodeGroup, LabelCluster and LabelUserDataHash (see types.go), on a
// replacement server that the node lifecycle creates surge-first
// (pool.Pool.Surge): its value is the decimal ID of the server it
// replaces, which the lifecycle drains and deletes once the replacement's
// node has joined. It is not one of a pool's configured server labels, so
// it is no label drift.
const LabelReplaces = "hcloudscale.io/replaces"

// sortedKeys returns the keys of m in order, so that errors come out stable.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func joinMsgs(msgs []string) error {
	if len(msgs) == 0 {
		return nil
	}
	return errors.New(strings.Join(msgs, "; "))
}

// checkKubeLabelKey checks Kubernetes label key syntax: an optional DNS
// subdomain prefix and "/", then a name of at most 63 characters.
func checkKubeLabelKey(key string) error {
	if err := joinMsgs(content.IsLabelKey(key)); err != nil {
		return fmt.Errorf("key %q is not a valid label key: %w", key, err)
	}
	return nil
}

func checkKubeLabelValue(value string) error {
	if err := joinMsgs(content.IsLabelValue(value)); err != nil {
		return fmt.Errorf("value %q is not a valid label value: %w", value, err)
	}
	return nil
}

// checkKubeLabels checks the Kubernetes labels of a pool's template node.
func (p *problems) checkKubeLabels(path string, labels map[string]string) {
	for _, k := range sortedKeys(labels) {
		kp := childPath(path, k)
		p.add(kp, checkKubeLabelKey(k))
		p.add(kp, checkKubeLabelValue(labels[k]))
	}
}

// CheckServerLabel checks a Hetzner server label. Hetzner's key and value
// syntax matches Kubernetes' (a key is an optional DNS subdomain prefix
// plus a name of at most 63 characters, alphanumeric at both ends with '-',
// '_' and '.' inside; a value is empty or the same as a name), and the
// hetzner.cloud/ prefix is reserved. LabelNodeGroup, LabelCluster,
// LabelUserDataHash and LabelReplaces are set by hcloudscale and cannot be
// given.
func CheckServerLabel(key, value string) error {
	var errs []error
	if err := joinMsgs(content.IsLabelKey(key)); err != nil {
		errs = append(errs, fmt.Errorf("key %q is not a valid Hetzner label key: %w", key, err))
	} else if prefix, _, ok := strings.Cut(key, "/"); ok && (prefix == reservedLabelPrefix || strings.HasSuffix(prefix, "."+reservedLabelPrefix)) {
		errs = append(errs, fmt.Errorf("key %q uses the prefix %s/, which Hetzner reserves", key, reservedLabelPrefix))
	}
	if key == LabelNodeGroup || key == LabelCluster || key == LabelUserDataHash || key == LabelReplaces || key == LabelOffering {
		errs = append(errs, fmt.Errorf("key %q is set by hcloudscale and cannot be given", key))
	}
	if err := joinMsgs(content.IsLabelValue(value)); err != nil {
		errs = append(errs, fmt.Errorf("value %q is not a valid Hetzner label value: %w", value, err))
	}
	return errors.Join(errs...)
}

func (p *problems) checkServerLabels(path string, labels map[string]string) {
	for _, k := range sortedKeys(labels) {
		p.add(childPath(path, k), CheckServerLabel(k, labels[k]))
	}
}

// taintEffects are the effects Kubernetes accepts on a node taint.
var taintEffects = []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}

// checkTaints checks key and value syntax, the effect, and that no two
// taints share key and effect (the API server rejects such a node).
func (p *problems) checkTaints(path string, taints []corev1.Taint) {
	type keyEffect struct {
		key    string
		effect corev1.TaintEffect
	}
	first := map[keyEffect]int{}
	for i, t := range taints {
		tp := indexPath(path, i)
		if t.Key == "" {
			p.addf(tp+".key", "missing")
		} else {
			p.add(tp+".key", checkKubeLabelKey(t.Key))
		}
		p.add(tp+".value", checkKubeLabelValue(t.Value))
		if err := checkTaintEffect(t.Effect); err != nil {
			p.add(tp+".effect", err)
			continue
		}
		ke := keyEffect{t.Key, t.Effect}
		if j, dup := first[ke]; dup {
			p.addf(tp, "duplicates taint [%d] (same key %q and effect %s)", j, t.Key, t.Effect)
			continue
		}
		first[ke] = i
	}
}

func checkTaintEffect(e corev1.TaintEffect) error {
	for _, ok := range taintEffects {
		if e == ok {
			return nil
		}
	}
	names := make([]string, len(taintEffects))
	for i, e := range taintEffects {
		names[i] = string(e)
	}
	if e == "" {
		return fmt.Errorf("missing, want one of %s", strings.Join(names, ", "))
	}
	for _, ok := range taintEffects {
		if strings.EqualFold(string(e), string(ok)) {
			return fmt.Errorf("%q is not one of %s, did you mean %q", e, strings.Join(names, ", "), ok)
		}
	}
	return fmt.Errorf("%q is not one of %s", e, strings.Join(names, ", "))
}
