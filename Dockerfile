# nodefall's container image: the nodefall binary and the Docker CLI its kind
# backend drives kind's node containers with, on a small Debian bookworm (the
# glibc the binary is built against). docs/container-image.md says how to run
# it against a kind cluster and what it cannot do.
#
#   docker build --build-arg BASE=debian:bookworm-slim \
#     [--build-arg VERSION=0.1.0 --build-arg REVISION=<git commit> \
#      --build-arg CREATED=<RFC 3339 time> --build-arg SOURCE=<repository URL>] \
#     -f Dockerfile CTX
#
# CTX holds two executable files and nothing else is read from it:
#   nodefall  the binary (linked against bookworm's glibc, or static)
#   docker    a Docker CLI (Docker's static build, or bookworm's)
# BASE is any Debian bookworm root. With one that has no CA certificates
# (debian:bookworm-slim) the RUN below installs Debian's, from Debian's
# mirror; with one that has them it changes nothing and reaches no network:
# scripts/image/build.sh builds such a base with mmdebstrap, with no registry.
# Builds with the legacy builder (DOCKER_BUILDKIT=0: no BuildKit-only syntax)
# and with BuildKit.
ARG BASE=debian:bookworm-slim
FROM ${BASE}

# First, and not varying with the build arguments: every intermediate image
# of a build carries it (scripts/image/build.sh removes a failed build's
# leftovers by it).
LABEL org.opencontainers.image.title="nodefall"

# /state is XDG_STATE_HOME, where nodefall keeps its run journals
# (state/nodefall/runs, what `nodefall recover` reads): mount the host's there
# to keep them. /cache is XDG_CACHE_HOME (the simulated cluster's binaries).
# Both writable by any user (`docker run --user`), like /tmp.
RUN if [ ! -s /etc/ssl/certs/ca-certificates.crt ]; then \
      apt-get update -qq \
      && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends ca-certificates \
      && rm -rf /var/lib/apt/lists/*; \
    fi \
    && mkdir -p /state /cache /work \
    && chmod 1777 /state /cache

COPY docker /usr/local/bin/docker
COPY nodefall /usr/local/bin/nodefall

ENV XDG_STATE_HOME=/state \
    XDG_CACHE_HOME=/cache

WORKDIR /work
ENTRYPOINT ["/usr/local/bin/nodefall"]
CMD ["--help"]

ARG VERSION=unknown
ARG REVISION=unknown
ARG CREATED=
ARG SOURCE=
LABEL org.opencontainers.image.description="Test how a Kubernetes cluster survives node failures: inject a fault, watch recovery, time it, report. Runs kind scenarios against the host's Docker engine." \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}"
