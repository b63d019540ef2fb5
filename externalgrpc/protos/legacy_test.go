package protos_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hcloudscale/hcloudscale/externalgrpc/protos"
)

// Cluster Autoscaler 1.34 and older encoded the legacy fields with the
// Kubernetes API types themselves (core/v1 Node and Pod, meta/v1 Time and
// Duration). These tests play that old client with the very same types, on
// raw wire bytes, so they would catch a legacy field declared with the
// wrong number or an incompatible type.

// appendEmbedded appends a length-delimited field the way an encoder of the
// old messages writes an embedded message.
func appendEmbedded(b []byte, num protowire.Number, payload []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, payload)
}

// embedded returns the payload of every length-delimited field of a
// marshalled message, as the old client's decoder sees them.
func embedded(t *testing.T, b []byte) map[protowire.Number][]byte {
	t.Helper()
	out := make(map[protowire.Number][]byte)
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			t.Fatalf("consume tag: %v", protowire.ParseError(n))
		}
		b = b[n:]
		if typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				t.Fatalf("consume field %d: %v", num, protowire.ParseError(n))
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			t.Fatalf("consume field %d: %v", num, protowire.ParseError(n))
		}
		out[num] = v
		b = b[n:]
	}
	return out
}

func marshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatalf("proto.Marshal(%T): %v", m, err)
	}
	return b
}

func TestTemplateNodeReadableByEveryClient(t *testing.T) {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   "template-pool1",
			Labels: map[string]string{"node.kubernetes.io/instance-type": "cx22"},
		},
		Spec: corev1.NodeSpec{
			ProviderID: "hcloud://1",
			Taints:     []corev1.Taint{{Key: "dedicated", Value: "ci", Effect: corev1.TaintEffectNoSchedule}},
		},
	}
	nodeBytes, err := node.Marshal()
	if err != nil {
		t.Fatalf("Node.Marshal: %v", err)
	}
	wire := marshal(t, &protos.NodeGroupTemplateNodeInfoResponse{NodeInfo: nodeBytes, NodeBytes: nodeBytes})
	fields := embedded(t, wire)

	tests := []struct {
		name  string
		field protowire.Number
	}{
		{"CA 1.34.1 and older read the embedded nodeInfo", 1},
		{"CA 1.34.2 and newer read nodeBytes", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			payload, ok := fields[tt.field]
			if !ok {
				t.Fatalf("field %d missing from the response", tt.field)
			}
			var got corev1.Node
			if err := got.Unmarshal(payload); err != nil {
				t.Fatalf("Node.Unmarshal(field %d): %v", tt.field, err)
			}
			if diff := cmp.Diff(node, &got); diff != "" {
				t.Errorf("node from field %d mismatch (-want +got):\n%s", tt.field, diff)
			}
		})
	}
}

