# syntax=docker/dockerfile:1

# Base images are pinned by digest (the tag says which release it is), so
# that a build uses the bytes that were reviewed; `crane digest IMAGE:TAG`
# gives the digest to move to, and `go test ./deploy/` checks every FROM
# is pinned.

# Build stage: a static sweepgate binary.
FROM golang:1.26@sha256:3aff6657219a4d9c14e27fb1d8976c49c29fddb70ba835014f477e1c70636647 AS build
WORKDIR /src

# Modules first, so that a source change does not download them again.
COPY go.mod go.sum ./
RUN go mod download

COPY . .
# The version and commit `sweepgate version` and sweepgate_build_info
# report, and the labels below; `make image` passes both (VERSION from the
# VERSION file, REVISION from `git rev-parse HEAD`). Without VERSION the
# binary reports the VERSION file it embeds and the version label is empty;
# the build context has no .git, so without REVISION the binary reports no
# commit and the revision label is empty.
ARG VERSION=
ARG REVISION=
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION} -X main.revision=${REVISION}" -o /out/sweepgate ./cmd/sweepgate

# The embedded etcd needs a writable data directory owned by the runtime user
# (distroless "nonroot" is uid/gid 65532).
RUN mkdir -p /out/data/etcd

# Runtime stage: no shell, no package manager, a non-root user.
FROM gcr.io/distroless/static-debian12:nonroot@sha256:afa5c872c891853ca7fcf1f12c3edb23f7eeef36189728842dd51042ff57f7ab
ARG VERSION=
ARG REVISION=
# The OCI image spec's pre-defined annotations, as labels: what the image
# is, which release and commit it was built from, and its licence.
LABEL org.opencontainers.image.title="sweepgate" \
      org.opencontainers.image.description="S3 gateway that records multipart uploads and content-addressed references in etcd and reclaims abandoned uploads and unreferenced blobs without deleting live work" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /out/sweepgate /sweepgate
COPY --from=build --chown=65532:65532 /out/data /data
USER 65532:65532

# Listen on all interfaces inside the container (the binary's admin default is
# loopback only), and keep etcd's data on the volume. The backend
# (SWEEPGATE_BACKEND_ENDPOINT, SWEEPGATE_BACKEND_ACCESS_KEY,
# SWEEPGATE_BACKEND_SECRET_KEY) is given at `docker run`.
ENV SWEEPGATE_LISTEN=:9000 \
    SWEEPGATE_ADMIN_LISTEN=:9001 \
    SWEEPGATE_ETCD_EMBEDDED_DATA_DIR=/data/etcd
VOLUME ["/data"]

# 9000: S3 API; 9001: admin (/metrics, /healthz, /readyz).
EXPOSE 9000 9001
# Liveness of the admin listener (SWEEPGATE_ADMIN_LISTEN above); the image
# has no shell or curl, so the binary probes itself.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
    CMD ["/sweepgate", "healthcheck", "--timeout", "4s"]
ENTRYPOINT ["/sweepgate"]
CMD ["serve"]
