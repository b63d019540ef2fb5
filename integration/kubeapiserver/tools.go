//go:build tools

// Package kubeapiserver pins the kube-apiserver that the integration tests build and run.
// It is a module of its own so that the project's go.mod never requires k8s.io/kubernetes.
package kubeapiserver

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
