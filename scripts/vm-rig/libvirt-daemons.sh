#!/usr/bin/env bash
# Starts or stops the libvirt daemons the real-VM test rig needs, on a host
# without systemd (see scripts/vm-rig/README.md).
#
#   libvirt-daemons.sh start   # no-op when qemu:///system already answers
#   libvirt-daemons.sh stop    # stops only what `start` started, once unused
#
# State lives in $NODEFALL_VM_RIG_STATE (default /run/nodefall-vm-rig), shared
# by every caller on the host and changed under a lock: the pid files of the
# virtlogd and libvirtd this script started, and `holders`, the callers using
# them. A caller is identified by a PID that lives as long as its use:
# $NODEFALL_VM_RIG_HOLDER, by default the PID of the shell running this script
# (so `start` and `stop` from one script or terminal match).
# - `start`: if qemu:///system already answers and its daemons are not this
#   script's, it starts nothing and registers nothing. If they are this
#   script's (another run started them), it joins their holders. Otherwise it
#   starts virtlogd and libvirtd and becomes their first holder.
# - `stop`: removes the caller from the holders (and any holder whose PID is
#   gone: a run that died). Only when no holder is left does it signal exactly
#   the recorded PIDs (checking each still runs the program that was started,
#   not a reused PID) and wait for them. So one run's `stop` never takes the
#   daemons from under another run, and a caller whose `start` started nothing
#   stops nothing.
set -euo pipefail

URI="qemu:///system"
STATE="${NODEFALL_VM_RIG_STATE:-/run/nodefall-vm-rig}"
QEMU_CONF=/etc/libvirt/qemu.conf
WAIT_SECS=60

HOLDER="${NODEFALL_VM_RIG_HOLDER:-$PPID}"

log() { printf 'libvirt-daemons: %s\n' "$*" >&2; }

answers() { timeout 10 virsh -c "$URI" uri >/dev/null 2>&1; }

# The program a PID runs, from its /proc entry ("" if it is gone).
comm_of() { cat "/proc/$1/comm" 2>/dev/null || true; }

# A recorded daemon that still runs the program it was started as.
recorded_pid() { # <name>
  local file="$STATE/$1.pid" pid
  [[ -s "$file" ]] || return 1
  pid="$(tr -dc '0-9' <"$file")"
  [[ -n "$pid" && "$(comm_of "$pid")" == "$1" ]] || return 1
  echo "$pid"
}

# Debian's QEMU driver resolves its default user `libvirt-qemu` when it loads,
# before reading qemu.conf; only the package libvirt-daemon-system creates that
# user, and without it the driver does not load ("Failed to parse user
# 'libvirt-qemu'"). So the user is created when missing (a system user with no
# login and no home).
# The rig's kernel command line files (base initramfs in ~/.cache, per-run
# files in temp dirs) live under root-only directories, so QEMU must run as
# root: qemu.conf gets `user = "root"` / `group = "root"` appended (the file is
# created if absent), but only when it does not name a user already; the lines
# stay in place, harmless on later runs.
configure_qemu_user() {
  if ! id libvirt-qemu >/dev/null 2>&1; then
    log "creating the system user libvirt-qemu (the QEMU driver needs it to load)"
    useradd --system --user-group --no-create-home --home-dir /var/lib/libvirt \
      --shell /usr/sbin/nologin libvirt-qemu
  fi
  if [[ -f "$QEMU_CONF" ]] && grep -qE '^[[:space:]]*user[[:space:]]*=' "$QEMU_CONF"; then return; fi
  log "setting user/group = root in $QEMU_CONF (QEMU reads the rig's files under /root)"
  mkdir -p "$(dirname "$QEMU_CONF")"
  {
    echo '# Added by nodefall scripts/vm-rig/libvirt-daemons.sh: the test rig runs QEMU as root.'
    echo 'user = "root"'
    echo 'group = "root"'
  } >>"$QEMU_CONF"
}

