#!/usr/bin/env bash
# Boot the NVMe test bed: QEMU 7.2 (TCG) on a q35 machine with two NUMA nodes, two PCIe expander
# root complexes (pxb-pcie bound to node 0 and node 1), a root port per drive, and five emulated
# NVMe controllers backed by image files, behind QEMU's emulated Intel IOMMU (what SPDK's
# userspace driver needs to bind a drive to vfio-pci inside the guest):
#   node 0's root complex (bus 0x10): HWCN0A (MDTS 5 = 128 KiB), HWCN0B (MDTS 6 = 256 KiB),
#                                      HWCFS (an ext4 filesystem)
#   node 1's root complex (bus 0x20): HWCN1A (MDTS 7 = 512 KiB), HWCPART (an MBR partition table)
# The initramfs holds a static busybox, the given hwceiling binary and its shared libraries, and
# the kernel's vfio and uio modules (loaded by /init), tools/vm/init.sh as /init and
# tools/vm/bind-test.sh, which it runs. The results come back over the serial console and are written to OUTDIR/results/.
#
# Usage: tools/vm/run.sh HWCEILING_BINARY OUTDIR
# With HWC_VM_MODE=compare, fio (from this machine, with its libraries) goes into the initramfs
# and the VM runs tools/nvme-reference/compare-vm.sh's comparison instead of the test.
# With HWC_VM_MODE=spdk and HWC_SPDK_DIR (an SPDK build: ../shared/tools/spdk/build.sh), its
# spdk_nvme_perf and libraries go into the initramfs (under /opt/spdk) and the VM profiles the
# blank drives with every engine built side by side (HWC_SPDK_SIZES: the block sizes, default
# 128KiB; HWC_SPDK_BYTES: --nvme-bytes, default 1GiB); the guest gets 2 GiB for hugepages.
# HWC_VM_IOMMU=1|0: the emulated IOMMU and `intel_iommu=on` (default 1; 0 in compare mode, whose
# recorded numbers were measured without it).
# With HWC_VM_MODE=bar (and HWC_SPDK_DIR, and a hwceiling built with --features spdk), node 0's
# root complex also holds an ivshmem-plain device whose 64 MiB RAM-backed BAR2 (a file,
# work/ivshmem.bin) stands in for GPU BAR1, HWCN0A and HWCN0B hold a random pattern instead of
# zeros, and the VM runs the NVMe → BAR path on them (tools/vm/README.md).
# Exit: 0 the VM ran to the end; 3 the Debian packages could not be fetched; 1 anything else.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin="$(readlink -f "$1")"
out="$(mkdir -p "$2" && cd "$2" && pwd)"
timeout_s="${HWC_VM_TIMEOUT:-900}"
cache="$("$here/fetch.sh")" || exit 3
root="$cache/root"
qemu="$root/usr/bin/qemu-system-x86_64"
export LD_LIBRARY_PATH="$root/usr/lib/x86_64-linux-gnu:$root/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export QEMU_MODULE_DIR="$root/usr/lib/x86_64-linux-gnu/qemu"
bb="$root/bin/busybox"

work="$out/work"
rm -rf "$work" "$out/results"
mkdir -p "$work/initramfs" "$out/results"

# Drive images: blank ones are sparse; the two that hold data are what the safety test protects.
for d in n0a n0b n1a fs part; do
  truncate -s 64M "$work/$d.img"
done
# mkfs.ext4 lives in /sbin, which a user's PATH (and a chroot's) may leave out.
mkfs_ext4="$(PATH="$PATH:/usr/sbin:/sbin" command -v mkfs.ext4 || true)"
if [[ -n "$mkfs_ext4" ]]; then
  "$mkfs_ext4" -q -F -L hwcfs "$work/fs.img"
else
  # The ext4 superblock magic at 0x438 is what the gate looks for.
  printf '\x53\xef' | dd of="$work/fs.img" bs=1 seek=$((0x438)) conv=notrunc status=none
fi
# An MBR with one Linux partition (type 0x83) from sector 2048 to the end, and the boot signature.
{
  printf '\x00\x20\x21\x00\x83\xfe\xff\xff'   # status, CHS start, type, CHS end
  printf '\x00\x08\x00\x00'                   # first LBA 2048
  printf '\x00\xf8\x01\x00'                   # 129024 sectors
} | dd of="$work/part.img" bs=1 seek=446 conv=notrunc status=none
printf '\x55\xaa' | dd of="$work/part.img" bs=1 seek=510 conv=notrunc status=none
printf 'hwceiling test data that must survive\n' |
  dd of="$work/part.img" bs=1 seek=$((2048 * 512 + 4096)) conv=notrunc status=none

