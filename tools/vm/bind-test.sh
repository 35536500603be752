#!/bin/busybox sh
# Sourced by init.sh (needs dev_of): `hwceiling bind` on the VM's drives, inside the VM only.
# Refusals of the drives with data or in use; a bind whose command sees the drives on vfio-pci
# and everything put back after; SIGTERM/SIGINT at every step (hugepages, recorded, unbound,
# bound, while the command runs), a second signal, and SIGKILL followed by `hwceiling restore`.
# Writes bind-*.txt into the current folder; the host test (crates/hwceiling/tests/vm.rs) reads
# them.
BLANK_A="$(dev_of HWCN0A)"
BLANK_B="$(dev_of HWCN1A)"
bdf_of() { basename "$(readlink -f "/sys/class/nvme/$1/device")"; }
A_BDF="$(bdf_of "$BLANK_A")"
B_BDF="$(bdf_of "$BLANK_B")"
drv() { d="/sys/bus/pci/devices/$1/driver"; [ -e "$d" ] && basename "$(readlink -f "$d")" || echo none; }
hp() { cat /sys/devices/system/node/node*/hugepages/hugepages-2048kB/nr_hugepages | tr '\n' ' '; }
state() { echo "drivers $(drv "$A_BDF") $(drv "$B_BDF") journal $([ -e /run/hwceiling/changes.json ] && echo left || echo none) hugepages $(hp)"; }
# The helpers again, for the commands run under `hwceiling bind`.
cat >/tmp/fns.sh <<'FNS'
drv() { d="/sys/bus/pci/devices/$1/driver"; [ -e "$d" ] && basename "$(readlink -f "$d")" || echo none; }
hp() { cat /sys/devices/system/node/node*/hugepages/hugepages-2048kB/nr_hugepages | tr '\n' ' '; }
FNS
# Each drive's serial and checksum (controller numbers may change when a drive comes back).
sums() {
  i=0
  until [ "$(ls /dev/nvme*n1 2>/dev/null | wc -l)" -ge 5 ] || [ $i -ge 100 ]; do sleep 0.1; i=$((i + 1)); done
  for c in /sys/class/nvme/nvme*; do
    echo "$(tr -d ' ' <"$c/serial") $(sha256sum <"/dev/$(basename "$c")n1" | cut -d' ' -f1)"
  done | sort
}
sums >bind-sums-before.txt
state >bind-state-before.txt

refuse() { # name args...
  n="$1"; shift
  hwceiling bind --hugepages-mib 8 "$@" -- true >"bind-refuse-$n.txt" 2>&1
  echo "rc=$?" >>"bind-refuse-$n.txt"
  state >>"bind-refuse-$n.txt"
}
refuse fs --drives HWCFS
refuse part --drives HWCPART
refuse fs-with-blank --drives HWCN0A,HWCFS
if mount -t ext4 -o ro,noload "/dev/$(dev_of HWCFS)n1" /mnt 2>/dev/null; then
  refuse fs-mounted --drives HWCFS
  umount /mnt
fi
sleep 60 <"/dev/${BLANK_A}n1" &
holder=$!
refuse held --drives HWCN0A
kill "$holder"
wait "$holder" 2>/dev/null
refuse uio --drives HWCN0A --driver uio_pci_generic

# A bind whose command looks at the drives, then everything back.
cat >/tmp/inside.sh <<INSIDE
echo "inside \$(drv $A_BDF) \$(drv $B_BDF) vfio-groups \$(ls /dev/vfio | grep -c '^[0-9]') hugetlbfs \$(grep -c hugetlbfs /proc/mounts) hugepages \$(hp)"
exit 7
INSIDE
hwceiling bind --drives HWCN0A,HWCN1A --hugepages-mib 8 -- sh -c ". /tmp/fns.sh; . /tmp/inside.sh" \
  >bind-ok.txt 2>&1
echo "rc=$?" >>bind-ok.txt
state >>bind-ok.txt

