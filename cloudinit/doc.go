// Package cloudinit renders a pool's cloud-init user data per server: the
// templates a pool opts into with cloudInitTemplate in the cluster config
// (see package config), rendered when a server is created.
//
// # Syntax
//
// A template is Go text/template with the delimiters <% and %> instead of
// {{ and }}, so that cloud-init's own Jinja templating ("## template:
// jinja", {{ v1.instance_id }}, {% if %}) and shell ${...} and $(...)
// pass through as plain text. Trim markers work as in text/template:
// "<%- " and " -%>". To print a literal "<%", write <% "<%" %>.
//
// Templates are opt-in: a cloudInit that is not declared a template is
// sent byte for byte, whatever it contains.
//
// # Fields
//
// The dot of a template has these fields:
//
//   - .Pool, .ServerName, .Cluster (empty without a cluster name),
//     .Location, .ServerType, .Arch (amd64 or arm64).
//   - .Labels: all of the pool's labels, a map; .Taints: the pool's
//     taints, a list of {Key, Value, Effect}.
//   - .NodeLabels: the value of the kubelet's --node-labels, k=v,k=v
//     sorted by key, with the labels the kubelet may set ([KubeletMaySet]).
//   - .NodeTaints: the value of the kubelet's --register-with-taints,
//     k=v:Effect (k:Effect without a value), in the pool's order.
//   - .KubeletFlags: "--node-labels=... --register-with-taints=...", each
//     left out when empty.
//   - .K3sFlags: "--node-label=k=v ... --node-taint=k=v:Effect ...", for
//     k3s agent.
//   - .KubeadmKubeletExtraArgs: a kubeadm v1beta4 nodeRegistration's
//     kubeletExtraArgs with node-labels, as a one-line YAML flow sequence:
//     [{"name":"node-labels","value":"k=v"}] ([] without labels).
//   - .KubeadmTaints: a kubeadm nodeRegistration's taints as a YAML flow
//     sequence: [{"key":"k","value":"v","effect":"NoSchedule"}] ([] for a
//     pool without taints).
//   - .TalosNodeLabels, .TalosNodeTaints: Talos's machine.nodeLabels and
//     machine.nodeTaints as YAML flow mappings: {"k":"v"} and
//     {"k":"v:NoSchedule"}. Talos keys taints by key, so two taints with
//     one key are an error.
//
// The flow-style helpers print one line, so they fit any indentation:
// "taints: <% .KubeadmTaints %>". Label keys and values, taint keys,
// values and effects consist of characters that need no quoting in shell.
//
// Labels the kubelet may not set (node-role.kubernetes.io/worker, anything
// under node-restriction.kubernetes.io, other kubernetes.io and k8s.io
// labels) are left out of every helper but .Labels: a kubelet started with
// one of them refuses to start. The node labeller (package nodelabel) adds
// them once the node has registered.
//
// # Errors
//
// [Parse] reports an action that does not parse, an unknown function and
// an unknown field of the dot, with its line number. [Template.Render]
// reports what only rendering finds (such as two taints for Talos). Their
// messages quote template actions, never the text around them, which
// holds join tokens. An action ends at the first %> after its <%, even
// inside a quoted string: a quote ('...', "..." or `...`) that is still
// open there is an error with the quote's line and column, such as
//
//	line 2, column 16: a character constant (') opened in this action runs past its %>; close it before the %>
package cloudinit
