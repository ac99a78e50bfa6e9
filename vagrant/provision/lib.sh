# shellcheck shell=bash
# Helpers shared by common.sh, control-plane.sh and worker.sh. The Vagrantfile uploads this
# file to /tmp/nodefall-provision-lib.sh (a file provisioner: no synced folder needed) before
# the shell provisioners run, and each of them sources it.

log() { printf '[nodefall %s] %s\n' "${NODEFALL_NODE_NAME:-lab}" "$*"; }

die() {
  printf '[nodefall %s] ERROR: %s\n' "${NODEFALL_NODE_NAME:-lab}" "$*" >&2
  exit 1
}

# Every variable named must be set and non-empty (the Vagrantfile passes them as `env`).
require_env() {
  local name
  for name in "$@"; do
    [[ -n "${!name:-}" ]] || die "$name is not set: run this through 'vagrant provision', which passes it"
  done
}

# apt-get that waits for the dpkg lock (a fresh Ubuntu box may be running its daily apt jobs)
# and never asks or restarts services on its own (needrestart).
apt_get() {
  DEBIAN_FRONTEND=noninteractive NEEDRESTART_MODE=l apt-get -q -o DPkg::Lock::Timeout=600 "$@"
}

apt_install() {
  apt_get install -y --no-install-recommends "$@"
}

# write_if_changed MODE PATH < content
# Writes PATH (creating its directory) only when the content differs. Returns 0 when it wrote,
# 1 when the file already had this content, so callers restart services only on a change.
write_if_changed() {
  local mode=$1 path=$2 tmp
  tmp=$(mktemp)
  cat >"$tmp"
  if [[ -f "$path" ]] && cmp -s "$tmp" "$path"; then
    rm -f "$tmp"
    return 1
  fi
  install -D -m "$mode" "$tmp" "$path"
  rm -f "$tmp"
  log "wrote $path"
  return 0
}

# The interface that holds IPv4 address $1 (the private network's; never assume eth1/enp0s8).
interface_of() {
  ip -o -4 addr show | awk -v ip="$1" '{ split($4, a, "/"); if (a[1] == ip) { print $2; exit } }'
}

# logind's effective InhibitDelayMaxUSec, in whole seconds.
logind_inhibit_delay_seconds() {
  busctl get-property org.freedesktop.login1 /org/freedesktop/login1 \
    org.freedesktop.login1.Manager InhibitDelayMaxUSec | awk '$1 == "t" { print int($2 / 1000000) }'
}

# Waits until the kubelet holds its logind delay inhibitor for shutdown, the sign that
# graceful node shutdown will run (seed 003); fails, with the kubelet's own words, if it does
# not within $1 seconds.
require_kubelet_inhibitor() {
  local deadline=$((SECONDS + $1))
  while ((SECONDS < deadline)); do
    if COLUMNS=1000 systemd-inhibit --list --no-pager \
      | awk '$1 == "kubelet" && /shutdown/ && $NF == "delay" { found = 1 } END { exit !found }'; then
      log "kubelet holds its shutdown delay inhibitor (graceful node shutdown: ${NODEFALL_GNS_PERIOD_SECONDS}s)"
      return 0
    fi
    sleep 2
  done
  COLUMNS=1000 systemd-inhibit --list --no-pager >&2 || true
  journalctl -u kubelet --no-pager -o cat 2>/dev/null | grep -i 'shutdown' | tail -n 5 >&2 || true
  die "the kubelet took no logind shutdown inhibitor within $1 s: graceful node shutdown would not run"
}
