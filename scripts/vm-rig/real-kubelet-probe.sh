#!/usr/bin/env bash
# Issue 64's go/no-go: can a real kubelet run in a VM on this machine (QEMU
# under TCG, no KVM)? Boots the kind node image's parts (build-node-disk.sh)
# under libvirt as a node of a simulated control plane (upstream default
# timings: grace 50 s, 40 s leases renewed every 10 s), then measures:
#   boot_to_ready_s     `virsh start` to the Node Ready (the kubelet registers it)
#   boot_cpu_s          the QEMU process's CPU time up to Ready
#   idle_cpu_share      its CPU share of one host core while Ready and idle
#   ready_flaps         Ready leaving True during HOLD seconds (must be 0)
#   pod_running_s       a pod (the image's agnhost) bound to the node to Running
#   pause_unknown_s     `virsh suspend` to Ready=Unknown
#   resume_ready_s      `virsh resume` to Ready=True again
#   shutdown_notready_s the ACPI power button to Ready=False (the kubelet's
#                       graceful node shutdown, through logind)
#   shutdown_off_s      the power button to the domain shut off
#   pod_phase           the pod's phase after that
# Prints a summary and, last, one JSON object of those figures.
#
# Usage: scripts/vm-rig/real-kubelet-probe.sh     (HOLD=180 VCPUS=1 MEMORY_MIB=2048)
# Needs: the kind node image (scripts/kind/image.sh), libvirt on qemu:///system
# (libvirt-daemons.sh start), kubectl, a built nodefall (NODEFALL_BIN or
# $CARGO_TARGET_DIR/debug/nodefall), iptables and ip6tables.
#
# Containment: the guest's NIC is QEMU user-mode networking, whose traffic
# leaves as the QEMU process's own sockets. The domain runs QEMU as a uid of
# its own (GUARD_UID, no account: libvirt's DAC label) and, before it starts,
# iptables and ip6tables drop every packet that uid sends anywhere but
# loopback (the API server on 127.0.0.1, reached as 10.0.2.2). Both rules are
# removed at the end. The guest has no DNS server either.
set -euo pipefail

HOLD=${HOLD:-180}
VCPUS=${VCPUS:-1}
MEMORY_MIB=${MEMORY_MIB:-2048}
GUARD_UID=${GUARD_UID:-64434}
NAME=vm-probe
NODE=vm-kubelet-0
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
bin="${NODEFALL_BIN:-${CARGO_TARGET_DIR:-$repo/target}/debug/nodefall}"
say() { printf '[vm-probe %s] %s\n' "$(date -u +%T)" "$*" >&2; }
die() { say "error: $*"; exit 1; }
now() { date +%s.%N; }
since() { python3 -c "print(round($(now) - $1, 2))"; }
[[ -x "$bin" ]] || die "no nodefall at $bin (cargo build, or NODEFALL_BIN)"
getent passwd "$GUARD_UID" >/dev/null && die "uid $GUARD_UID has an account here: pick a free GUARD_UID"