# Holders still alive, one a line (a dead PID is a run that ended without `stop`).
live_holders() {
  local h
  [[ -f "$STATE/holders" ]] || return 0
  while read -r h; do
    [[ "$h" =~ ^[0-9]+$ ]] && kill -0 "$h" 2>/dev/null && echo "$h"
  done <"$STATE/holders" | sort -u
}

set_holders() { # <holder>...: the new list
  printf '%s\n' "$@" | grep -E '^[0-9]+$' | sort -u >"$STATE/holders.tmp" || true
  mv "$STATE/holders.tmp" "$STATE/holders"
}

ours_running() { recorded_pid libvirtd >/dev/null || recorded_pid virtlogd >/dev/null; }

start() {
  local holders
  mapfile -t holders < <(live_holders)
  if answers; then
    if recorded_pid libvirtd >/dev/null; then
      set_holders "${holders[@]}" "$HOLDER"
      log "already started by this script (pids in $STATE); holders now: $(live_holders | tr '\n' ' ')"
    else
      log "$URI already answers (libvirt not started by this script); started nothing"
    fi
    return 0
  fi
  mkdir -p /var/log/libvirt/qemu /run/libvirt /var/lib/libvirt/qemu /var/cache/libvirt/qemu
  configure_qemu_user
  # 9>&-: the daemons must not inherit the lock's descriptor (they would
  # hold the lock for as long as they run).
  if ! recorded_pid virtlogd >/dev/null; then
    virtlogd -d -p "$STATE/virtlogd.pid" 9>&-
  fi
  if ! recorded_pid libvirtd >/dev/null; then
    libvirtd -d -p "$STATE/libvirtd.pid" 9>&-
  fi
  local deadline=$((SECONDS + WAIT_SECS)) started=$SECONDS
  until answers; do
    # A libvirtd whose driver fails to load exits a moment after forking
    # (and removes its pid file): no live libvirtd after 5 s means that.
    if ((SECONDS >= deadline)) || { ((SECONDS - started > 5)) && ! recorded_pid libvirtd >/dev/null; }; then
      log "$URI does not answer; last lines of /var/log/libvirt/libvirtd.log:"
      tail -n 5 /var/log/libvirt/libvirtd.log >&2 || true
      stop_ours # what was started so far
      exit 1
    fi
    sleep 0.5
  done
  set_holders "${holders[@]}" "$HOLDER"
  log "started virtlogd (pid $(recorded_pid virtlogd)) and libvirtd (pid $(recorded_pid libvirtd)); $URI answers; holder $HOLDER"
}

stop_one() { # <name>
  local pid
  if ! pid="$(recorded_pid "$1")"; then
    rm -f "$STATE/$1.pid"
    return 0
  fi
  kill -TERM "$pid" 2>/dev/null || true
  local deadline=$((SECONDS + 20))
  while [[ "$(comm_of "$pid")" == "$1" ]]; do
    if ((SECONDS >= deadline)); then
      log "$1 (pid $pid) ignored SIGTERM for 20s; SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      sleep 0.2
      break
    fi
    sleep 0.2
  done
  rm -f "$STATE/$1.pid"
  log "stopped $1 (pid $pid)"
}

stop_ours() {
  stop_one libvirtd
  stop_one virtlogd
  rm -f "$STATE/holders"
}

stop() {
  local others
  mapfile -t others < <(live_holders | grep -vx "$HOLDER" || true)
  set_holders "${others[@]}"
  if ! ours_running; then
    log "no daemon started by this script runs; nothing to stop"
    return 0
  fi
  if ((${#others[@]})); then
    log "left running: still used by ${others[*]}"
    return 0
  fi
  stop_ours
}

mkdir -p "$STATE"
exec 9>"$STATE/lock"
flock -w 300 9 || { log "$STATE/lock is held by another run for 300 s"; exit 1; }
case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *)
    echo "usage: $0 start|stop" >&2
    exit 2
    ;;
esac
