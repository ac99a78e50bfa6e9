#!/usr/bin/env bash
# k8s-1 of the nodefall lab: NFS server, kubeadm init (API server on the private address, the
# lab's bootstrap token, graceful node shutdown in the kubelet configuration every node gets),
# flannel on the private network, csi-driver-nfs and the `nfs-csi` StorageClass of seed 000.
# Run by `vagrant up` / `vagrant provision` as root after common.sh; safe to run again.
#
#   control-plane.sh --print-kubeadm-config   prints the kubeadm configuration and exits
#                                             (touches nothing; vagrant/check.sh uses it)
set -euo pipefail

# kubeadm_config KUBERNETES_VERSION: InitConfiguration, ClusterConfiguration and the
# KubeletConfiguration that kubeadm stores in the kubelet-config ConfigMap, so joining workers
# get the same graceful-shutdown periods (from vagrant/kubelet-graceful-shutdown.yaml).
kubeadm_config() {
  cat <<EOF
apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
bootstrapTokens:
  - token: "${NODEFALL_BOOTSTRAP_TOKEN}"
    description: "nodefall lab: the workers join with it (vagrant/Vagrantfile)"
    ttl: "0s"
    usages: [signing, authentication]
    groups: ["system:bootstrappers:kubeadm:default-node-token"]
localAPIEndpoint:
  advertiseAddress: "${NODEFALL_NODE_IP}"
  bindPort: 6443
nodeRegistration:
  name: "${NODEFALL_NODE_NAME}"
  criSocket: unix:///var/run/containerd/containerd.sock
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: "$1"
clusterName: nodefall-lab
controlPlaneEndpoint: "${NODEFALL_NODE_IP}:6443"
apiServer:
  certSANs: ["${NODEFALL_NODE_IP}", "${NODEFALL_NODE_NAME}"]
networking:
  podSubnet: "${NODEFALL_POD_CIDR}"
---
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: systemd
shutdownGracePeriod: "${NODEFALL_GNS_PERIOD_SECONDS}s"
shutdownGracePeriodCriticalPods: "${NODEFALL_GNS_CRITICAL_SECONDS}s"
EOF
}

if [[ "${1:-}" == "--print-kubeadm-config" ]]; then
  kubeadm_config "${NODEFALL_K8S_MINOR}.0"
  exit 0
fi

# shellcheck source-path=SCRIPTDIR source=lib.sh
source /tmp/nodefall-provision-lib.sh

require_env NODEFALL_NODE_NAME NODEFALL_NODE_IP NODEFALL_SUBNET_CIDR NODEFALL_BOOTSTRAP_TOKEN \
  NODEFALL_GNS_PERIOD_SECONDS NODEFALL_GNS_CRITICAL_SECONDS NODEFALL_POD_CIDR \
  NODEFALL_NFS_EXPORT NODEFALL_FLANNEL_VERSION NODEFALL_CSI_NFS_VERSION

work=/var/lib/nodefall
install -d -m 0700 "$work"
export KUBECONFIG=/etc/kubernetes/admin.conf

# --- NFS server: the export behind the nfs-csi StorageClass --------------------------------
apt_install nfs-kernel-server
install -d -m 0755 "$NODEFALL_NFS_EXPORT"
# no_root_squash: csi-driver-nfs creates and removes each volume's directory as root.
if write_if_changed 0644 /etc/exports.d/nodefall.exports <<EOF; then
${NODEFALL_NFS_EXPORT} ${NODEFALL_SUBNET_CIDR}(rw,sync,no_subtree_check,no_root_squash)
EOF
  exportfs -ra
fi
systemctl enable --now nfs-server >/dev/null 2>&1
exportfs -v | grep -qF "$NODEFALL_NFS_EXPORT" || die "$NODEFALL_NFS_EXPORT is not exported (exportfs -v)"
log "NFS export: $NODEFALL_NFS_EXPORT to $NODEFALL_SUBNET_CIDR"

# --- kubeadm init, once ---------------------------------------------------------------------
if [[ -f /etc/kubernetes/admin.conf ]]; then
  log "kubeadm init already done (/etc/kubernetes/admin.conf exists)"
else
  kubeadm_config "$(kubeadm version -o short)" >"$work/kubeadm-config.yaml"
  log "kubeadm init with $work/kubeadm-config.yaml"
  kubeadm init --config "$work/kubeadm-config.yaml"