// The legacy durations count nanoseconds; read as google.protobuf.Duration
// they would be off by a factor of 10^9.
func TestLegacyDurationsAreKubernetesDurations(t *testing.T) {
	type legacy = protos.NodeGroupAutoscalingOptions_LegacyDuration

	t.Run("server to old client", func(t *testing.T) {
		opts := &protos.NodeGroupAutoscalingOptions{
			ScaleDownUnneededTime: &legacy{Duration: int64(10 * time.Minute)},
			ScaleDownUnreadyTime:  &legacy{Duration: int64(20*time.Minute + time.Nanosecond)},
			// Zero must still be sent: old clients dereference the field.
			MaxNodeProvisionTime: &legacy{},
		}
		fields := embedded(t, marshal(t, opts))
		tests := []struct {
			name  string
			field protowire.Number
			want  time.Duration
		}{
			{"scaleDownUnneededTime", 3, 10 * time.Minute},
			{"scaleDownUnreadyTime", 4, 20*time.Minute + time.Nanosecond},
			{"MaxNodeProvisionTime zero but present", 5, 0},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				payload, ok := fields[tt.field]
				if !ok {
					t.Fatalf("field %d missing; an old client would dereference nil", tt.field)
				}
				var got metav1.Duration
				if err := got.Unmarshal(payload); err != nil {
					t.Fatalf("metav1.Duration.Unmarshal(field %d): %v", tt.field, err)
				}
				if got.Duration != tt.want {
					t.Errorf("field %d = %v; want %v", tt.field, got.Duration, tt.want)
				}
			})
		}
	})

	t.Run("old client to server", func(t *testing.T) {
		want := []time.Duration{10 * time.Minute, 20 * time.Minute, 15 * time.Minute}
		var wire []byte
		for i, d := range want {
			payload, err := (&metav1.Duration{Duration: d}).Marshal()
			if err != nil {
				t.Fatalf("metav1.Duration.Marshal: %v", err)
			}
			wire = appendEmbedded(wire, protowire.Number(3+i), payload)
		}
		var opts protos.NodeGroupAutoscalingOptions
		if err := proto.Unmarshal(wire, &opts); err != nil {
			t.Fatalf("proto.Unmarshal: %v", err)
		}
		got := []time.Duration{
			time.Duration(opts.GetScaleDownUnneededTime().GetDuration()),
			time.Duration(opts.GetScaleDownUnreadyTime().GetDuration()),
			time.Duration(opts.GetMaxNodeProvisionTime().GetDuration()),
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("durations 3 to 5 mismatch (-want +got):\n%s", diff)
		}
	})
}

func TestOldPricingRequestsDecode(t *testing.T) {
	// Whole seconds: metav1.Time deliberately encodes no nanoseconds.
	start := time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)
	end := start.Add(time.Hour)
	timeBytes := func(t *testing.T, at time.Time) []byte {
		t.Helper()
		b, err := (&metav1.Time{Time: at}).Marshal()
		if err != nil {
			t.Fatalf("metav1.Time.Marshal: %v", err)
		}
		return b
	}
	type period struct{ Start, End time.Time }
	want := period{start, end}

	t.Run("PricingNodePrice", func(t *testing.T) {
		wire := appendEmbedded(nil, 1, marshal(t, &protos.ExternalGrpcNode{Name: "node-1", ProviderID: "hcloud://1"}))
		wire = appendEmbedded(wire, 2, timeBytes(t, start))
		wire = appendEmbedded(wire, 3, timeBytes(t, end))
		var req protos.PricingNodePriceRequest
		if err := proto.Unmarshal(wire, &req); err != nil {
			t.Fatalf("proto.Unmarshal: %v", err)
		}
		if got := req.GetNode().GetProviderID(); got != "hcloud://1" {
			t.Errorf("node.providerID = %q; want %q", got, "hcloud://1")
		}
		got := period{req.GetStartTime().AsTime(), req.GetEndTime().AsTime()}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("legacy period mismatch (-want +got):\n%s", diff)
		}
	})

	t.Run("PricingPodPrice", func(t *testing.T) {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "default"},
			Spec:       corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
		}
		podBytes, err := pod.Marshal()
		if err != nil {
			t.Fatalf("Pod.Marshal: %v", err)
		}
		wire := appendEmbedded(nil, 1, podBytes)
		wire = appendEmbedded(wire, 2, timeBytes(t, start))
		wire = appendEmbedded(wire, 3, timeBytes(t, end))
		var req protos.PricingPodPriceRequest
		if err := proto.Unmarshal(wire, &req); err != nil {
			t.Fatalf("proto.Unmarshal: %v", err)
		}
		var gotPod corev1.Pod
		if err := gotPod.Unmarshal(req.GetPod()); err != nil {
			t.Fatalf("Pod.Unmarshal(pod): %v", err)
		}
		if diff := cmp.Diff(pod, &gotPod); diff != "" {
			t.Errorf("legacy pod mismatch (-want +got):\n%s", diff)
		}
		got := period{req.GetStartTime().AsTime(), req.GetEndTime().AsTime()}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("legacy period mismatch (-want +got):\n%s", diff)
		}
	})
}
