#!/usr/bin/env bash
# Fetch what the NVMe VM test bed needs from Debian's packages, without installing anything:
# QEMU 7.2 (its accelerator modules, and the libraries this machine lacks), its firmware, a cloud
# kernel whose NVMe driver is built in (its modules too: run.sh puts vfio's and uio's into the
# guest), and a static busybox. Everything is unpacked with `dpkg -x` into $HWC_VM_CACHE
# (default: target/vm), so the machine's own packages stay as they are (installing
# qemu-system-x86 with apt would replace a newer qemu-utils).
#
# Usage: tools/vm/fetch.sh            # idempotent; prints the cache folder on success
# Exit status: 0 ready, 1 a package could not be fetched (the VM test then says SKIPPED).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cache="${HWC_VM_CACHE:-$repo/target/vm}"
root="$cache/root"
debs="$cache/debs"
stamp="$cache/ready"
# Ready: the stamp, QEMU, and the kernel's vfio modules (a cache from before they were needed
# is unpacked again from its .deb files; nothing is downloaded twice).
kver_file="$cache/kernel-version"
if [[ -f "$stamp" && -x "$root/usr/bin/qemu-system-x86_64" && -f "$kver_file" &&
  -f "$root/lib/modules/$(cat "$kver_file")/kernel/drivers/vfio/pci/vfio-pci.ko" ]]; then
  echo "$cache"
  exit 0
fi
mkdir -p "$debs" "$root"
cd "$debs"

installed() {
  dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}

# The kernel package behind the cloud meta-package (linux-image-6.1.0-NN-cloud-amd64).
kernel_pkg="$(apt-cache depends linux-image-cloud-amd64 2>/dev/null |
  awk '/Depends: linux-image-[0-9]/ {print $2; exit}')"
if [[ -z "$kernel_pkg" ]]; then
  apt-get update -qq >/dev/null 2>&1 || true
  kernel_pkg="$(apt-cache depends linux-image-cloud-amd64 2>/dev/null |
    awk '/Depends: linux-image-[0-9]/ {print $2; exit}')"
fi
[[ -n "$kernel_pkg" ]] || { echo "fetch.sh: no linux-image-cloud-amd64 in the package lists" >&2; exit 1; }

want=(qemu-system-x86 qemu-system-common qemu-system-data seabios busybox-static "$kernel_pkg")
# QEMU's shared libraries, and theirs, that this machine does not have (a fixpoint).
queue=($(apt-cache depends qemu-system-x86 | awk '/Depends: lib/ {print $2}'))
seen=" "
while ((${#queue[@]})); do
  p="${queue[0]}"
  queue=("${queue[@]:1}")
  [[ "$seen" == *" $p "* ]] && continue
  seen+="$p "
  installed "$p" && continue
  want+=("$p")
  queue+=($(apt-cache depends "$p" | awk '/Depends: lib/ {print $2}'))
done

for p in "${want[@]}"; do
  if ! ls "${p}"_*.deb >/dev/null 2>&1; then
    apt-get download -q "$p" >/dev/null 2>&1 || {
      apt-get update -qq >/dev/null 2>&1 || true
      apt-get download -q "$p" >/dev/null || { echo "fetch.sh: cannot download $p" >&2; exit 1; }
    }
  fi
done
for d in ./*.deb; do
  dpkg -x "$d" "$root"
done
kernel="$(ls "$root"/boot/vmlinuz-*-cloud-amd64 | head -n1)"
[[ -f "$kernel" ]] || { echo "fetch.sh: no kernel unpacked" >&2; exit 1; }
cp "$kernel" "$cache/vmlinuz"
# Its modules (run.sh puts vfio's and uio's into the initramfs; the kernel has no modules.dep).
kver="${kernel##*/vmlinuz-}"
[[ -f "$root/lib/modules/$kver/kernel/drivers/vfio/pci/vfio-pci.ko" ]] ||
  { echo "fetch.sh: no vfio-pci module for kernel $kver" >&2; exit 1; }
echo "$kver" >"$kver_file"
printf '%s\n' "${want[@]}" >"$stamp"
echo "$cache"