# The initramfs: busybox, hwceiling (debug info stripped) and the libraries it links.
ir="$work/initramfs"
mkdir -p "$ir"/{bin,dev,proc,sys,tmp,lib64,lib/x86_64-linux-gnu}
cp "$bb" "$ir/bin/busybox"
if command -v objcopy >/dev/null; then
  objcopy --strip-debug "$bin" "$ir/bin/hwceiling"
else
  cp "$bin" "$ir/bin/hwceiling"
fi
mode="${HWC_VM_MODE:-test}"
programs=("$bin")
if [[ "$mode" == compare ]]; then
  fio="$(command -v fio)" || { echo "run.sh: compare mode needs fio (apt-get install -y fio)" >&2; exit 1; }
  cp "$fio" "$ir/bin/fio"
  programs+=("$fio")
fi
if [[ "$mode" == spdk || "$mode" == bar ]]; then
  spdk="${HWC_SPDK_DIR:?run.sh: $mode mode needs HWC_SPDK_DIR (an SPDK build folder)}"
  mkdir -p "$ir/opt/spdk/build/bin"
  cp "$spdk/build/bin/spdk_nvme_perf" "$ir/opt/spdk/build/bin/"
  strip --strip-debug "$ir/opt/spdk/build/bin/spdk_nvme_perf" 2>/dev/null || true
  programs+=("$spdk/build/bin/spdk_nvme_perf")
  export LD_LIBRARY_PATH="$spdk/build/lib:$spdk/dpdk/build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # SPDK's env init loads OpenSSL's configuration and fails without it.
  mkdir -p "$ir/usr/lib/ssl" "$ir/etc/ssl"
  cp -L /etc/ssl/openssl.cnf "$ir/etc/ssl/openssl.cnf"
  ln -sf /etc/ssl/openssl.cnf "$ir/usr/lib/ssl/openssl.cnf"
