#!/usr/bin/env bash
# Every node of the nodefall lab: the kernel settings Kubernetes needs, logind ready for the
# kubelet's graceful node shutdown, containerd (systemd cgroups), kubelet/kubeadm/kubectl from
# pkgs.k8s.io at the chosen minor (held), and the kubelet's node IP = the private address.
# Run by `vagrant up` / `vagrant provision` as root; safe to run again.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
source /tmp/nodefall-provision-lib.sh

require_env NODEFALL_NODE_NAME NODEFALL_NODE_IP NODEFALL_K8S_MINOR NODEFALL_GNS_PERIOD_SECONDS

[[ "$NODEFALL_K8S_MINOR" =~ ^v1\.[0-9]+$ ]] || die "NODEFALL_K8S_MINOR=$NODEFALL_K8S_MINOR: expected v1.N"
[[ "$NODEFALL_GNS_PERIOD_SECONDS" =~ ^[0-9]+$ ]] || die "NODEFALL_GNS_PERIOD_SECONDS is not a number"

# --- identity: node name = hostname = Vagrant machine name; node IP = private address -------
if [[ "$(hostname)" != "$NODEFALL_NODE_NAME" ]]; then
  die "hostname is '$(hostname)', expected '$NODEFALL_NODE_NAME' (config.vm.hostname): the Node would get the wrong name"
fi

# Vagrant configures the private network before provisioning; allow it a moment to come up.
iface=""
for _ in $(seq 1 30); do
  iface=$(interface_of "$NODEFALL_NODE_IP")
  [[ -n "$iface" ]] && break
  sleep 1
done
if [[ -z "$iface" ]]; then
  ip -br addr >&2 || true
  die "no interface holds $NODEFALL_NODE_IP (the private_network address)"
fi
log "private network: $NODEFALL_NODE_IP on $iface"

# --- swap off, now and after reboots (the kubelet refuses to start with swap by default) ----
swapoff -a
if grep -Eq '^[^#].*[[:space:]]swap[[:space:]]' /etc/fstab; then
  sed -ri.nodefall-bak 's/^([^#].*[[:space:]]swap[[:space:]].*)$/# \1/' /etc/fstab
  log "commented out the swap entries of /etc/fstab (backup: /etc/fstab.nodefall-bak)"
fi

# --- kernel modules and sysctls for Kubernetes networking ------------------------------------
printf 'overlay\nbr_netfilter\n' | write_if_changed 0644 /etc/modules-load.d/nodefall-k8s.conf || true
modprobe overlay
modprobe br_netfilter
write_if_changed 0644 /etc/sysctl.d/90-nodefall-k8s.conf <<'EOF' || true
net.bridge.bridge-nf-call-iptables = 1
net.bridge.bridge-nf-call-ip6tables = 1
net.ipv4.ip_forward = 1
EOF
sysctl --system >/dev/null || log "WARNING: 'sysctl --system' reported errors (checking ours below)"
for key in net.bridge.bridge-nf-call-iptables net.bridge.bridge-nf-call-ip6tables net.ipv4.ip_forward; do
  [[ "$(sysctl -n "$key")" == 1 ]] || die "sysctl $key is not 1"
done

# --- logind: let the kubelet's shutdown inhibitor delay a shutdown long enough -------------
# The kubelet asks logind to delay shutdown by shutdownGracePeriod; logind allows at most
# InhibitDelayMaxSec (5 s stock). Ubuntu's unattended-upgrades ships
# /usr/lib/systemd/logind.conf.d/unattended-upgrades-logind-maxdelay.conf (30 s), which sorts
# after the 99-kubelet.conf the kubelet would write and so wins (kubernetes#102818): mask it
# (an /etc drop-in of the same name pointing to /dev/null), set our value, and restart logind
# now, before any kubelet with a configuration starts: the kubelet reads the value once at
# start and takes its inhibitor only if it is long enough.
logind_changed=0
mask=/etc/systemd/logind.conf.d/unattended-upgrades-logind-maxdelay.conf
if [[ "$(readlink "$mask" 2>/dev/null || true)" != /dev/null ]]; then
  install -d -m 0755 /etc/systemd/logind.conf.d
  ln -sfn /dev/null "$mask"
  log "masked unattended-upgrades' logind InhibitDelayMaxSec drop-in"
  logind_changed=1
fi
if write_if_changed 0644 /etc/systemd/logind.conf.d/90-nodefall-kubelet-gns.conf <<EOF; then
# nodefall lab (vagrant/provision/common.sh): at least the kubelet's shutdownGracePeriod
# (vagrant/kubelet-graceful-shutdown.yaml), so its graceful node shutdown is not cut short.
[Login]
InhibitDelayMaxSec=${NODEFALL_GNS_PERIOD_SECONDS}
EOF
  logind_changed=1
