#!/usr/bin/env bash
# CI check of the Vagrant lab in vagrant/. Run from anywhere as `bash vagrant/check.sh`.
#
# It boots nothing (no VM, no box download): it lints the provision scripts, checks the
# Vagrantfile's syntax, has Vagrant validate it for both providers, checks what the Vagrantfile
# hands each provisioner and the kubeadm configuration control-plane.sh would use.
#
# Needs the Debian packages: vagrant vagrant-libvirt ruby shellcheck (and util-linux, which
# every Debian has). Runs as root (Vagrant is run in a network namespace of its own, so it
# provably downloads nothing), without stdin. Whatever Vagrant writes goes to a temporary
# directory that is removed at exit; the repository is left as it was (checked).
#
# VirtualBox is not in Debian: its provider is validated with a VBoxManage stand-in that only
# answers `--version` (Vagrant asks nothing else during validate; any other call fails loudly).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
lab=$repo/vagrant

die() {
  printf 'vagrant/check.sh: %s\n' "$*" >&2
  exit 1
}

# --- tools, each named with the apt package that brings it ------------------------------------
missing=()
command -v shellcheck >/dev/null 2>&1 || missing+=("shellcheck (apt package shellcheck)")
command -v ruby >/dev/null 2>&1 || missing+=("ruby (apt package ruby)")
command -v vagrant >/dev/null 2>&1 || missing+=("vagrant (apt package vagrant)")
command -v unshare >/dev/null 2>&1 || missing+=("unshare (apt package util-linux)")
((${#missing[@]} == 0)) || die "missing: ${missing[*]}"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/nodefall-vagrant-check.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# Vagrant's own state, and a throwaway copy of the lab to run it in: the Vagrantfile writes
# .vagrant/nodefall-bootstrap-token beside itself, and validate writes .vagrant/machines.
export VAGRANT_HOME=$tmp/vagrant.d
export VAGRANT_CHECKPOINT_DISABLE=1
export VAGRANT_BOX_UPDATE_CHECK_DISABLE=1
unset VAGRANT_CWD VAGRANT_DOTFILE_PATH VAGRANT_VAGRANTFILE VAGRANT_DEFAULT_PROVIDER VAGRANT_NO_PLUGINS
# The defaults are what is checked, whatever the caller's environment holds.
for name in "${!NODEFALL_@}"; do unset "$name"; done

unshare --net true 2>/dev/null \
  || die "'unshare --net' failed: run as root, so Vagrant runs without network"

unshare --net vagrant plugin list --no-color </dev/null >"$tmp/plugins.txt" 2>&1 \
  || { cat "$tmp/plugins.txt" >&2; die "'vagrant plugin list' failed"; }
grep -q '^vagrant-libvirt ' "$tmp/plugins.txt" \
  || { cat "$tmp/plugins.txt" >&2; die "the vagrant-libvirt plugin is missing (apt package vagrant-libvirt)"; }

snapshot() { (cd "$lab" && find . -printf '%p %s %T@\n' | LC_ALL=C sort); }
snapshot >"$tmp/before.txt"

copy_lab() {
  rm -rf "$tmp/lab"
  mkdir "$tmp/lab"
  tar -C "$lab" --exclude=./.vagrant --exclude=./kubeconfig -cf - . | tar -C "$tmp/lab" -xf -
}

# VBoxManage stand-in: VirtualBox 7.0, the newest this Vagrant's driver table knows.
mkdir "$tmp/bin"
cat >"$tmp/bin/VBoxManage" <<'EOF'
#!/bin/sh
if [ "$*" = "--version" ]; then
  echo "7.0.20r163906"
  exit 0
fi
echo "VBoxManage stand-in (vagrant/check.sh): unexpected call: VBoxManage $*" >&2
exit 1
EOF
chmod +x "$tmp/bin/VBoxManage"

passed=0
failed=0
failures=()
check() {
  local name=$1 rc
  shift
  printf '\n== %s\n' "$name"
  # In a subshell with errexit on: any failing command inside the check fails the check.
  set +e
  (
    set -e
    "$@"
  ) >"$tmp/out.txt" 2>&1
  rc=$?
  set -e
  cat "$tmp/out.txt"
  if ((rc == 0)); then
    printf -- '-- ok: %s\n' "$name"
    passed=$((passed + 1))
  else
    printf -- '-- FAILED (exit %s): %s\n' "$rc" "$name"
    failed=$((failed + 1))
    failures+=("$name")
  fi
}

# vagrant_validate PROVIDER [VAR=VALUE ...]: `vagrant validate` of a fresh copy of the lab with
# that provider, no network and no stdin; then the machines must have that provider's data dir
# (proof that the provider's own config checks ran, not skipped), and unless a token was given,
# the Vagrantfile must have made and kept one.
vagrant_validate() {
  local provider=$1 machine
  shift
  copy_lab
  (
    cd "$tmp/lab"
    env "$@" PATH="$tmp/bin:$PATH" VAGRANT_DEFAULT_PROVIDER="$provider" \
      unshare --net vagrant validate --no-color </dev/null
  ) || return 1
  for machine in k8s-1 k8s-2 k8s-3; do
    [[ -d "$tmp/lab/.vagrant/machines/$machine/$provider" ]] \
      || { echo "no .vagrant/machines/$machine/$provider: validate did not use the $provider provider"; return 1; }
  done
  if [[ " $* " != *" NODEFALL_BOOTSTRAP_TOKEN="* ]]; then
    grep -Eqx '[a-z0-9]{6}\.[a-z0-9]{16}' "$tmp/lab/.vagrant/nodefall-bootstrap-token" \
      || { echo "the Vagrantfile did not keep a bootstrap token in .vagrant/nodefall-bootstrap-token"; return 1; }
  fi
}

# vagrant_rejects PROVIDER VAR=VALUE EXPECTED: an invalid setting must fail validation, saying why.
vagrant_rejects() {
  local provider=$1 setting=$2 expected=$3
  copy_lab
  if (cd "$tmp/lab" && env "$setting" PATH="$tmp/bin:$PATH" VAGRANT_DEFAULT_PROVIDER="$provider" \
    unshare --net vagrant validate --no-color </dev/null) >"$tmp/reject.txt" 2>&1; then
    cat "$tmp/reject.txt"
    echo "validate accepted $setting"
    return 1
  fi
  grep -qF -- "$expected" "$tmp/reject.txt" \
    || { cat "$tmp/reject.txt"; echo "validate failed for $setting, but without '$expected'"; return 1; }
  echo "rejected as expected: $setting ($expected)"
}

# What the Vagrantfile hands each provisioner, read by evaluating it with a recording stand-in
# for Vagrant's config objects: every machine runs lib, common, then control-plane (k8s-1) or
# worker; every variable a script requires (require_env) is passed; control-plane.sh's kubeadm
# configuration parses and carries the periods of kubelet-graceful-shutdown.yaml.
provisioner_wiring() {
  copy_lab
  ruby - "$tmp/lab" <<'RUBY'
require "yaml"
require "open3"
lab = ARGV.fetch(0)

class Recorder
  def initialize(log, machine = nil)
    @log = log
    @machine = machine
  end

  def method_missing(name, *args, **kwargs, &block)
    machine = @machine
    machine = args.first if name == :define
    @log << [machine, args.first, kwargs] if name == :provision
    child = Recorder.new(@log, machine)
    block&.call(child)
    child
  end

  def respond_to_missing?(*) = true
end

module Vagrant
  LOG = []
  def self.require_version(*) = nil
  def self.configure(_version)
    yield Recorder.new(LOG)
  end
end

Dir.chdir(lab) { load File.join(lab, "Vagrantfile") }

errors = []
by_machine = Vagrant::LOG.group_by(&:first)
errors << "machines #{by_machine.keys.inspect}, expected k8s-1..3" unless by_machine.keys == %w[k8s-1 k8s-2 k8s-3]
gns = YAML.safe_load(File.read(File.join(lab, "kubelet-graceful-shutdown.yaml")))
secs = ->(d) { d.to_s.scan(/(\d+)(h|m|s)/).sum { |n, u| n.to_i * { "h" => 3600, "m" => 60, "s" => 1 }[u] } }

by_machine.each do |machine, provisions|
  names = provisions.map { |p| p[1] }
  role = machine == "k8s-1" ? "control-plane" : "worker"
  errors << "#{machine}: provisioners #{names.inspect}" unless names == ["lib", "common", role]
  provisions.each do |_, name, opts|
    next unless opts[:type] == "shell"
    script = File.join(lab, opts.fetch(:path))
    required = File.read(script).scan(/^require_env((?:[ \t]+[A-Z_0-9]+|[ \t]*\\\n)+)/).join(" ").scan(/[A-Z][A-Z_0-9]+/)
    errors << "#{machine} #{name}: no require_env in #{opts[:path]}" if required.empty?
    missing = required - opts.fetch(:env, {}).keys
    errors << "#{machine} #{name}: the Vagrantfile does not pass #{missing.join(', ')}" unless missing.empty?
    next unless name == "control-plane"

    env = opts.fetch(:env).transform_values(&:to_s)
    out, err, status = Open3.capture3(env, "bash", script, "--print-kubeadm-config")
    unless status.success?
      errors << "control-plane.sh --print-kubeadm-config failed: #{err}"
      next
    end
    docs = YAML.load_stream(out)
    kinds = docs.map { |d| d["kind"] }
    errors << "kubeadm config kinds #{kinds.inspect}" unless kinds == %w[InitConfiguration ClusterConfiguration KubeletConfiguration]
    kubelet = docs.find { |d| d["kind"] == "KubeletConfiguration" } || {}
    init = docs.find { |d| d["kind"] == "InitConfiguration" } || {}
    %w[shutdownGracePeriod shutdownGracePeriodCriticalPods].each do |field|
      next if secs.(kubelet[field]) == secs.(gns[field]) && secs.(gns[field]).positive?
      errors << "kubeadm KubeletConfiguration #{field}=#{kubelet[field].inspect}, kubelet-graceful-shutdown.yaml says #{gns[field].inspect}"
    end
    errors << "kubelet cgroupDriver #{kubelet['cgroupDriver'].inspect}" unless kubelet["cgroupDriver"] == "systemd"
    advertise = init.dig("localAPIEndpoint", "advertiseAddress")
    errors << "advertiseAddress #{advertise.inspect} is not k8s-1's #{env['NODEFALL_NODE_IP']}" unless advertise == env["NODEFALL_NODE_IP"]
    token = init.dig("bootstrapTokens", 0, "token")
    errors << "bootstrap token in the kubeadm config is not the one the workers get" unless token == env["NODEFALL_BOOTSTRAP_TOKEN"]
    puts out
  end
end

by_machine.each do |machine, provisions|
  env = provisions.find { |p| p[1] == "common" }&.dig(2, :env) || {}
  puts "#{machine}: #{provisions.map { |p| p[1] }.join(' -> ')}; node IP #{env['NODEFALL_NODE_IP']}, Kubernetes #{env['NODEFALL_K8S_MINOR']}"
end
abort(errors.map { |e| "error: #{e}" }.join("\n")) unless errors.empty?
RUBY
}

cd "$repo"
check "shellcheck: provision scripts and this check" \
  shellcheck -x vagrant/provision/lib.sh vagrant/provision/common.sh \
  vagrant/provision/control-plane.sh vagrant/provision/worker.sh vagrant/check.sh
check "ruby -c vagrant/Vagrantfile" ruby -c vagrant/Vagrantfile
check "vagrant validate, libvirt provider (vagrant-libvirt)" vagrant_validate libvirt
check "vagrant validate, virtualbox provider (VBoxManage stand-in)" vagrant_validate virtualbox
check "vagrant validate, settings overridden" vagrant_validate libvirt \
  NODEFALL_BOX=generic/ubuntu2204 NODEFALL_K8S_VERSION=v1.34 NODEFALL_SUBNET=192.168.57 \
  NODEFALL_CP_MEMORY=3072 NODEFALL_WORKER_MEMORY=1536 NODEFALL_BOOTSTRAP_TOKEN=abcdef.0123456789abcdef
check "vagrant validate rejects a Kubernetes minor before v1.32" \
  vagrant_rejects libvirt NODEFALL_K8S_VERSION=v1.30 "expected a Kubernetes minor v1.32 or newer"
check "vagrant validate rejects a malformed bootstrap token" \
  vagrant_rejects virtualbox NODEFALL_BOOTSTRAP_TOKEN=nope "NODEFALL_BOOTSTRAP_TOKEN must match"
check "provisioner wiring and the kubeadm configuration" provisioner_wiring

snapshot >"$tmp/after.txt"
check "vagrant/ left as it was" diff "$tmp/before.txt" "$tmp/after.txt"

echo
if ((failed)); then
  printf 'vagrant/check.sh FAILED: %s\n' "${failures[@]}"
fi
echo "lab: $passed passed, $failed failed"
((failed == 0))
