#!/bin/sh
# Regenerates externalgrpc.pb.go and externalgrpc_grpc.pb.go from
# hcloudscale/externalgrpc/v1/externalgrpc.proto. Run it through
# `go generate ./externalgrpc/...` from the module root.
#
# Pinned generators (the committed files were produced with exactly these):
#   protoc               libprotoc 3.21.12, Debian 12 package protobuf-compiler 3.21.12-3+deb12u1
#                        (apt-get install protobuf-compiler)
#   protoc-gen-go        google.golang.org/protobuf, the version required in go.mod (v1.36.12)
#   protoc-gen-go-grpc   google.golang.org/grpc/cmd/protoc-gen-go-grpc v1.5.1
# The plugins are built from the Go module proxy into a temporary directory,
# so nothing is installed globally. Another protoc release yields the same
# wire format but a different version header, so it is refused.
set -eu

want_protoc='libprotoc 3.21.12'
grpc_plugin_version=v1.5.1

cd "$(dirname "$0")"

got_protoc=$(protoc --version 2>/dev/null) || {
	echo "generate.sh: protoc not found; install Debian's protobuf-compiler ($want_protoc)" >&2
	exit 1
}
if [ "$got_protoc" != "$want_protoc" ]; then
	echo "generate.sh: protoc --version is \"$got_protoc\", want \"$want_protoc\"" >&2
	exit 1
fi

bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
trap 'exit 1' INT TERM

# Without a version suffix, go install resolves the package through go.mod,
# so protoc-gen-go always matches the runtime the generated code links with.
GOBIN=$bin go install google.golang.org/protobuf/cmd/protoc-gen-go
GOBIN=$bin go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$grpc_plugin_version"

# The include root makes the registered file path
# hcloudscale/externalgrpc/v1/externalgrpc.proto; module= strips the
# go_package prefix so the output lands in this directory.
protoc \
	--proto_path=. \
	--plugin=protoc-gen-go="$bin/protoc-gen-go" \
	--plugin=protoc-gen-go-grpc="$bin/protoc-gen-go-grpc" \
	--go_out=. \
	--go_opt=module=github.com/hcloudscale/hcloudscale/externalgrpc/protos \
	--go-grpc_out=. \
	--go-grpc_opt=module=github.com/hcloudscale/hcloudscale/externalgrpc/protos \
	hcloudscale/externalgrpc/v1/externalgrpc.proto
