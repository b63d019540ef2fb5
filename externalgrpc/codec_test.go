package externalgrpc

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/externalgrpc/protos"
)

// forNodeSeeds are requests as the autoscaler's client sends them.
func forNodeSeeds(t testing.TB) [][]byte {
	reqs := []*protos.NodeGroupForNodeRequest{
		{},
		{Node: &protos.ExternalGrpcNode{ProviderID: "hcloud://42", Name: "workers-1"}},
		{Node: &protos.ExternalGrpcNode{
			ProviderID: "hcloud://42", Name: "workers-1",
			Labels: map[string]string{
				config.LabelNodeGroup: "workers", "kubernetes.io/hostname": "workers-1",
				hcloudscale.LabelTemplateNode: "true", "topology.kubernetes.io/zone": "fsn1-dc14",
			},
			Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0"},
		}},
		{Node: &protos.ExternalGrpcNode{Name: "template-node-for-workers-123", Labels: map[string]string{hcloudscale.LabelTemplateNode: "true"}}},
	}
	var out [][]byte
	for _, r := range reqs {
		b, err := proto.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	// The node field twice: proto merges the two occurrences.
	out = append(out, append(append([]byte{}, out[1]...), out[3]...))
	// A label value with invalid UTF-8, and a truncated message.
	bad := protowire.AppendTag(nil, fieldNodeLabels, protowire.BytesType)
	entry := protowire.AppendTag(nil, fieldMapEntryKey, protowire.BytesType)
	entry = protowire.AppendString(entry, config.LabelNodeGroup)
	entry = protowire.AppendTag(entry, fieldMapEntryValue, protowire.BytesType)
	entry = protowire.AppendBytes(entry, []byte{0xff})
	bad = protowire.AppendBytes(bad, entry)
	out = append(out, protowire.AppendBytes(protowire.AppendTag(nil, fieldRequestNode, protowire.BytesType), bad))
	out = append(out, out[2][:len(out[2])-3])
	return out
}

// kept is what the server reads of a request: the fields decodeForNode
// must get right.
func kept(r *protos.NodeGroupForNodeRequest) map[string]string {
	n := r.GetNode()
	m := map[string]string{"providerID": n.GetProviderID(), "name": n.GetName(), "hasNode": ""}
	if n != nil {
		m["hasNode"] = "yes"
	}
	for _, l := range nodeLabels {
		if v, ok := n.GetLabels()[l]; ok {
			m["label "+l] = v
		}
	}
	return m
}

// FuzzDecodeForNode checks the fast path against proto.Unmarshal: whatever
// proto accepts, decodeForNode accepts with the same provider ID, name and
// kept labels; whatever decodeForNode rejects, proto rejects too.
func FuzzDecodeForNode(f *testing.F) {
	for _, b := range forNodeSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var want, got protos.NodeGroupForNodeRequest
		werr := proto.Unmarshal(b, &want)
		gerr := decodeForNode(b, &got)
		switch {
		case werr == nil && gerr != nil:
			t.Fatalf("decodeForNode rejected what proto accepts: %v", gerr)
		case werr != nil && gerr == nil:
			// Lenient only in what it skips: the labels it drops and the
			// annotations. What it keeps must still match.
		case werr != nil:
			return
		}
		if werr == nil {
			if diff := cmp.Diff(kept(&want), kept(&got)); diff != "" {
				t.Fatalf("decodeForNode differs from proto.Unmarshal (-proto +fast):\n%s", diff)
			}
		}
	})
}

func TestDecodeForNodeSeeds(t *testing.T) {
	seeds := forNodeSeeds(t)
	for i, b := range seeds {
		var want, got protos.NodeGroupForNodeRequest
		werr := proto.Unmarshal(b, &want)
		gerr := decodeForNode(b, &got)
		if (werr == nil) != (gerr == nil) {
			t.Errorf("seed %d: proto error %v, fast error %v", i, werr, gerr)
			continue
		}
		if diff := cmp.Diff(kept(&want), kept(&got)); werr == nil && diff != "" {
			t.Errorf("seed %d (-proto +fast):\n%s", i, diff)
		}
	}
	// The seeds exercise what they claim to.
	var merged protos.NodeGroupForNodeRequest
	if err := decodeForNode(seeds[4], &merged); err != nil || merged.GetNode().GetProviderID() != "hcloud://42" ||
		merged.GetNode().GetName() != "template-node-for-workers-123" || merged.GetNode().GetLabels()[hcloudscale.LabelTemplateNode] != "true" {
		t.Errorf("merged node = %v, %v; want provider ID of the first, name and label of the second", &merged, err)
	}
	var full protos.NodeGroupForNodeRequest
	if err := decodeForNode(seeds[2], &full); err != nil || len(full.GetNode().GetLabels()) != 2 || full.GetNode().GetAnnotations() != nil {
		t.Errorf("decoded node = %v, %v; want the two kept labels and no annotations", &full, err)
	}
}

// TestCodecUnmarshal checks that the codec takes the fast path only for
// NodeGroupForNodeRequest and hands everything else to the proto codec.
func TestCodecUnmarshal(t *testing.T) {
	c := newCodec()
	b := forNodeSeeds(t)[2]
	var req protos.NodeGroupForNodeRequest
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, &req); err != nil {
		t.Fatal(err)
	}
	if req.GetNode().GetAnnotations() != nil || len(req.GetNode().GetLabels()) != 2 {
		t.Errorf("NodeGroupForNodeRequest decoded in full: %v", &req)
	}
	nodes := &protos.NodeGroupDeleteNodesRequest{Id: "workers", Nodes: []*protos.ExternalGrpcNode{{Name: "a", Labels: map[string]string{"x": "y"}}}}
	db, err := proto.Marshal(nodes)
	if err != nil {
		t.Fatal(err)
	}
	var got protos.NodeGroupDeleteNodesRequest
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(db)}, &got); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(nodes, &got) {
		t.Errorf("DeleteNodes request = %v; want %v", &got, nodes)
	}
	if c.Name() != "proto" {
		t.Errorf("codec name = %q; want proto (the content subtype clients send)", c.Name())
	}
}
