#!/bin/busybox sh
# /init of the NVMe test bed's initramfs: read the drives with hwceiling, run the long drive
# tests with seconds-long knobs, try every way the CLI allows to write to the drive with a
# filesystem and to the partitioned drive, checksum both before and after, hand the blank drives
# to vfio-pci with `hwceiling bind` and signal it at every step (tools/vm/bind-test.sh), detect
# and read as a user without privileges, and send every result to the host over the serial console (base64
# between markers). Then power off.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /out /mnt /tmp
cd /out
echo "===HWC-BOOTED==="

# What SPDK's userspace driver needs, before any test step: load vfio's and uio's modules (in
# dependency order: there is no modules.dep) and record what the guest then has: the IOMMU, the
# PCI drivers, each NVMe controller's IOMMU group and everything in it (driver, PCI header type:
# 0x00 an endpoint, 0x01 a bridge such as a root port), and the hugepages. Nothing is bound.
{
  echo "cmdline: $(cat /proc/cmdline)"
  echo "uptime_before_modules_s: $(cut -d' ' -f1 /proc/uptime)"
  mods="/lib/modules/$(uname -r)/kernel"
  for m in virt/lib/irqbypass drivers/vfio/vfio drivers/vfio/vfio_iommu_type1 \
    drivers/vfio/vfio_virqfd drivers/vfio/pci/vfio-pci-core drivers/vfio/pci/vfio-pci \
    drivers/uio/uio drivers/uio/uio_pci_generic; do
    if [ ! -f "$mods/$m.ko" ]; then
      echo "module ${m##*/}: missing"
    elif err="$(insmod "$mods/$m.ko" 2>&1)"; then
      echo "module ${m##*/}: ok"
    else
      echo "module ${m##*/}: failed: $err"
    fi
  done
  echo "uptime_after_modules_s: $(cut -d' ' -f1 /proc/uptime)"
  groups="$(ls /sys/kernel/iommu_groups 2>/dev/null | wc -l)"
  if [ "$groups" -gt 0 ]; then echo "iommu: on"; else echo "iommu: off"; fi
  echo "iommu_units: $(ls /sys/class/iommu 2>/dev/null | tr '\n' ' ')"
  echo "iommu_groups: $groups"
  echo "pci_drivers: $(ls /sys/bus/pci/drivers | tr '\n' ' ')"
  echo "dev_vfio: $(ls /dev/vfio 2>/dev/null | tr '\n' ' ')"
  for c in /sys/class/nvme/nvme*; do
    d="$(readlink -f "$c/device")"
    g="$(readlink "$d/iommu_group" 2>/dev/null)"
    echo "nvme $(basename "$c") serial=$(tr -d ' ' <"$c/serial") bdf=$(basename "$d")" \
      "numa_node=$(cat "$d/numa_node") iommu_group=${g:+$(basename "$g")}"
    [ -n "$g" ] || continue
    for m in "$d/iommu_group/devices"/*; do
      md="$(readlink -f "$m")"
      drv="$(readlink "$md/driver" 2>/dev/null)"
      hdr="$(dd if="$md/config" bs=1 skip=14 count=1 2>/dev/null | hexdump -e '1/1 "0x%02x"')"
      echo "  member $(basename "$md") driver=${drv:+$(basename "$drv")} header_type=$hdr" \
        "class=$(cat "$md/class")"
    done
  done
  grep -E '^(HugePages_|Hugepagesize)' /proc/meminfo
  for n in /sys/devices/system/node/node*; do
    echo "$(basename "$n") nr_hugepages_2048kB=$(cat "$n/hugepages/hugepages-2048kB/nr_hugepages")"
  done
  if grep -q ' hugetlbfs ' /proc/mounts; then
    echo "hugetlbfs_mounted: yes ($(grep ' hugetlbfs ' /proc/mounts | cut -d' ' -f2 | tr '\n' ' '))"
  else
    echo "hugetlbfs_mounted: no"
  fi
  echo "hugetlbfs_in_kernel: $(grep -q hugetlbfs /proc/filesystems && echo yes || echo no)"
  dmesg | grep -iE 'DMAR|IOMMU|remapping' | head -n 40 | sed 's/^/dmesg: /'
} >/out/iommu.txt 2>&1
# Each drive's config space and its bridges' up to the root bus, read as root: the test data of
# hwc-topology's config-space parser (crates/topology/tests/fixtures).
mkdir -p /out/pcie
for c in /sys/class/nvme/nvme*; do
  d="$(readlink -f "$c/device")"
  while [ -e "$d/config" ]; do
    cat "$d/config" >"/out/pcie/$(basename "$d").config"
    d="$(dirname "$d")"
  done
done

# The kernel numbers controllers in probe order: find each drive by its serial.
dev_of() {
  for c in /sys/class/nvme/nvme*; do
    s="$(tr -d ' ' <"$c/serial")"
    [ "$s" = "$1" ] && basename "$c"
  done
}
# Send the files /out holds that `find` matches ($@: its tests) to the host over the serial
# console, base64 between markers, then power off.
send_and_power_off() {
  for f in $(find /out -type f \( "$@" \) | sort); do
    echo "===HWC-BEGIN ${f#/out/}==="
    base64 "$f"
    echo "===HWC-END==="
  done
  echo "===HWC-DONE==="
  poweroff -f
}
if grep -q hwc_mode=compare /proc/cmdline; then
  # tools/nvme-reference/compare-vm.sh: hwceiling against fio on one blank drive, interleaved.
  ctrl="$(dev_of HWCN0A)"
  dev="/dev/${ctrl}n1"
  # hwceiling pins its I/O thread to the drive's NUMA node: fio runs on the same CPUs.
  cpus="$(cat "/sys/class/nvme/$ctrl/device/local_cpulist")"
  run_fio() {
    bw_kib="$(fio --name=ref --filename="$dev" --readonly --rw=read --bs="$bs" --iodepth="$qd" \
      --ioengine=io_uring --direct=1 --fixedbufs --size=64M --loops=5 --cpus_allowed="$cpus" \
      --output-format=terse --terse-version=3 2>>fio.err | cut -d';' -f7)"
    echo "fio $round $bs $qd $bw_kib" >>compare.txt
  }
  run_hwceiling() {
    o="/out/c-$round-$bs-$qd"
    hwceiling profile --paths nvme_read --target "$dev" --nvme-sizes "${bs}iB" \
      --queue-depths "$qd" --nvme-bytes 320MiB -o "$o" >/dev/null 2>>hwc.err
    gbps="$(awk '/^  gbps:$/ {f = 1} f && /median:/ {print $2; exit}' "$o"/hardware_profile_*.yaml)"
    echo "hwceiling $round $bs $qd $gbps" >>compare.txt
  }
  # Five rounds; the tool that goes first alternates, so neither always follows the other.
  for round in 1 2 3 4 5; do
    for bs in 128K 1M; do
      for qd in 16 32; do
        if [ $((round % 2)) -eq 1 ]; then
          run_fio
          run_hwceiling
        else
          run_hwceiling
          run_fio
        fi
      done
    done
  done
  for f in compare.txt fio.err hwc.err iommu.txt; do
    echo "===HWC-BEGIN $f==="
    base64 "$f"
    echo "===HWC-END==="
  done
  echo "===HWC-DONE==="
  poweroff -f
fi

if grep -q hwc_mode=bar /proc/cmdline; then
  # Developer-run (run.sh's HWC_VM_MODE=bar): NVMe DMA → the ivshmem device's BAR2 (a stand-in
  # for GPU BAR1) and → host RAM, back to back, on HWCN0A and HWCN0B (same root complex as the
  # BAR), pollers on node 0 and then on node 1; the drives go back to nvme afterwards.
  mkdir -p /run /var/run /var/tmp /dev/hugepages
  mount -t tmpfs tmpfs /tmp
  iv=""
  for d in /sys/bus/pci/devices/*; do
    [ "$(cat "$d/vendor"):$(cat "$d/device")" = "0x1af4:0x1110" ] && iv="$(basename "$d")"
  done
  drivers() {
    for c in /sys/bus/pci/devices/*; do
      [ -e "$c/class" ] && case "$(cat "$c/class")" in 0x010802) echo "$(basename "$c") $(basename "$(readlink "$c/driver")")" ;; esac
    done
  }
  {
    echo "ivshmem $iv node $(cat "/sys/bus/pci/devices/$iv/numa_node")"
    grep . "/sys/bus/pci/devices/$iv/resource" | head -3
    drivers
  } >bar-before.txt
  # The test bed's step, not hwceiling's: the BAR's memory decoding on (the gate asks for it).
  echo 1 >"/sys/bus/pci/devices/$iv/enable"
  # The gate refuses a BAR that holds registers (BAR0) and a device that is not enabled.
  hwceiling profile --paths nvme_bar1 -o /out/bar-refused --spdk-dir /opt/spdk \
    --spdk-drives HWCN0A --p2p-bar "$iv/0" >bar-refused.txt 2>&1
  echo "rc=$?" >>bar-refused.txt
  t0="$(cut -d' ' -f1 /proc/uptime)"
  hwceiling profile --paths nvme_bar1,nvme_read -o /out/bar --spdk-dir /opt/spdk \
    --engines spdk-native,spdk-perf --spdk-drives HWCN0A,HWCN0B --p2p-bar "$iv/2" \
    --nvme-sizes 128KiB \
    --queue-depths 16 --nvme-bytes "$(sed -n 's/.*hwc_bytes=\([^ ]*\).*/\1/p' /proc/cmdline)" \
    >bar.txt 2>&1
  echo "rc=$? seconds=$(awk -v a="$t0" -v b="$(cut -d' ' -f1 /proc/uptime)" 'BEGIN{print b-a}')" >>bar.txt
  echo 0 >"/sys/bus/pci/devices/$iv/enable"
  { drivers; echo "journal: $([ -e /run/hwceiling/changes.json ] && echo left || echo none)"; } >bar-after.txt
  send_and_power_off -name '*.txt' -o -name '*.yaml' -o -name '*.md' -o -name '*.config'
fi

if grep -q hwc_mode=spdk /proc/cmdline; then
  # Developer-run (needs an SPDK build: run.sh's HWC_SPDK_DIR): the kernel engine and spdk-perf
  # side by side on the blank drives, which hwceiling hands to vfio-pci for the SPDK cases and
  # puts back; a write sweep on one of them. tools/vm/README.md says how to run it.
  # SPDK claims a device with a lock file in /var/tmp.
  mkdir -p /run /var/run /var/tmp /dev/hugepages
  mount -t tmpfs tmpfs /tmp
  state() {
    for c in /sys/class/nvme/nvme*; do
      echo "$(tr -d ' ' <"$c/serial") $(basename "$(readlink -f "$c/device")") $(basename "$(readlink "$c/device/driver")")"
    done | sort
    grep -E '^HugePages_(Total|Free)' /proc/meminfo
    echo "hugetlbfs mounts: $(grep -c hugetlbfs /proc/mounts)"
    echo "journal: $([ -e /run/hwceiling/changes.json ] && echo left || echo none)"
  }
  state >spdk-before.txt
  a="$(basename "$(readlink -f "/sys/class/nvme/$(dev_of HWCN0A)/device")")"
  hwceiling bind --drives HWCN0A -- /opt/spdk/build/bin/spdk_nvme_perf -q 16 -o 131072 -w read \
    -t 1 -c 0x1 -r "trtype:PCIe traddr:$a" >spdk-bind-perf.txt 2>&1
  echo "rc=$?" >>spdk-bind-perf.txt
  sleep 2
  t0="$(cut -d' ' -f1 /proc/uptime)"
  hwceiling profile --paths nvme_read,nvme_write -o /out/spdk --spdk-dir /opt/spdk \
    --spdk-drives HWCN0A,HWCN1A --allow-destructive-writes --write-drives HWCN1A \
    --nvme-sizes "$(sed -n 's/.*hwc_sizes=\([^ ]*\).*/\1/p' /proc/cmdline)" --queue-depths 16 \
    --nvme-bytes "$(sed -n 's/.*hwc_bytes=\([^ ]*\).*/\1/p' /proc/cmdline)" >spdk.txt 2>&1
  echo "rc=$? seconds=$(awk -v a="$t0" -v b="$(cut -d' ' -f1 /proc/uptime)" 'BEGIN{print b-a}')" >>spdk.txt
  sleep 2
  state >spdk-after.txt
  # The native engine (a build with --features spdk) interrupted: SIGTERM while its pollers run
  # on HWCN0A; the drive must come back as after a whole run.
  if hwceiling engines 2>/dev/null | grep -q '^spdk-native'; then
    hwceiling profile --paths nvme_read -o /out/spdk-term --engines spdk-native \
      --spdk-drives HWCN0A --nvme-sizes 128KiB --queue-depths 16 --nvme-bytes 4GiB \
      >spdk-native-term.out 2>&1 &
    pid=$!
    i=0
    until [ "$(basename "$(readlink "/sys/bus/pci/devices/$a/driver")")" = vfio-pci ] || [ $i -ge 600 ]; do
      sleep 0.1
      i=$((i + 1))
    done
    sleep 4
    at="$(basename "$(readlink "/sys/bus/pci/devices/$a/driver")")"
    kill -TERM "$pid"
    wait "$pid"
    rc=$?
    sleep 1
    { echo "rc=$rc"; echo "at-signal $at"; state; cat spdk-native-term.out; } >spdk-native-term.txt
    # Two signals: the process exits at once (it cannot unbind drives it holds) and leaves the
    # journal; `hwceiling restore` then puts the drive back.
    hwceiling profile --paths nvme_read -o /out/spdk-term2 --engines spdk-native \
      --spdk-drives HWCN0A --nvme-sizes 128KiB --queue-depths 16 --nvme-bytes 4GiB \
      >spdk-native-term2.out 2>&1 &
    pid=$!
    i=0
    until [ "$(basename "$(readlink "/sys/bus/pci/devices/$a/driver")")" = vfio-pci ] || [ $i -ge 600 ]; do
      sleep 0.1
      i=$((i + 1))
    done
    sleep 4
    kill -TERM "$pid"
    sleep 0.2
    kill -TERM "$pid"
    wait "$pid"
    rc=$?
    {
      echo "rc=$rc"
      echo "after-exit"
      state
      hwceiling restore 2>&1
      echo "restore-rc=$?"
      echo "after-restore"
      state
      cat spdk-native-term2.out
    } >spdk-native-term2.txt
  fi
  send_and_power_off -name '*.txt' -o -name '*.yaml' -o -name '*.md' -o -name '*.config'
fi

FS="$(dev_of HWCFS)"
PART="$(dev_of HWCPART)"
BLANK="$(dev_of HWCN1A)"
for c in /sys/class/nvme/nvme*; do
  echo "$(basename "$c") $(tr -d ' ' <"$c/serial") $(basename "$(readlink -f "$c/device")")"
done >drives.txt
sha256sum "/dev/${FS}n1" "/dev/${PART}n1" | sed 's|/dev/nvme[0-9]*n1|&|' >sums-before.txt

hwceiling detect --format json >detect.json 2>detect.err
echo "rc=$?" >>detect.err

# Path 1 on the three blank drives, Step 3's latency probes, and a short write sweep on one.
hwceiling profile --paths nvme_read -o /out/read --drives HWCN0A,HWCN0B,HWCN1A \
  --nvme-sizes 128KiB,1MiB --nvme-bytes 8MiB >read.txt 2>&1
echo "rc=$?" >>read.txt
# The long drive tests, with knobs of seconds: the read-only ones on a blank drive, gc-settle
# (which writes) with the write sweep on the blank drive named for writes.
hwceiling profile --paths nvme_read -o /out/long --drives HWCN0A --nvme-sizes 1MiB \
  --queue-depths 16 --nvme-bytes 4MiB --nvme-long-tests read-cache,power-states \
  --nvme-idle-max-s 1 >long.txt 2>&1
echo "rc=$?" >>long.txt
hwceiling profile --paths nvme_write -o /out/write --allow-destructive-writes --drives HWCN1A \
  --nvme-sizes 1MiB --queue-depths 16 --nvme-bytes 8MiB --nvme-long-tests gc-settle \
  --nvme-gc-write-s 4 --nvme-gc-settle-max-s 5 >write.txt 2>&1
echo "rc=$?" >>write.txt

# Every way to ask for writes to the drives that hold data. Each must be refused.
attempt() {
  name="$1"
  shift
  hwceiling profile --paths nvme_write -o "/out/safety-$name" --nvme-sizes 1MiB \
    --queue-depths 16 --nvme-bytes 8MiB "$@" >"safety-$name.txt" 2>&1
  echo "rc=$?" >>"safety-$name.txt"
}
for kind in FS PART; do
  if [ "$kind" = FS ]; then ctrl="$FS"; serial=HWCFS; else ctrl="$PART"; serial=HWCPART; fi
  bdf="$(basename "$(readlink -f "/sys/class/nvme/$ctrl/device")")"
  attempt "$kind-serial" --allow-destructive-writes --drives "$serial"
  attempt "$kind-namespace" --allow-destructive-writes --drives "/dev/${ctrl}n1"
  attempt "$kind-controller" --allow-destructive-writes --drives "/dev/$ctrl"
  attempt "$kind-bdf" --allow-destructive-writes --drives "$bdf"
  attempt "$kind-target" --allow-destructive-writes --target "/dev/${ctrl}n1"
  attempt "$kind-noflag" --drives "$serial"
  attempt "$kind-noflag-target" --target "/dev/${ctrl}n1"
  attempt "$kind-with-blank" --allow-destructive-writes --drives "HWCN1A,$serial"
  attempt "$kind-write-drives" --allow-destructive-writes --write-drives "HWCN1A,$serial"
  attempt "$kind-gc" --allow-destructive-writes --drives "$serial" --nvme-long-tests gc-settle \
    --nvme-gc-write-s 3 --nvme-gc-settle-max-s 1
  attempt "$kind-gc-write-drives" --allow-destructive-writes --write-drives "$serial" \
    --nvme-long-tests gc-settle --nvme-gc-write-s 3 --nvme-gc-settle-max-s 1
  attempt "$kind-gc-noflag" --drives "$serial" --nvme-long-tests gc-settle \
    --nvme-gc-write-s 3 --nvme-gc-settle-max-s 1
done
attempt PART-partition --allow-destructive-writes --drives "/dev/${PART}n1p1"
attempt write-not-read --allow-destructive-writes --drives HWCN0A --write-drives HWCN1A
attempt PART-partition-target --allow-destructive-writes --target "/dev/${PART}n1p1"
# Mounted (read-only, so the mount itself writes nothing).
if mount -t ext4 -o ro,noload "/dev/${FS}n1" /mnt 2>mount.err; then
  attempt FS-mounted --allow-destructive-writes --drives HWCFS
  # A node whose boot drive is NVMe: every drive read, the mounted one too, and writes only to
  # the blank drive named with --write-drives. A complete run as far as drives go. The blank
  # drives it only reads keep their bytes.
  sha256sum "/dev/$(dev_of HWCN0A)n1" "/dev/$(dev_of HWCN0B)n1" >apart-sums-before.txt
  hwceiling profile --paths nvme_read,nvme_write -o /out/apart --allow-destructive-writes \
    --write-drives HWCN1A --nvme-sizes 1MiB --queue-depths 16 --nvme-bytes 8MiB >apart.txt 2>&1
  echo "rc=$?" >>apart.txt
  sha256sum "/dev/$(dev_of HWCN0A)n1" "/dev/$(dev_of HWCN0B)n1" >apart-sums-after.txt
  umount /mnt
else
  echo "mount failed: $(cat mount.err)" >safety-FS-mounted.txt
fi

sync
sha256sum "/dev/${FS}n1" "/dev/${PART}n1" >sums-after.txt

# A user without privileges: detection from sysfs, and a profile whose drive reads and admin
# commands are refused by the kernel (waivers and sysfs fallbacks, not failures).
# `hwceiling bind` on the blank drives: refusals, signals at every step, SIGKILL and restore.
. /bind-test.sh

mkdir -p /etc
echo 'root:x:0:0:root:/:/bin/sh' >/etc/passwd
echo 'root:x:0:' >/etc/group
echo 'hwc:x:1000:1000:hwc:/out/nonroot:/bin/sh' >>/etc/passwd
echo 'hwc:x:1000:' >>/etc/group
mkdir -p /out/nonroot
chown 1000:1000 /out/nonroot
su hwc -c 'id' >nonroot-id.txt 2>&1
su hwc -c 'hwceiling detect --format json' >nonroot-detect.json 2>nonroot-detect.err
echo "rc=$?" >>nonroot-detect.err
su hwc -c 'hwceiling profile --paths nvme_read -o /out/nonroot --drives HWCN0A \
  --nvme-sizes 1MiB --queue-depths 16 --nvme-bytes 4MiB \
  --nvme-long-tests read-cache,power-states --nvme-idle-max-s 0.01' >nonroot.txt 2>&1
echo "rc=$?" >>nonroot.txt

send_and_power_off -name '*.txt' -o -name '*.yaml' -o -name '*.md' -o -name '*detect.*' \
  -o -name '*.config'