# A signal at each step: wait for the step's line, then signal (the step delay keeps the window
# open).
signal_at() { # name step signal [second]
  n="$1"; step="$2"; sig="$3"
  HWCEILING_STEP_DELAY_MS=2000 hwceiling bind --drives HWCN0A --hugepages-mib 8 -- sleep 30 \
    >"bind-sig-$n.out" 2>"bind-sig-$n.err" &
  pid=$!
  i=0
  until cat "bind-sig-$n.out" "bind-sig-$n.err" 2>/dev/null | grep -q "$step" || [ $i -ge 300 ]; do
    sleep 0.1
    i=$((i + 1))
  done
  at="$(state)"
  kill "-$sig" "$pid"
  [ -n "$4" ] && { sleep 0.2; kill "-$sig" "$pid"; }
  wait "$pid"
  rc=$?
  { echo "rc=$rc"; echo "at-signal $at"; echo "after $(state)"; } >"bind-sig-$n.txt"
  cat "bind-sig-$n.err" >>"bind-sig-$n.txt"
}
signal_at hugepages-term "hugepages:" TERM
signal_at recorded-int ": recorded" INT
signal_at unbound-term ": unbound" TERM
signal_at bound-int ": bound" INT
signal_at running-term "moved from" TERM
signal_at second-term ": unbound" TERM twice
# SIGKILL after binding: the journal stays, runs refuse, `hwceiling restore` puts it back.
HWCEILING_STEP_DELAY_MS=500 hwceiling bind --drives HWCN0A --hugepages-mib 8 -- sleep 31 \
  >bind-kill.out 2>bind-kill.err &
pid=$!
i=0
until grep -q "moved from" bind-kill.out 2>/dev/null || [ $i -ge 300 ]; do sleep 0.1; i=$((i + 1)); done
kill -KILL "$pid"
wait "$pid" 2>/dev/null
# The killed run's command is left behind: end it (busybox has no pkill).
for p in /proc/[0-9]*; do
  [ "$(tr '\0' ' ' <"$p/cmdline" 2>/dev/null)" = "sleep 31 " ] && kill "${p#/proc/}"
done
{
  echo "after-kill $(state)"
  hwceiling profile --engines null -o /out/bind-refused >refused.out 2>&1
  echo "profile-rc=$?"
  cat refused.out
  hwceiling restore 2>&1
  echo "restore-rc=$?"
  echo "after-restore $(state)"
} >bind-kill.txt
# The spdk-perf engine in a profile, with tools/vm/fake-perf.sh standing in for spdk_nvme_perf:
# the drives named with --spdk-drives go to vfio-pci for its cases only (the kernel engine reads
# them first, on nvme) and come back; a SIGTERM while "perf" runs puts them back too.
mkdir -p /opt/fakespdk/build/bin
cp /fake-perf.sh /opt/fakespdk/build/bin/spdk_nvme_perf
chmod +x /opt/fakespdk/build/bin/spdk_nvme_perf
hwceiling profile --paths nvme_read -o /out/spdkfake --spdk-dir /opt/fakespdk \
  --spdk-drives HWCN0A,HWCN1A --nvme-sizes 128KiB --queue-depths 16 --nvme-bytes 8MiB \
  >spdk-fake.txt 2>&1
echo "rc=$?" >>spdk-fake.txt
echo "after $(state)" >>spdk-fake.txt
# A profile of HWCN0A whose "perf" sleeps; once it runs, SIGTERM (twice with `twice`).
spdk_signal() { # name [twice]
  rm -f /tmp/fake-perf-running
  HWC_FAKE_PERF_SLEEP=30 hwceiling profile --paths nvme_read -o "/out/$1" \
    --spdk-dir /opt/fakespdk --spdk-drives HWCN0A --nvme-sizes 128KiB --queue-depths 16 \
    --nvme-bytes 8MiB >"$1.out" 2>&1 &
  pid=$!
  i=0
  until [ -e /tmp/fake-perf-running ] || [ $i -ge 600 ]; do sleep 0.1; i=$((i + 1)); done
  at="$(state)"
  kill -TERM "$pid"
  [ -n "$2" ] && { sleep 0.2; kill -TERM "$pid"; }
  wait "$pid"
  rc=$?
  { echo "rc=$rc"; echo "at-signal $at"; echo "after $(state)"; cat "$1.out"; } >"$1.txt"
}
spdk_signal spdk-term
# Two signals: perf is stopped, everything put back at once.
spdk_signal spdk-term2 twice
# --leave-bound: the drive stays on vfio-pci after the run, journaled; the next profile refuses
# to start until `hwceiling restore` has put it back.
{
  hwceiling profile --paths nvme_read -o /out/spdkleave --spdk-dir /opt/fakespdk \
    --spdk-drives HWCN0A --leave-bound --nvme-sizes 128KiB --queue-depths 16 --nvme-bytes 8MiB \
    >spdk-leave.out 2>&1
  echo "rc=$?"
  echo "after-run $(state)"
  hwceiling profile --engines null -o /out/spdkleave-refused >leave-refused.out 2>&1
  echo "next-rc=$?"
  cat leave-refused.out
  hwceiling restore 2>&1
  echo "restore-rc=$?"
  echo "after-restore $(state)"
} >spdk-leave.txt
sums >bind-sums-after.txt
