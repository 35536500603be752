#!/usr/bin/env bash
# README's two commands on a machine with nothing but a Rust toolchain and the C compiler it
# links with: a Debian chroot made by debootstrap (minbase, plus gcc, libc6-dev, git and
# ca-certificates), this machine's rustup toolchain bind-mounted read-only, a fresh clone of the
# repository, then `cargo test --workspace` and `cargo run --release -- profile`, nothing else
# (no hwloc, udev or pkg-config; no xxhash.h, so the XXH3 path is waived and its tests skip).
#
#   check.sh [REPO] [ROOT]     (as root; REPO defaults to this checkout, ROOT to /tmp/fresh-root)
#
# Writes ROOT/out/{test,profile}.log and prints each command's exit code.
set -euo pipefail
repo="$(cd "${1:-$(dirname "$0")/../..}" && pwd)"
root="${2:-/tmp/fresh-root}"
suite="${SUITE:-bookworm}"
command -v debootstrap >/dev/null || apt-get install -y -q debootstrap >/dev/null
if [[ ! -x "$root/usr/bin/gcc" ]]; then
  debootstrap --variant=minbase --include=gcc,libc6-dev,git,ca-certificates "$suite" "$root" \
    >"/tmp/fresh-debootstrap.log" 2>&1
fi
rustup_home="${RUSTUP_HOME:-$HOME/.rustup}"
toolchain="$(rustup show active-toolchain | cut -d' ' -f1)"
mkdir -p "$root/opt/rustup" "$root/repo" "$root/out"
mounts=(proc sys dev opt/rustup repo)
cleanup() {
  for m in "${mounts[@]}"; do umount -l "$root/$m" 2>/dev/null || true; done
}
trap cleanup EXIT
mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys"
mount --rbind /dev "$root/dev"
mount --bind -o ro "$rustup_home" "$root/opt/rustup"
mount --bind -o ro "$repo" "$root/repo"
cp /etc/resolv.conf "$root/etc/resolv.conf"
# The network's trust as this machine has it (a registry reached through a proxy whose CA this
# machine trusts); no package comes with it.
cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
# Only the toolchain: its bin/ on PATH; cargo's home (registry, build cache) fresh inside.
tc="/opt/rustup/toolchains/$toolchain"
inside() {
  chroot "$root" /usr/bin/env -i HOME=/root PATH="$tc/bin:/usr/bin:/bin" \
    RUSTUP_TOOLCHAIN="$toolchain" TERM=dumb bash -c "$1"
}
inside 'for p in hwloc libhwloc-dev libudev-dev pkg-config xxhash libxxhash-dev; do
          dpkg -s $p >/dev/null 2>&1 && echo "present: $p"; done; echo "packages checked"
        rm -rf /root/hwceiling && git clone -q /repo /root/hwceiling' | tee "$root/out/setup.log"
set +e
inside 'cd /root/hwceiling && cargo test --workspace' >"$root/out/test.log" 2>&1
echo "cargo test --workspace: rc=$?"
inside 'cd /root/hwceiling && cargo run --release -- profile' >"$root/out/profile.log" 2>&1
echo "cargo run --release -- profile: rc=$?"
grep -E "^test result|skipped|FAILED" "$root/out/test.log" | sort | uniq -c | sort -rn | head -20
tail -5 "$root/out/profile.log"
