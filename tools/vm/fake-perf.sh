#!/bin/busybox sh
# A stand-in for SPDK's spdk_nvme_perf in the CI test bed, which has no SPDK: it appends each
# drive it is given (-r 'trtype:PCIe traddr:BDF') and the driver that drive is on right then to
# /out/fake-perf-seen.txt, sleeps $HWC_FAKE_PERF_SLEEP seconds when set (for a signal while
# "perf" runs), and prints a results table in perf's format: the i-th drive from the i-th core
# of -c's mask, as perf assigns them. Its figures are made up: the test asserts the binding, the
# parsing and the restore around it, never a figure.
mask=0x1
bdfs=""
while [ $# -gt 0 ]; do
  case "$1" in
    -c) mask="$2"; shift 2 ;;
    -r) bdfs="$bdfs ${2##*traddr:}"; shift 2 ;;
    *) shift ;;
  esac
done
for b in $bdfs; do
  d="/sys/bus/pci/devices/$b/driver"
  echo "$b $([ -e "$d" ] && basename "$(readlink -f "$d")" || echo none)" >>/out/fake-perf-seen.txt
done
if [ -n "$HWC_FAKE_PERF_SLEEP" ]; then
  : >/tmp/fake-perf-running
  # In the background, so that a signal ends this shell at once.
  sleep "$HWC_FAKE_PERF_SLEEP" &
  wait $!
fi
cores=""
m=$((mask))
c=0
while [ "$m" -gt 0 ]; do
  [ $((m & 1)) -eq 1 ] && cores="$cores $c"
  m=$((m >> 1))
  c=$((c + 1))
done
echo "Initializing NVMe Controllers"
echo "========================================================"
echo "                                                                                       Latency(us)"
echo "Device Information                                 :       IOPS      MiB/s    Average        min        max"
set -- $cores
n=0
for b in $bdfs; do
  printf 'PCIE (%s) [1b36:0010] NSID 1 from core %2u:    1000.00     125.00     100.00      10.00     900.00\n' "$b" "$1"
  shift
  n=$((n + 1))
done
echo "========================================================"
printf 'Total                                              : %10d.00 %10d.00     100.00      10.00     900.00\n' $((n * 1000)) $((n * 125))
