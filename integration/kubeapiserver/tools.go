//go:build tools

// Package kubeapiserver pins the control plane that the integration tests
// build and run: kube-apiserver, and kube-controller-manager and
// kube-scheduler for the tests that need Deployments rolled out and
// PodDisruptionBudgets enforced. It is a module of its own so that the
// project's go.mod never requires k8s.io/kubernetes.
package kubeapiserver

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
