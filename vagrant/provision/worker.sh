#!/usr/bin/env bash
# k8s-2 and k8s-3 of the nodefall lab: join the cluster with the lab's bootstrap token. Token
# discovery without CA pinning, so nothing has to be copied from k8s-1 (no synced folder). The
# kubelet configuration, graceful node shutdown included, comes from the cluster (kubeadm's
# kubelet-config ConfigMap). Run by `vagrant up` / `vagrant provision` as root after common.sh;
# safe to run again.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
source /tmp/nodefall-provision-lib.sh

require_env NODEFALL_NODE_NAME NODEFALL_CONTROL_PLANE_IP NODEFALL_BOOTSTRAP_TOKEN NODEFALL_GNS_PERIOD_SECONDS

api="https://${NODEFALL_CONTROL_PLANE_IP}:6443"

if [[ -f /etc/kubernetes/kubelet.conf ]]; then
  log "already joined (/etc/kubernetes/kubelet.conf exists)"
else
  # vagrant-libvirt brings machines up in parallel: k8s-1 may still be installing. /readyz is
  # readable without credentials on a kubeadm cluster. The bound is generous on purpose.
  wait_limit=1800
  deadline=$((SECONDS + wait_limit))
  until curl -ksf --max-time 5 "$api/readyz" >/dev/null; do
    ((SECONDS < deadline)) || die "the API server at $api did not answer /readyz within ${wait_limit}s: is k8s-1 up and provisioned?"
    sleep 5
  done
  log "API server $api is ready; joining"
  kubeadm join "${NODEFALL_CONTROL_PLANE_IP}:6443" \
    --token "$NODEFALL_BOOTSTRAP_TOKEN" \
    --discovery-token-unsafe-skip-ca-verification \
    --node-name "$NODEFALL_NODE_NAME"
fi

# --- graceful node shutdown is live on this node -----------------------------------------------
require_kubelet_inhibitor 60

log "worker ready"
