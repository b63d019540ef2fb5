package externalgrpc

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

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
	c := newCodec(nil)
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

// testGroups is the pool lookup of the options-request tests: "plain" sets
// no options, "opts" does.
func testGroups(id []byte) (string, bool, bool) {
	switch string(id) {
	case "plain":
		return "plain", true, false
	case "opts":
		return "opts", true, true
	}
	return "", false, false
}

// optionsSeeds are NodeGroupGetOptions requests as the autoscaler's client
// sends them, and malformed ones.
func optionsSeeds(t testing.TB) [][]byte {
	defaults := &protos.NodeGroupAutoscalingOptions{
		ScaleDownUtilizationThreshold: 0.5, ScaleDownGpuUtilizationThreshold: 0.5,
		ScaleDownUnneededTime:     &protos.NodeGroupAutoscalingOptions_LegacyDuration{Duration: int64(10 * time.Minute)},
		ScaleDownUnreadyTime:      &protos.NodeGroupAutoscalingOptions_LegacyDuration{Duration: int64(20 * time.Minute)},
		MaxNodeProvisionTime:      &protos.NodeGroupAutoscalingOptions_LegacyDuration{Duration: int64(15 * time.Minute)},
		ScaleDownUnneededDuration: durationpb.New(10 * time.Minute), ScaleDownUnreadyDuration: durationpb.New(20 * time.Minute),
		MaxNodeProvisionDuration: durationpb.New(15 * time.Minute), IgnoreDaemonSetsUtilization: true,
	}
	var out [][]byte
	for _, id := range []string{"plain", "opts", "unknown", ""} {
		b, err := proto.Marshal(&protos.NodeGroupAutoscalingOptionsRequest{Id: id, Defaults: defaults})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	plain := out[0]
	// The id twice (the last wins), invalid UTF-8 in the id, a truncated
	// request, and a duration inside the defaults cut short: a message
	// within a message within the request.
	twice := protowire.AppendString(protowire.AppendTag(append([]byte{}, out[1]...), fieldOptionsID, protowire.BytesType), "plain")
	badID := protowire.AppendBytes(protowire.AppendTag(nil, fieldOptionsID, protowire.BytesType), []byte{'p', 0xff})
	badDuration := protowire.AppendBytes(protowire.AppendTag(nil, 8, protowire.BytesType), []byte{0x08, 0x80})
	deep := protowire.AppendString(protowire.AppendTag(nil, fieldOptionsID, protowire.BytesType), "plain")
	deep = protowire.AppendBytes(protowire.AppendTag(deep, fieldOptionsDefaults, protowire.BytesType), badDuration)
	return append(out, twice, badID, plain[:len(plain)-2], deep)
}

// checkOptionsRequest compares the codec with proto.Unmarshal on b: the
// same errors, the same id, and the defaults wherever the pool reads them.
func checkOptionsRequest(t *testing.T, b []byte) {
	c := newCodec(testGroups)
	var want, got protos.NodeGroupAutoscalingOptionsRequest
	werr := proto.Unmarshal(b, &want)
	gerr := unmarshal(c, b, &got)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("proto error %v, codec error %v", werr, gerr)
	}
	if werr != nil {
		return
	}
	if got.GetId() != want.GetId() {
		t.Fatalf("id %q, proto's %q", got.GetId(), want.GetId())
	}
	if _, _, reads := testGroups([]byte(want.GetId())); reads {
		if !proto.Equal(&got, &want) {
			t.Fatalf("request %v, proto's %v", &got, &want)
		}
	} else if got.Defaults != nil {
		t.Fatalf("defaults decoded for pool %q, which reads none", want.GetId())
	}
}

func TestDecodeOptionsRequestSeeds(t *testing.T) {
	seeds := optionsSeeds(t)
	for i, b := range seeds {
		t.Run(fmt.Sprint(i), func(t *testing.T) { checkOptionsRequest(t, b) })
	}
	// The seeds exercise what they claim to.
	c := newCodec(testGroups)
	for i, want := range map[int]string{0: "", 1: "", 4: "", 5: "invalid UTF-8", 6: "proto", 7: "proto"} {
		var req protos.NodeGroupAutoscalingOptionsRequest
		err := unmarshal(c, seeds[i], &req)
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("seed %d: error %v, want %q", i, err, want)
		}
	}
	var plain, opts, twice protos.NodeGroupAutoscalingOptionsRequest
	_ = unmarshal(c, seeds[0], &plain)
	_ = unmarshal(c, seeds[1], &opts)
	_ = unmarshal(c, seeds[4], &twice)
	if plain.Defaults != nil || opts.GetDefaults().GetMaxNodeProvisionDuration().AsDuration() != 15*time.Minute || twice.GetId() != "plain" {
		t.Errorf("plain %v, opts %v, twice %v: want no defaults, the defaults, id plain", &plain, &opts, &twice)
	}
}

// FuzzDecodeOptionsRequest checks the options fast path against
// proto.Unmarshal: the same requests fail, the same ids come out, and the
// defaults come out in full for the pool that reads them.
func FuzzDecodeOptionsRequest(f *testing.F) {
	for _, b := range optionsSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(checkOptionsRequest)
}

// olderAPIMessage is a message of the older protobuf API, which the proto
// codec takes.
type olderAPIMessage struct {
	Value string `protobuf:"bytes,1,opt,name=value,proto3"`
}

func (m *olderAPIMessage) Reset()         { *m = olderAPIMessage{} }
func (m *olderAPIMessage) String() string { return m.Value }
func (*olderAPIMessage) ProtoMessage()    {}

// The codec takes what the proto codec takes, older API included.
func TestCodecOlderAPIMessages(t *testing.T) {
	c := newCodec(nil)
	data, err := c.Marshal(&olderAPIMessage{Value: "hi"})
	if want := string(protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "hi")); err != nil || string(data.Materialize()) != want {
		t.Fatalf("Marshal = %q, %v; want %q", data.Materialize(), err, want)
	}
	var got olderAPIMessage
	if err := c.Unmarshal(data, &got); err != nil || got.Value != "hi" {
		t.Errorf("Unmarshal = %q, %v; want hi", got.Value, err)
	}
}

// unmarshal decodes b into v with c, as gRPC hands c a message.
func unmarshal(c codec, b []byte, v any) error {
	return c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, v)
}
