#!/usr/bin/env bash
# Prints which of this host's quirks a kind cluster must work around, one
# word per line (nothing on a normal host, where kind runs as upstream made it):
#   no-sys-resource  CAP_SYS_RESOURCE is not in the capability bounding set:
#                    dockerd needs scripts/kind/runc-without-sys-resource as
#                    its default runtime for `docker run --privileged`
#   cgroup-v1        the host mounts cgroup v1: the kubelet (1.35) needs
#                    failCgroupV1: false
#   oom-score-adj    a negative oom_score_adj is refused: containerd needs
#                    restrict_oom_score_adj = true
set -euo pipefail
bnd="$(awk '/^CapBnd:/ {print $2}' /proc/self/status)"
# CAP_SYS_RESOURCE is capability 24.
if (( (16#$bnd >> 24 & 1) == 0 )); then echo no-sys-resource; fi
if [[ ! -f /sys/fs/cgroup/cgroup.controllers ]]; then echo cgroup-v1; fi
# Lowering one's own oom_score_adj below 0 needs CAP_SYS_RESOURCE; a subshell
# tries it on itself (nothing else changes).
if ! (echo -1 >/proc/self/oom_score_adj) 2>/dev/null; then echo oom-score-adj; fi
