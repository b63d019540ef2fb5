// Package apiserver runs a real kube-apiserver, backed by etcd, on
// 127.0.0.1 for tests: RBAC, static admin credentials, service accounts
// with tokens from the TokenRequest API, and an audit log of every request.
//
//	s := apiserver.Start(t)
//	s.Apply(t, manifests)                       // as admin, server-side apply
//	kubeconfig := s.ServiceAccountKubeconfig(t, "kube-system", "hcloudscale")
//	// run the code under test with KUBECONFIG=kubeconfig, then:
//	for _, e := range s.AuditEvents(t) { ... } // who did what, with which status
//
// # Binaries
//
// kube-apiserver is the binary named by $KUBE_APISERVER, else the one in
// the user cache directory ($XDG_CACHE_HOME, or ~/.cache), at
// hcloudscale/kube-apiserver. When that is missing (or was built from
// another pin of ../kubeapiserver/go.mod), Start builds it with `go build`
// from the module in ../kubeapiserver, which pins k8s.io/kubernetes; a
// file lock keeps parallel test binaries from building it twice. A cold
// build takes 10 to 15 minutes on two cores: give `go test` a -timeout
// that covers it, or build it first.
//
// etcd is looked up in $PATH (Debian's etcd-server package provides it).
// Without it Start skips the test, unless $HCLOUDSCALE_INTEGRATION is 1,
// as in CI, where it fails it.
//
// # The server
//
// etcd and kube-apiserver listen on free ports of 127.0.0.1 and keep
// their data, certificates, logs and audit log in a temporary directory.
// Authorization is RBAC only. The ServiceAccount admission plugin is off
// (no controller manager runs to create tokens or default service
// accounts) and no endpoint reconciler runs. The audit policy records
// every request at the Metadata level, and Leases at the RequestResponse
// level, so that who held a Lease when can be read back; the log is
// written before each answer (blocking mode), so a request that has been
// answered is in it.
//
// Start gives a test a server of its own, stopped when the test ends.
// Start-up takes a few seconds; tests that can share one call [Shared],
// with [Main] in TestMain.
package apiserver
