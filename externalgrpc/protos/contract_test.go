package protos_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/hcloudscale/hcloudscale/externalgrpc/protos"
)

// The upstream contract, from the autoscaler's
// cloudprovider/externalgrpc/protos/externalgrpc.proto. Changing anything
// here breaks the Cluster Autoscaler's client: only ever add what upstream
// adds.
const (
	protoPackage = "clusterautoscaler.cloudprovider.v1.externalgrpc"
	serviceName  = protoPackage + ".CloudProvider"
	upstreamPath = "cloudprovider/externalgrpc/protos/externalgrpc.proto"
	ourPath      = "hcloudscale/externalgrpc/v1/externalgrpc.proto"
	ourGoPackage = "github.com/hcloudscale/hcloudscale/externalgrpc/protos"
)

// field is one field as the wire sees it. Type is the proto type: a scalar
// kind, "map<K, V>", or a message or enum name (relative to protoPackage for
// ours), prefixed with "repeated " for lists.
type field struct {
	Number protoreflect.FieldNumber
	Name   string
	Type   string
}

// wantMessages lists every message, nested ones as Outer.Inner; map entries
// appear as map<K, V> field types instead. Fields marked legacy were removed
// upstream in November 2025 and are declared with wire-identical types so
// that Cluster Autoscaler 1.34 and older keep working.
var wantMessages = map[string][]field{
	"NodeGroup": {
		{1, "id", "string"},
		{2, "minSize", "int32"},
		{3, "maxSize", "int32"},
		{4, "debug", "string"},
	},
	"ExternalGrpcNode": {
		{1, "providerID", "string"},
		{2, "name", "string"},
		{3, "labels", "map<string, string>"},
		{4, "annotations", "map<string, string>"},
	},
	"NodeGroupsRequest":  nil,
	"NodeGroupsResponse": {{1, "nodeGroups", "repeated NodeGroup"}},
	"NodeGroupForNodeRequest": {
		{1, "node", "ExternalGrpcNode"},
	},
	"NodeGroupForNodeResponse": {
		{1, "nodeGroup", "NodeGroup"},
	},
	"PricingNodePriceRequest": {
		{1, "node", "ExternalGrpcNode"},
		{2, "startTime", "google.protobuf.Timestamp"}, // legacy meta.v1.Time
		{3, "endTime", "google.protobuf.Timestamp"},   // legacy meta.v1.Time
		{4, "startTimestamp", "google.protobuf.Timestamp"},
		{5, "endTimestamp", "google.protobuf.Timestamp"},
	},
	"PricingNodePriceResponse": {{1, "price", "double"}},
	"PricingPodPriceRequest": {
		{1, "pod", "bytes"},                           // legacy core.v1.Pod
		{2, "startTime", "google.protobuf.Timestamp"}, // legacy meta.v1.Time
		{3, "endTime", "google.protobuf.Timestamp"},   // legacy meta.v1.Time
		{4, "pod_bytes", "bytes"},
		{5, "startTimestamp", "google.protobuf.Timestamp"},
		{6, "endTimestamp", "google.protobuf.Timestamp"},
	},
	"PricingPodPriceResponse":     {{1, "price", "double"}},
	"GPULabelRequest":             nil,
	"GPULabelResponse":            {{1, "label", "string"}},
	"GetAvailableGPUTypesRequest": nil,
	"GetAvailableGPUTypesResponse": {
		{1, "gpuTypes", "map<string, google.protobuf.Any>"},
	},
	"CleanupRequest":             nil,
	"CleanupResponse":            nil,
	"RefreshRequest":             nil,
	"RefreshResponse":            nil,
	"NodeGroupTargetSizeRequest": {{1, "id", "string"}},
	"NodeGroupTargetSizeResponse": {
		{1, "targetSize", "int32"},
	},
	"NodeGroupIncreaseSizeRequest": {
		{1, "delta", "int32"},
		{2, "id", "string"},
	},
	"NodeGroupIncreaseSizeResponse": nil,
	"NodeGroupDeleteNodesRequest": {
		{1, "nodes", "repeated ExternalGrpcNode"},
		{2, "id", "string"},
	},
	"NodeGroupDeleteNodesResponse": nil,
	"NodeGroupDecreaseTargetSizeRequest": {
		{1, "delta", "int32"},
		{2, "id", "string"},
	},
	"NodeGroupDecreaseTargetSizeResponse": nil,
	"NodeGroupNodesRequest":               {{1, "id", "string"}},
	"NodeGroupNodesResponse": {
		{1, "instances", "repeated Instance"},
	},
	"Instance": {
		{1, "id", "string"},
		{2, "status", "InstanceStatus"},
	},
	"InstanceStatus": {
		{1, "instanceState", "InstanceStatus.InstanceState"},
		{2, "errorInfo", "InstanceErrorInfo"},
	},
	"InstanceErrorInfo": {
		{1, "errorCode", "string"},
		{2, "errorMessage", "string"},
		{3, "instanceErrorClass", "int32"},
	},
	"NodeGroupTemplateNodeInfoRequest": {{1, "id", "string"}},
	"NodeGroupTemplateNodeInfoResponse": {
		{1, "nodeInfo", "bytes"}, // legacy core.v1.Node
		{2, "nodeBytes", "bytes"},
	},
	"NodeGroupAutoscalingOptions": {
		{1, "scaleDownUtilizationThreshold", "double"},
		{2, "scaleDownGpuUtilizationThreshold", "double"},
		{3, "scaleDownUnneededTime", "NodeGroupAutoscalingOptions.LegacyDuration"}, // legacy meta.v1.Duration
		{4, "scaleDownUnreadyTime", "NodeGroupAutoscalingOptions.LegacyDuration"},  // legacy meta.v1.Duration
		{5, "MaxNodeProvisionTime", "NodeGroupAutoscalingOptions.LegacyDuration"},  // legacy meta.v1.Duration
		{6, "zeroOrMaxNodeScaling", "bool"},
		{7, "ignoreDaemonSetsUtilization", "bool"},
		{8, "scaleDownUnneededDuration", "google.protobuf.Duration"},
		{9, "scaleDownUnreadyDuration", "google.protobuf.Duration"},
		{10, "MaxNodeProvisionDuration", "google.protobuf.Duration"},
	},
	// Ours, not upstream's: the shape of meta.v1.Duration (nanoseconds).
	"NodeGroupAutoscalingOptions.LegacyDuration": {
		{1, "duration", "int64"},
	},
	"NodeGroupAutoscalingOptionsRequest": {
		{1, "id", "string"},
		{2, "defaults", "NodeGroupAutoscalingOptions"},
	},
	"NodeGroupAutoscalingOptionsResponse": {
		{1, "nodeGroupAutoscalingOptions", "NodeGroupAutoscalingOptions"},
	},
}