fi
for p in "${programs[@]}"; do ldd "$p"; done |
  awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' | sort -u | while read -r lib; do
  case "$lib" in
    # SPDK's own libraries go where the guest's loader looks.
    "${HWC_SPDK_DIR:-/nonexistent}"/*) dst="/lib/x86_64-linux-gnu/$(basename "$lib")" ;;
    *) dst="$lib" ;;
  esac
  cp -L "$lib" "$ir$dst" 2>/dev/null || { mkdir -p "$ir$(dirname "$dst")"; cp -L "$lib" "$ir$dst"; }
done
[[ "$mode" != spdk && "$mode" != bar ]] || strip --strip-debug "$ir"/lib/x86_64-linux-gnu/libspdk_* 2>/dev/null || true
cp "$here/init.sh" "$ir/init"
cp "$here/bind-test.sh" "$ir/bind-test.sh"
cp "$here/fake-perf.sh" "$ir/fake-perf.sh"
chmod +x "$ir/init" "$ir/bin/hwceiling"
# vfio's and uio's modules, in the order /init loads them (there is no modules.dep); a module the
# kernel package lacks (vfio_virqfd is folded into vfio in later kernels) is left out and /init
# reports it missing.
kver="$(cat "$cache/kernel-version")"
mods="$root/lib/modules/$kver/kernel"
for m in virt/lib/irqbypass drivers/vfio/vfio drivers/vfio/vfio_iommu_type1 \
  drivers/vfio/vfio_virqfd drivers/vfio/pci/vfio-pci-core drivers/vfio/pci/vfio-pci \
  drivers/uio/uio drivers/uio/uio_pci_generic; do
  [[ -f "$mods/$m.ko" ]] || continue
  mkdir -p "$ir/lib/modules/$kver/kernel/$(dirname "$m")"
  cp "$mods/$m.ko" "$ir/lib/modules/$kver/kernel/$m.ko"
done
(cd "$ir" && find . | "$bb" cpio -o -H newc 2>/dev/null) >"$work/initramfs.cpio"

drive() { # id serial mdts bus
  echo "-drive file=$work/$1.img,if=none,id=d$1,format=raw,aio=threads"
  echo "-device nvme,serial=$2,mdts=$3,drive=d$1,bus=$4"
}
iommu="${HWC_VM_IOMMU:-$([[ "$mode" == compare ]] && echo 0 || echo 1)}"
cmdline="console=ttyS0 rdinit=/init panic=-1 quiet loglevel=1 hwc_mode=$mode"
node_mib=512
cpu=()
if [[ "$mode" == spdk || "$mode" == bar ]]; then
  node_mib=1024
  cmdline+=" hwc_sizes=${HWC_SPDK_SIZES:-128KiB} hwc_bytes=${HWC_SPDK_BYTES:-1GiB}"
  # The instructions an SPDK built with -march=native uses.
  cpu=(-cpu max)
fi
args=(
  -machine q35 -accel tcg "${cpu[@]}" -smp 2 -m $((2 * node_mib))
  -object memory-backend-ram,id=m0,size=${node_mib}M -object memory-backend-ram,id=m1,size=${node_mib}M
  -numa node,nodeid=0,cpus=0,memdev=m0 -numa node,nodeid=1,cpus=1,memdev=m1
  -nodefaults -no-user-config -display none -no-reboot
  -L "$root/usr/share/qemu" -L "$root/usr/share/seabios"
  -serial "file:$out/console.log"
  -kernel "$cache/vmlinuz" -initrd "$work/initramfs.cpio"
)
# The IOMMU comes before the other PCI devices. aw-bits=48: with the default 39, SPDK's DPDK
# fails with "IOVA exceeding limits of current DMA mask" (its base address 0x200000000000 lies
# above 2^39).
if [[ "$iommu" == 1 ]]; then
  args+=(-device intel-iommu,intremap=on,aw-bits=48)
  cmdline+=" intel_iommu=on"
fi
args+=(
  -append "$cmdline"
  -device pxb-pcie,id=pxb0,bus_nr=16,numa_node=0,bus=pcie.0
  -device pxb-pcie,id=pxb1,bus_nr=32,numa_node=1,bus=pcie.0
  -device pcie-root-port,id=rp0,bus=pxb0,chassis=1,addr=0.0
  -device pcie-root-port,id=rp1,bus=pxb0,chassis=2,addr=1.0
  -device pcie-root-port,id=rp2,bus=pxb0,chassis=3,addr=2.0
  -device pcie-root-port,id=rp3,bus=pxb1,chassis=4,addr=0.0
  -device pcie-root-port,id=rp4,bus=pxb1,chassis=5,addr=1.0
)
# shellcheck disable=SC2207
args+=($(drive n0a HWCN0A 5 rp0) $(drive n0b HWCN0B 6 rp1) $(drive fs HWCFS 7 rp2))
# shellcheck disable=SC2207
args+=($(drive n1a HWCN1A 7 rp3) $(drive part HWCPART 5 rp4))
if [[ "$mode" == bar ]]; then
  # The drives the BAR path reads hold data that differs from block to block, so that a block
  # landing in the wrong place is seen.
  head -c 64M /dev/urandom >"$work/n0a.img"
  head -c 64M /dev/urandom >"$work/n0b.img"
  rm -f "$work/ivshmem.bin"
  truncate -s 64M "$work/ivshmem.bin"
  args+=(
    -device pcie-root-port,id=rp5,bus=pxb0,chassis=6,addr=3.0
    -object memory-backend-file,id=shm0,mem-path=$work/ivshmem.bin,size=64M,share=on
    -device ivshmem-plain,memdev=shm0,bus=rp5
  )
fi

sha256sum "$work/fs.img" "$work/part.img" >"$out/results/host-sums-before.txt"
start=$(date +%s)
set +e
timeout "$timeout_s" "$qemu" "${args[@]}" 2>"$out/qemu.err"
rc=$?
set -e
echo "$(( $(date +%s) - start ))" >"$out/results/vm-seconds.txt"
sha256sum "$work/fs.img" "$work/part.img" >"$out/results/host-sums-after.txt"
if [[ $rc -ne 0 ]]; then
  echo "run.sh: qemu exited with $rc (see $out/qemu.err and $out/console.log)" >&2
  exit 1
fi
# Unpack the files the VM sent between markers.
tr -d '\r' <"$out/console.log" | awk -v dir="$out/results" '
  /^===HWC-BEGIN / { name = $2; sub(/===$/, "", name); gsub("/", "__", name); file = dir "/" name ".b64"; next }
  /^===HWC-END===/ { close(file); file = ""; next }
  file != "" { print > file }
'
for f in "$out/results"/*.b64; do
  [[ -e "$f" ]] || continue
  base64 -d <"$f" >"${f%.b64}" && rm "$f"
done
grep -q "===HWC-DONE===" "$out/console.log" || { echo "run.sh: the VM did not finish (see $out/console.log)" >&2; exit 1; }
if [[ "$mode" == bar ]]; then
  # From outside the guest: the BAR's backing file must hold, in each 128 KiB slot the last BAR
  # case used (2 drives × QD 32), a whole block of one of the drives.
  python3 - "$work/ivshmem.bin" "$work/n0a.img" "$work/n0b.img" >"$out/results/host-check.txt" <<'PY'
import hashlib, sys
blk = 128 << 10
seen = {}
for name in sys.argv[2:]:
    data = open(name, "rb").read()
    for i in range(0, len(data), blk):
        seen[hashlib.sha256(data[i:i + blk]).digest()] = (name.rsplit("/", 1)[1], i // blk)
bar = open(sys.argv[1], "rb").read()
slots = 64
hits = [seen.get(hashlib.sha256(bar[i * blk:(i + 1) * blk]).digest()) for i in range(slots)]
print(f"ivshmem slots holding a drive block: {sum(h is not None for h in hits)} of {slots}")
print("drives: " + ", ".join(sorted({h[0] for h in hits if h})))
PY
fi
echo "$out/results"
