# syntax=docker/dockerfile:1
#
# The hcloudscale command (serve, validate, status, replace, scale, cleanup)
# as a static binary on an image that holds nothing else but CA
# certificates; the binary carries the time-zone database of maintenance
# windows itself.
#
# Build for the platforms of your cluster (cax servers are arm64) and push:
#
#   docker buildx build --platform linux/amd64,linux/arm64 \
#     --build-arg VERSION=$(git describe --tags --always --dirty) \
#     --build-arg COMMIT=$(git rev-parse HEAD) \
#     -t registry.example.com/hcloudscale:v0.1.0 --push .
#
# The builder stage runs on the build machine's own platform and
# cross-compiles (CGO_ENABLED=0 needs no target toolchain), so a
# multi-platform build does not emulate the other architecture.

ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
WORKDIR /src
# Dependencies first: their layer is reused while only our code changes.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=""
ARG COMMIT=""
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X github.com/hcloudscale/hcloudscale.Version=${VERSION} -X main.commit=${COMMIT}" \
      -o /out/hcloudscale ./cmd/hcloudscale

# The final image: the binary and CA certificates (for api.hetzner.cloud
# and the Kubernetes API). No shell, no package manager, nothing written
# at run time, so it runs with readOnlyRootFilesystem: true.
FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/hcloudscale /hcloudscale
# A non-root user by number (65532, as distroless images use), since there
# is no /etc/passwd; the manifests set the same IDs with runAsNonRoot.
USER 65532:65532
# externalgrpc (--listen), plaintext health (--health-listen), metrics.
EXPOSE 8086 8087 8085
ENTRYPOINT ["/hcloudscale"]
CMD ["serve", "--help"]
