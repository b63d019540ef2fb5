// Package protos holds the Go code generated from
// hcloudscale/externalgrpc/v1/externalgrpc.proto: the messages and the
// CloudProvider service of the Cluster Autoscaler's externalgrpc protocol.
//
// # Compatibility
//
// The proto package (clusterautoscaler.cloudprovider.v1.externalgrpc), the
// service, RPC and message names and every field number match the
// autoscaler's own cloudprovider/externalgrpc/protos/externalgrpc.proto, so
// the method paths and the wire format are the same. The registered file
// path and the Go import path differ. Because the fully qualified message
// names are the same, protobuf-go panics at start-up if this package and the
// autoscaler's generated protos package are linked into one binary: never
// import both.
//
// # Legacy fields
//
// The fields upstream removed in November 2025 are declared with
// wire-identical types, so the server can still answer Cluster Autoscaler
// 1.34 and older:
//
//   - [NodeGroupTemplateNodeInfoResponse].NodeInfo (field 1) carries the
//     same (*v1.Node).Marshal() bytes as NodeBytes.
//   - [NodeGroupAutoscalingOptions] fields 3 to 5 use
//     [NodeGroupAutoscalingOptions_LegacyDuration], which counts
//     nanoseconds like Kubernetes' metav1.Duration.
//   - [PricingNodePriceRequest] and [PricingPodPriceRequest] fields 1 to 3
//     read what older clients send: the pod as (*v1.Pod).Marshal() bytes and
//     the times as [timestamppb.Timestamp].
//
// # Regenerating
//
// The generated files are committed. To regenerate them, install Debian's
// protobuf-compiler (protoc 3.21.12) and run go generate ./externalgrpc/...;
// generate.sh pins the plugins and builds them in a temporary directory.
package protos

//go:generate sh generate.sh
