package nodecache_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/hcloudscale/hcloudscale/nodecache"
)

// TestCacheKeepsWhatIsRead: the cached Node has the metadata (without
// managedFields), the spec and the conditions of the Node in the API,
// and nothing else of its status; an update reaches the cache.
func TestCacheKeepsWhatIsRead(t *testing.T) {
	node := bigNode(7)
	client := fake.NewClientset(node)
	ctx, cancel := context.WithCancel(t.Context())
	c := nodecache.New(client, 0)
	c.Start(ctx)
	defer c.Shutdown()
	defer cancel()
	if !cache.WaitForCacheSync(ctx.Done(), c.Informer().HasSynced) {
		t.Fatal("not synced")
	}
	got, err := c.Lister().Get(node.Name)
	if err != nil {
		t.Fatal(err)
	}
	want := node.DeepCopy()
	want.ManagedFields = nil
	want.Status = corev1.NodeStatus{Conditions: node.Status.Conditions}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("cached Node (-want +got):\n%s", diff)
	}

	updated := node.DeepCopy()
	updated.Labels["example.com/updated"] = "yes"
	if _, err := client.CoreV1().Nodes().Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		n, err := c.Lister().Get(node.Name)
		if err == nil && n.Labels["example.com/updated"] == "yes" {
			if len(n.Status.Images) != 0 || n.ManagedFields != nil {
				t.Errorf("the updated Node is cached with images %d, managedFields %d", len(n.Status.Images), len(n.ManagedFields))
			}
			break
		}
		select {
		case <-t.Context().Done():
			t.Fatal("the update never reached the cache")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestStripTombstone: a deleted Node whose last state is unknown is
// stripped inside its tombstone, and other objects pass unchanged.
func TestStripTombstone(t *testing.T) {
	node := bigNode(1)
	out, err := nodecache.Strip(cache.DeletedFinalStateUnknown{Key: node.Name, Obj: node})
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := out.(cache.DeletedFinalStateUnknown); !ok || len(d.Obj.(*corev1.Node).Status.Images) != 0 {
		t.Errorf("Strip(tombstone) = %#v; want the tombstone with its Node stripped", out)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	if out, _ := nodecache.Strip(pod); out != pod {
		t.Errorf("Strip(pod) = %v; want the pod unchanged", out)
	}
}
