// Package pricetest holds pods and the CPU and memory the scheduler counts
// for each, so that the two autoscaler adapters (externalgrpc and the
// in-tree adapter) can check that they price the same pod alike.
//
// The counts are worked out by hand from the scheduler's rule, not read
// from either adapter: a pod asks for the larger of its containers' sum
// and each init container's own request; a sidecar (an init container
// that restarts always) adds to the containers and to every init
// container after it; pod-level requests, where set, replace the
// containers' for CPU and memory; the pod overhead is added last.
package pricetest

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/hcloudscale/hcloudscale"
)

// Pod is a pod and the requests the scheduler counts for it.
type Pod struct {
	Name string // what the pod shows
	Pod  *corev1.Pod
	// Cores and GiB are the CPU and memory requests the scheduler counts.
	Cores, GiB float64
}

// Price is what the pod costs at rate for d:
// hours × (cores × rate per core + GiB × rate per GiB).
func (p Pod) Price(rate hcloudscale.PodRate, d time.Duration) float64 {
	return d.Hours() * (p.Cores*rate.PerCore + p.GiB*rate.PerGiB)
}

// Pods returns a fresh table of pods, one per way the scheduler counts
// requests.
func Pods() []Pod {
	always := corev1.ContainerRestartPolicyAlways
	sidecar := func(c corev1.Container) corev1.Container {
		c.RestartPolicy = &always
		return c
	}
	return []Pod{
		{"no requests", pod(corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}}}), 0, 0},
		{"containers add up", pod(corev1.PodSpec{Containers: []corev1.Container{
			container("500m", "512Mi"), container("1500m", "1536Mi")}}), 2, 2},
		{"a larger init container counts instead, per resource", pod(corev1.PodSpec{
			InitContainers: []corev1.Container{container("4", "1Gi")},
			Containers:     []corev1.Container{container("1", "2Gi")}}), 4, 2},
		{"a sidecar adds to the containers", pod(corev1.PodSpec{
			InitContainers: []corev1.Container{sidecar(container("250m", "256Mi"))},
			Containers:     []corev1.Container{container("1", "1Gi")}}), 1.25, 1.25},
		{"a sidecar adds to a later init container", pod(corev1.PodSpec{
			InitContainers: []corev1.Container{sidecar(container("1", "")), container("1500m", "")},
			Containers:     []corev1.Container{container("1", "")}}), 2.5, 0},
		{"pod-level requests replace the containers'", pod(corev1.PodSpec{
			Resources:  &corev1.ResourceRequirements{Requests: requests("2", "4Gi")},
			Containers: []corev1.Container{container("500m", "1Gi"), container("500m", "1Gi")}}), 2, 4},
		{"a pod-level CPU request leaves memory to the containers", pod(corev1.PodSpec{
			Resources:  &corev1.ResourceRequirements{Requests: requests("3", "")},
			Containers: []corev1.Container{container("1", "1Gi")}}), 3, 1},
		{"overhead adds", pod(corev1.PodSpec{
			Overhead:   requests("250m", "128Mi"),
			Containers: []corev1.Container{container("1", "1Gi")}}), 1.25, 1.125},
		{"overhead adds to pod-level requests", pod(corev1.PodSpec{
			Overhead:   requests("250m", "512Mi"),
			Resources:  &corev1.ResourceRequirements{Requests: requests("2", "2Gi")},
			Containers: []corev1.Container{container("1", "1Gi")}}), 2.25, 2.5},
	}
}

// PodWith is a pod of one container that requests cpu and memory
// (quantities; "" for none).
func PodWith(cpu, memory string) *corev1.Pod {
	return pod(corev1.PodSpec{Containers: []corev1.Container{container(cpu, memory)}})
}

func pod(spec corev1.PodSpec) *corev1.Pod {
	p := &corev1.Pod{Spec: spec}
	p.Namespace, p.Name = "default", "priced"
	return p
}

func container(cpu, memory string) corev1.Container {
	return corev1.Container{Name: "c", Resources: corev1.ResourceRequirements{Requests: requests(cpu, memory)}}
}

// requests builds a resource list of the non-empty quantities.
func requests(cpu, memory string) corev1.ResourceList {
	l := corev1.ResourceList{}
	if cpu != "" {
		l[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if memory != "" {
		l[corev1.ResourceMemory] = resource.MustParse(memory)
	}
	return l
}