type enumValue struct {
	Number protoreflect.EnumNumber
	Name   string
}

var wantEnums = map[string][]enumValue{
	"InstanceStatus.InstanceState": {
		{0, "unspecified"},
		{1, "instanceRunning"},
		{2, "instanceCreating"},
		{3, "instanceDeleting"},
	},
}

// method is one unary RPC; the Cluster Autoscaler calls each at
// /<serviceName>/<Name>.
type method struct {
	Name, Input, Output string
}

var wantMethods = []method{
	{"NodeGroups", "NodeGroupsRequest", "NodeGroupsResponse"},
	{"NodeGroupForNode", "NodeGroupForNodeRequest", "NodeGroupForNodeResponse"},
	{"PricingNodePrice", "PricingNodePriceRequest", "PricingNodePriceResponse"},
	{"PricingPodPrice", "PricingPodPriceRequest", "PricingPodPriceResponse"},
	{"GPULabel", "GPULabelRequest", "GPULabelResponse"},
	{"GetAvailableGPUTypes", "GetAvailableGPUTypesRequest", "GetAvailableGPUTypesResponse"},
	{"Cleanup", "CleanupRequest", "CleanupResponse"},
	{"Refresh", "RefreshRequest", "RefreshResponse"},
	{"NodeGroupTargetSize", "NodeGroupTargetSizeRequest", "NodeGroupTargetSizeResponse"},
	{"NodeGroupIncreaseSize", "NodeGroupIncreaseSizeRequest", "NodeGroupIncreaseSizeResponse"},
	{"NodeGroupDeleteNodes", "NodeGroupDeleteNodesRequest", "NodeGroupDeleteNodesResponse"},
	{"NodeGroupDecreaseTargetSize", "NodeGroupDecreaseTargetSizeRequest", "NodeGroupDecreaseTargetSizeResponse"},
	{"NodeGroupNodes", "NodeGroupNodesRequest", "NodeGroupNodesResponse"},
	{"NodeGroupTemplateNodeInfo", "NodeGroupTemplateNodeInfoRequest", "NodeGroupTemplateNodeInfoResponse"},
	{"NodeGroupGetOptions", "NodeGroupAutoscalingOptionsRequest", "NodeGroupAutoscalingOptionsResponse"},
}

var file = protos.File_hcloudscale_externalgrpc_v1_externalgrpc_proto

func TestFileIdentity(t *testing.T) {
	type identity struct {
		Path, Package, Syntax, GoPackage string
		Imports                          []string
	}
	want := identity{
		Path:      ourPath,
		Package:   protoPackage,
		Syntax:    "proto3",
		GoPackage: ourGoPackage,
		Imports: []string{
			"google/protobuf/any.proto",
			"google/protobuf/duration.proto",
			"google/protobuf/timestamp.proto",
		},
	}
	got := identity{
		Path:      file.Path(),
		Package:   string(file.Package()),
		Syntax:    file.Syntax().String(),
		GoPackage: file.Options().(*descriptorpb.FileOptions).GetGoPackage(),
	}
	for i := range file.Imports().Len() {
		got.Imports = append(got.Imports, file.Imports().Get(i).Path())
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("file descriptor mismatch (-want +got):\n%s", diff)
	}
	// protobuf-go panics when two linked files share a path, so ours must
	// never be the autoscaler's.
	if file.Path() == upstreamPath {
		t.Errorf("registered file path = %q; must differ from the autoscaler's", file.Path())
	}
}