fi
if ((logind_changed)); then
  systemctl restart systemd-logind
  log "restarted systemd-logind"
fi
delay=$(logind_inhibit_delay_seconds) || die "could not read logind's InhibitDelayMaxUSec (busctl)"
if ((delay < NODEFALL_GNS_PERIOD_SECONDS)); then
  systemd-analyze cat-config systemd/logind.conf >&2 || true
  die "logind InhibitDelayMaxSec is ${delay}s, less than shutdownGracePeriod ${NODEFALL_GNS_PERIOD_SECONDS}s: another logind.conf.d drop-in overrides ours (listed above)"
fi
log "logind InhibitDelayMaxSec: ${delay}s"
if ((logind_changed)) && systemctl is-active --quiet kubelet && [[ -f /var/lib/kubelet/config.yaml ]]; then
  # A kubelet started before this change read the old value (and logind's restart dropped its
  # inhibitor): start it again so it takes a new one.
  systemctl restart kubelet
  log "restarted the kubelet after the logind change"
fi
if dpkg-query -W -f='${Status}' acpid 2>/dev/null | grep -q 'install ok installed'; then
  log "WARNING: acpid is installed; if it handles the ACPI power button instead of logind, an ACPI shutdown may bypass graceful node shutdown"
fi

# --- packages: containerd, NFS client, Kubernetes from pkgs.k8s.io -------------------------
apt_get update
apt_install ca-certificates curl gpg containerd nfs-common

keyring=/etc/apt/keyrings/kubernetes-apt-keyring.gpg
repo="https://pkgs.k8s.io/core:/stable:/${NODEFALL_K8S_MINOR}/deb/"
install -d -m 0755 /etc/apt/keyrings
if [[ ! -s "$keyring" ]] || ! grep -qF "$repo" /etc/apt/sources.list.d/kubernetes.list 2>/dev/null; then
  curl -fsSL --retry 5 "${repo}Release.key" | gpg --dearmor --batch --yes -o "$keyring"
  chmod 0644 "$keyring"
fi
if write_if_changed 0644 /etc/apt/sources.list.d/kubernetes.list <<EOF; then
deb [signed-by=${keyring}] ${repo} /
EOF
  apt_get update
fi

installed=$(dpkg-query -W -f='${Version}' kubeadm 2>/dev/null || true)
if [[ -z "$installed" ]]; then
  apt_install kubelet kubeadm kubectl
  apt-mark hold kubelet kubeadm kubectl >/dev/null
elif [[ "$installed" != "${NODEFALL_K8S_MINOR#v}."* ]]; then
  die "kubeadm $installed is installed but NODEFALL_K8S_MINOR is $NODEFALL_K8S_MINOR: changing the minor needs a new cluster (vagrant destroy -f && vagrant up)"
fi
log "kubeadm $(dpkg-query -W -f='${Version}' kubeadm), kubelet $(dpkg-query -W -f='${Version}' kubelet) (held)"

# --- containerd: systemd cgroup driver (kubeadm's kubelet default), kubeadm's pause image --
pause_image=$(kubeadm config images list --kubernetes-version "$(kubeadm version -o short)" 2>/dev/null | grep '/pause:' || true)
containerd_config=$(containerd config default | sed -E 's/^([[:space:]]*SystemdCgroup = )false$/\1true/')
grep -Eq '^[[:space:]]*SystemdCgroup = true$' <<<"$containerd_config" \
  || die "could not switch containerd to the systemd cgroup driver: no 'SystemdCgroup = false' in 'containerd config default'"
if [[ -n "$pause_image" ]]; then
  # containerd 1.x: sandbox_image = "..."; containerd 2.x: sandbox = '...'
  containerd_config=$(sed -E "s#^([[:space:]]*sandbox(_image)? = ).*#\\1\"${pause_image}\"#" <<<"$containerd_config")
fi
if write_if_changed 0644 /etc/containerd/config.toml <<<"$containerd_config"; then
  systemctl restart containerd
  log "restarted containerd with SystemdCgroup = true${pause_image:+, sandbox image $pause_image}"
fi
systemctl enable --now containerd >/dev/null 2>&1
systemctl is-active --quiet containerd || die "containerd is not running"

# --- kubelet: node IP = the private network address ----------------------------------------
# On VirtualBox the NAT address of NIC 1 (10.0.2.15) is the same on every VM; without this the
# kubelet would report it as InternalIP.
if write_if_changed 0644 /etc/default/kubelet <<EOF; then
KUBELET_EXTRA_ARGS=--node-ip=${NODEFALL_NODE_IP}
EOF
  if [[ -f /var/lib/kubelet/config.yaml ]]; then
    systemctl restart kubelet
    log "restarted the kubelet with --node-ip=$NODEFALL_NODE_IP"
  fi
fi
systemctl enable kubelet >/dev/null 2>&1

log "common provisioning done"