work="$(mktemp -d /tmp/nodefall-vm-probe.XXXXXX)"
chmod 0755 "$work"
export NODEFALL_STATE_DIR="$work/state"
domain="nodefall-probe-$$"
defined=""
guard=()
cleanup() {
  if [[ -n "$defined" ]]; then
    virsh -c qemu:///system destroy "$domain" >/dev/null 2>&1 || true
    virsh -c qemu:///system undefine "$domain" >/dev/null 2>&1 || true
  fi
  if (( ${#guard[@]} )); then
    # What the guard stopped: its rules' packet counts, then the rules go.
    say "the guard dropped $(iptables -w -nvxL OUTPUT | awk -v u="$GUARD_UID" '$0 ~ "owner UID match " u { print $1 }') IPv4 and $(ip6tables -w -nvxL OUTPUT | awk -v u="$GUARD_UID" '$0 ~ "owner UID match " u { print $1 }') IPv6 packets"
  fi
  for rule in "${guard[@]}"; do ${rule/-I OUTPUT 1/-D OUTPUT} 2>/dev/null || true; done
  "$bin" sim down --name "$NAME" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

say "the node disk (build-node-disk.sh)"
kernel="" initrd="" disk=""
while IFS='=' read -r k v; do
  case "$k" in kernel) kernel=$v ;; initrd) initrd=$v ;; disk) disk=$v ;; esac
done < <(bash "$here/build-node-disk.sh")
[[ -n "$disk" ]] || die "build-node-disk.sh printed no disk"
say "disk $disk; kernel $kernel"

say "simulated control plane (default profile)"
kubeconfig=$("$bin" sim up --name "$NAME" --nodes 1 --profile default --timeout 300)
export KUBECONFIG="$kubeconfig"
server=$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')
token=$(kubectl config view --minify --raw -o jsonpath='{.users[0].user.token}')
ca=$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.certificate-authority}')
port=${server##*:}

# Per-run: copies of the kernel, initrd and disk (libvirt hands them to the
# guard uid while the domain runs), the config disk, the domain.
cp "$kernel" "$work/vmlinuz"
cp "$initrd" "$work/initrd.img"
kernel="$work/vmlinuz" initrd="$work/initrd.img"
cp --sparse=always "$disk" "$work/root.img"
cfg="$work/cfg"
mkdir -p "$cfg"
ssh-keygen -q -t ed25519 -N '' -f "$work/id" >/dev/null
cp "$work/id.pub" "$cfg/authorized_keys"
cp "$ca" "$cfg/ca.crt"
node_mac=52:54:00:6b:75:10
mgmt_mac=52:54:00:6b:75:11
ssh_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$cfg/env" <<ENV
NODE_NAME=$NODE
NODE_MAC=$node_mac
NODE_IP=10.0.2.15
NODE_GATEWAY=10.0.2.2
MGMT_MAC=$mgmt_mac
MGMT_IP=10.0.3.15
POD_CIDR=10.244.100.0/24
ENV
cat >"$cfg/kubelet.conf" <<KC
apiVersion: v1
kind: Config
clusters:
- name: sim
  cluster:
    server: https://10.0.2.2:$port
    certificate-authority: /etc/kubernetes/pki/ca.crt
    tls-server-name: 127.0.0.1
users:
- name: kubelet
  user:
    token: $token
contexts:
- name: sim
  context: {cluster: sim, user: kubelet}
current-context: sim
KC
cat >"$cfg/config.yaml" <<KCFG
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: systemd
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
failSwapOn: false
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
nodeStatusUpdateFrequency: 10s
nodeLeaseDurationSeconds: 40
shutdownGracePeriod: 30s
shutdownGracePeriodCriticalPods: 10s
imageGCHighThresholdPercent: 100
evictionHard: {nodefs.available: "0%", nodefs.inodesFree: "0%", imagefs.available: "0%"}
KCFG
echo "KUBELET_KUBEADM_ARGS=\"--node-ip=10.0.2.15 --hostname-override=$NODE\"" >"$cfg/kubeadm-flags.env"
mkfs.ext4 -q -L nodefall-cfg -d "$cfg" "$work/cfg.img" 16M
uuid=$(cat /proc/sys/kernel/random/uuid)
cat >"$work/domain.xml" <<XML
<domain type='qemu' xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>
  <name>$domain</name>
  <uuid>$uuid</uuid>
  <memory unit='MiB'>$MEMORY_MIB</memory>
  <vcpu>$VCPUS</vcpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>$kernel</kernel>
    <initrd>$initrd</initrd>
    <cmdline>root=/dev/vda rw console=ttyS0 ipv6.disable=1 systemd.show_status=1</cmdline>
  </os>
  <features><acpi/></features>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>restart</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <disk type='file' device='disk'>
      <driver name='qemu' type='raw' cache='unsafe'/>
      <source file='$work/root.img'/>
      <target dev='vda' bus='virtio'/>
    </disk>
    <disk type='file' device='disk'>
      <driver name='qemu' type='raw'/>
      <source file='$work/cfg.img'/>
      <target dev='vdb' bus='virtio'/>
      <readonly/>
    </disk>
    <interface type='user'>
      <mac address='$node_mac'/>
      <model type='e1000'/>
      <rom enabled='no'/>
    </interface>
    <serial type='file'>
      <source path='$work/console.log'/>
      <target port='0'/>
    </serial>
    <video><model type='none'/></video>
    <memballoon model='none'/>
  </devices>
  <seclabel type='static' model='dac' relabel='yes'>
    <label>+$GUARD_UID:+$GUARD_UID</label>
  </seclabel>
  <qemu:commandline>
    <qemu:arg value='-netdev'/>
    <qemu:arg value='user,id=mgmt,net=10.0.3.0/24,restrict=on,ipv6=off,hostfwd=tcp:127.0.0.1:$ssh_port-:22'/>
    <qemu:arg value='-device'/>
    <qemu:arg value='e1000,netdev=mgmt,mac=$mgmt_mac,romfile=,bus=pci.0,addr=0x9'/>
  </qemu:commandline>
</domain>
XML

say "containment: drop what uid $GUARD_UID sends beyond loopback (IPv4 and IPv6)"
for t in iptables ip6tables; do
  rule="$t -w -I OUTPUT 1 -m owner --uid-owner $GUARD_UID ! -o lo -j DROP"
  $rule
  guard+=("$rule")
done

virsh -c qemu:///system define "$work/domain.xml" >/dev/null
defined=1
t0=$(now)
virsh -c qemu:///system start "$domain" >/dev/null
qpid=$(cat "/run/libvirt/qemu/$domain.pid")
say "domain $domain started (QEMU pid $qpid, as uid $(stat -c %u "/proc/$qpid")); waiting for the node"
cpu_s() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.1f", ($14 + $15) / hz }' "/proc/$qpid/stat"; }

deadline=$(( $(date +%s) + 600 ))
until kubectl get node "$NODE" >/dev/null 2>&1; do
  (( $(date +%s) < deadline )) || { tail -40 "$work/console.log"; die "no Node $NODE after 600 s"; }
  sleep 1
done
say "Node registered after $(since "$t0") s"
kubectl wait --for=condition=Ready "node/$NODE" --timeout=600s >/dev/null \
  || { tail -40 "$work/console.log"; die "Node $NODE not Ready"; }
boot_to_ready=$(since "$t0")
boot_cpu=$(cpu_s)
say "Node Ready $boot_to_ready s after virsh start; QEMU CPU ${boot_cpu} s"
grep -E 'nodefall-vm:|Reached target|Started (containerd|kubelet)' "$work/console.log" | tail -12 >&2 || true

ssh_guest() { ssh -q -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes \
  -o ConnectTimeout=5 -i "$work/id" -p "$ssh_port" root@127.0.0.1 "$@"; }
agnhost=$(ssh_guest "ctr -n k8s.io images ls -q | grep -m1 '/agnhost:'") || die "no agnhost image in the node"
say "a pod on the node ($agnhost)"
t1=$(now)
kubectl apply -f - >/dev/null <<POD
apiVersion: v1
kind: Pod
metadata: {name: probe, namespace: default}
spec:
  nodeName: $NODE
  automountServiceAccountToken: false
  containers:
  - name: web
    image: $agnhost
    imagePullPolicy: Never
    args: [netexec, --http-port=8080]
POD
kubectl wait --for=condition=Ready pod/probe --timeout=300s >/dev/null || kubectl describe pod probe >&2
pod_running=$(since "$t1")
say "pod Ready after $pod_running s"

say "holding $HOLD s: Ready must stay True"
c0=$(cpu_s); h0=$(now)
flaps=$(timeout "$HOLD" kubectl get node "$NODE" -w --output-watch-events \
  -o jsonpath='{.object.status.conditions[?(@.type=="Ready")].status}{"\n"}' 2>/dev/null | grep -vc '^True$' || true)
idle_share=$(python3 -c "print(round(($(cpu_s) - $c0) / ($(now) - $h0), 2))")
say "Ready left True $flaps times; QEMU used $idle_share of a core"
ssh_guest 'ps -eo pid,time,rss,comm --sort=-time | head -8; cat /proc/loadavg' >&2 || say "ssh failed"

say "pause/resume round trip"
t2=$(now)
virsh -c qemu:///system suspend "$domain" >/dev/null
kubectl wait --for=condition=Ready=Unknown "node/$NODE" --timeout=300s >/dev/null
pause_unknown=$(since "$t2")
t3=$(now)
virsh -c qemu:///system resume "$domain" >/dev/null
kubectl wait --for=condition=Ready=True "node/$NODE" --timeout=300s >/dev/null
resume_ready=$(since "$t3")
say "suspend -> Unknown $pause_unknown s; resume -> Ready $resume_ready s"

say "ACPI power button: logind, the kubelet's delay inhibitor, graceful node shutdown"
ssh_guest 'SYSTEMD_PAGER=cat COLUMNS=200 systemd-inhibit --list' >&2 || say "systemd-inhibit failed"
t4=$(now)
virsh -c qemu:///system shutdown --mode acpi "$domain" >/dev/null
kubectl wait --for=condition=Ready=False "node/$NODE" --timeout=60s >/dev/null || say "the kubelet did not report NotReady"
shutdown_notready=$(since "$t4")
until [[ "$(virsh -c qemu:///system domstate "$domain" 2>/dev/null)" == "shut off"* ]]; do
  [[ $(since "$t4" | cut -d. -f1) -lt 180 ]] || die "still running 180 s after the power button"
  sleep 0.5
done
shutdown_off=$(since "$t4")
pod_phase=$(kubectl get pod probe -o jsonpath='{.status.phase}')
say "power button -> Ready=False $shutdown_notready s, shut off $shutdown_off s; the pod ended $pod_phase"

printf '{"boot_to_ready_s":%s,"boot_cpu_s":%s,"idle_cpu_share":%s,"ready_flaps":%s,"hold_s":%s,"pod_running_s":%s,"pause_unknown_s":%s,"resume_ready_s":%s,"shutdown_notready_s":%s,"shutdown_off_s":%s,"pod_phase":"%s","vcpus":%s,"memory_mib":%s}\n' \
  "$boot_to_ready" "$boot_cpu" "$idle_share" "$flaps" "$HOLD" "$pod_running" "$pause_unknown" "$resume_ready" "$shutdown_notready" "$shutdown_off" "$pod_phase" "$VCPUS" "$MEMORY_MIB"