func TestMessages(t *testing.T) {
	got := make(map[string][]field)
	var walk func(protoreflect.MessageDescriptors)
	walk = func(mds protoreflect.MessageDescriptors) {
		for i := range mds.Len() {
			md := mds.Get(i)
			if md.IsMapEntry() {
				continue // checked through the map<K, V> type of its field
			}
			fields := md.Fields()
			var fs []field
			for j := range fields.Len() {
				fd := fields.Get(j)
				fs = append(fs, field{fd.Number(), string(fd.Name()), typeName(fd)})
			}
			got[relative(md.FullName())] = fs
			walk(md.Messages())
		}
	}
	walk(file.Messages())
	if diff := cmp.Diff(wantMessages, got); diff != "" {
		t.Errorf("messages mismatch (-want +got):\n%s", diff)
	}
}

func TestEnums(t *testing.T) {
	got := make(map[string][]enumValue)
	addEnums := func(eds protoreflect.EnumDescriptors) {
		for i := range eds.Len() {
			ed := eds.Get(i)
			var vs []enumValue
			for j := range ed.Values().Len() {
				v := ed.Values().Get(j)
				vs = append(vs, enumValue{v.Number(), string(v.Name())})
			}
			got[relative(ed.FullName())] = vs
		}
	}
	addEnums(file.Enums())
	var walk func(protoreflect.MessageDescriptors)
	walk = func(mds protoreflect.MessageDescriptors) {
		for i := range mds.Len() {
			addEnums(mds.Get(i).Enums())
			walk(mds.Get(i).Messages())
		}
	}
	walk(file.Messages())
	if diff := cmp.Diff(wantEnums, got); diff != "" {
		t.Errorf("enums mismatch (-want +got):\n%s", diff)
	}
}

func TestService(t *testing.T) {
	services := file.Services()
	if services.Len() != 1 {
		t.Fatalf("file declares %d services; want 1", services.Len())
	}
	sd := services.Get(0)
	if got := string(sd.FullName()); got != serviceName {
		t.Errorf("service full name = %q; want %q", got, serviceName)
	}
	var got []method
	for i := range sd.Methods().Len() {
		md := sd.Methods().Get(i)
		if md.IsStreamingClient() || md.IsStreamingServer() {
			t.Errorf("method %s streams; every CloudProvider RPC is unary", md.Name())
		}
		got = append(got, method{string(md.Name()), relative(md.Input().FullName()), relative(md.Output().FullName())})
	}
	if diff := cmp.Diff(wantMethods, got); diff != "" {
		t.Errorf("methods mismatch (-want +got):\n%s", diff)
	}
}

// TestServiceDesc checks what a grpc.Server actually routes by: the service
// name and method names of the generated ServiceDesc.
func TestServiceDesc(t *testing.T) {
	desc := protos.CloudProvider_ServiceDesc
	if desc.ServiceName != serviceName {
		t.Errorf("CloudProvider_ServiceDesc.ServiceName = %q; want %q", desc.ServiceName, serviceName)
	}
	if len(desc.Streams) != 0 {
		t.Errorf("CloudProvider_ServiceDesc has %d streams; want 0", len(desc.Streams))
	}
	var want, got []string
	for _, m := range wantMethods {
		want = append(want, m.Name)
	}
	for _, m := range desc.Methods {
		got = append(got, m.MethodName)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ServiceDesc methods mismatch (-want +got):\n%s", diff)
	}
	// The paths the autoscaler's client dials.
	if got, want := protos.CloudProvider_NodeGroupTemplateNodeInfo_FullMethodName, "/"+serviceName+"/NodeGroupTemplateNodeInfo"; got != want {
		t.Errorf("CloudProvider_NodeGroupTemplateNodeInfo_FullMethodName = %q; want %q", got, want)
	}
}

func typeName(fd protoreflect.FieldDescriptor) string {
	if fd.IsMap() {
		return fmt.Sprintf("map<%s, %s>", typeName(fd.MapKey()), typeName(fd.MapValue()))
	}
	var name string
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		name = relative(fd.Message().FullName())
	case protoreflect.EnumKind:
		name = relative(fd.Enum().FullName())
	default:
		name = fd.Kind().String()
	}
	switch {
	case fd.IsList():
		return "repeated " + name
	case fd.HasOptionalKeyword():
		// proto3 "optional" changes presence and the generated Go type; upstream
		// uses it nowhere.
		return "optional " + name
	}
	return name
}

// relative drops our package prefix, leaving well-known types fully qualified.
func relative(name protoreflect.FullName) string {
	return strings.TrimPrefix(string(name), protoPackage+".")
}