fi

user=${SUDO_USER:-vagrant}
if [[ "$user" != root ]] && id -u "$user" >/dev/null 2>&1; then
  home=$(getent passwd "$user" | cut -d: -f6)
  install -d -m 0700 -o "$user" -g "$(id -gn "$user")" "$home/.kube"
  install -m 0600 -o "$user" -g "$(id -gn "$user")" /etc/kubernetes/admin.conf "$home/.kube/config"
fi

# The token stays valid (ttl 0); put it back if someone deleted it, so workers can still join.
if ! kubeadm token list 2>/dev/null | awk 'NR > 1 { print $1 }' | grep -qxF "$NODEFALL_BOOTSTRAP_TOKEN"; then
  kubeadm token create "$NODEFALL_BOOTSTRAP_TOKEN" --ttl 0 \
    --description "nodefall lab: the workers join with it (vagrant/Vagrantfile)"
fi

# --- flannel, on the private network ----------------------------------------------------------
# Without an interface flannel takes the default route's, which on VirtualBox is the NAT NIC
# whose 10.0.2.15 every VM shares. The interface name differs between boxes and providers, so
# flannel is told the private network's addresses instead (--iface-regex matches names or IPs).
prefix=${NODEFALL_SUBNET_CIDR%.0/24}
iface_regex="^${prefix//./\\.}\\.[0-9]+\$"
flannel_url="https://raw.githubusercontent.com/flannel-io/flannel/${NODEFALL_FLANNEL_VERSION}/Documentation/kube-flannel.yml"
curl -fsSL --retry 5 -o "$work/kube-flannel.orig.yml" "$flannel_url"
FLANNEL_ARG="- --iface-regex=${iface_regex}" awk '
  { print }
  /^[[:space:]]*- --kube-subnet-mgr$/ { match($0, /^[[:space:]]*/); print substr($0, 1, RLENGTH) ENVIRON["FLANNEL_ARG"] }
' "$work/kube-flannel.orig.yml" >"$work/kube-flannel.yml"
[[ "$(grep -c -- '--iface-regex=' "$work/kube-flannel.yml")" == 1 ]] \
  || die "could not add --iface-regex to flannel's DaemonSet ($flannel_url changed shape?)"
grep -qF "\"Network\": \"${NODEFALL_POD_CIDR}\"" "$work/kube-flannel.yml" \
  || die "flannel's net-conf Network is not ${NODEFALL_POD_CIDR} (the kubeadm podSubnet)"
kubectl apply -f "$work/kube-flannel.yml"
log "flannel $NODEFALL_FLANNEL_VERSION applied (--iface-regex=${iface_regex})"

kubectl wait --for=condition=Ready "node/${NODEFALL_NODE_NAME}" --timeout=600s

# --- csi-driver-nfs and the nfs-csi StorageClass (seed 000) -----------------------------------
# The files its install-driver.sh applies for this version, from the same tag.
csi_base="https://raw.githubusercontent.com/kubernetes-csi/csi-driver-nfs/${NODEFALL_CSI_NFS_VERSION}/deploy/${NODEFALL_CSI_NFS_VERSION}"
install -d -m 0700 "$work/csi-driver-nfs"
for manifest in rbac-csi-nfs csi-nfs-driverinfo csi-nfs-controller csi-nfs-node; do
  curl -fsSL --retry 5 -o "$work/csi-driver-nfs/$manifest.yaml" "$csi_base/$manifest.yaml"
  kubectl apply -f "$work/csi-driver-nfs/$manifest.yaml"
done
kubectl apply -f - <<EOF
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: nfs-csi
provisioner: nfs.csi.k8s.io
parameters:
  server: "${NODEFALL_NODE_IP}"
  share: "${NODEFALL_NFS_EXPORT}"
reclaimPolicy: Delete
volumeBindingMode: Immediate
mountOptions:
  - nfsvers=4.1
EOF
kubectl -n kube-system rollout status deployment/csi-nfs-controller --timeout=600s
log "csi-driver-nfs $NODEFALL_CSI_NFS_VERSION and StorageClass nfs-csi ($NODEFALL_NODE_IP:$NODEFALL_NFS_EXPORT)"

# --- graceful node shutdown is live on this node -----------------------------------------------
require_kubelet_inhibitor 60

kubectl get nodes -o wide
log "control plane ready: API server https://${NODEFALL_NODE_IP}:6443"
