#!/usr/bin/env bash
# One device call: compare.sh on ext4 over a RAM-backed loop device first (a tmpfs file through
# losetup: O_DIRECT works on the ext4 above it, tmpfs itself refuses it; only software overhead
# is left, not the disk's 10–20 % swing), then on the machine's ext4 disk. Writes only to the
# loop device it creates (removed at the end) and to files. Results: OUT/gds.tgz.
#
# usage: ram-and-disk.sh HWCEILING WHEELS [OUT]
# env:   LOOP_ROUNDS (4), LOOP_T (seconds, 240), DISK_ROUNDS (2), DISK_T (270),
#        DISK_FILE (/var/tmp/hwc-gds.bin)
set -u
here=$(cd "$(dirname "$0")" && pwd)
hwc=$(realpath "${1:?usage: ram-and-disk.sh HWCEILING WHEELS [OUT]}")
export WHEELS=$(realpath "${2:?usage: ram-and-disk.sh HWCEILING WHEELS [OUT]}")
out=${3:-${OUT:-$PWD/gds-out}}
mkdir -p "$out/loop" "$out/disk"
exec > >(tee "$out/driver.log") 2>&1
date; nvidia-smi -L; python3 --version; uname -r; free -g | head -2
img=/dev/shm/hwc-gds/img mnt=/mnt/hwc-gds-loop loop=
cleanup() {
  # A tool stopped by the timeout may still be closing its files: retry the unmount a while.
  for _ in $(seq 30); do mountpoint -q "$mnt" || break; umount "$mnt" 2>/dev/null || sleep 1; done
  mountpoint -q "$mnt" && { echo "$mnt still busy: loop device $loop left attached"; return; }
  [[ -n "$loop" ]] && losetup -d "$loop"
  rm -f "$img"
}
trap cleanup EXIT
# A signal ends the script through exit, so the EXIT trap removes the loop device then too.
trap 'exit 130' INT TERM HUP
t0=$(date +%s)
if mkdir -p "${img%/*}" "$mnt" && truncate -s 6G "$img" && mkfs.ext4 -q -F "$img" \
  && loop=$(losetup -f --show "$img") && mount "$loop" "$mnt"; then
  echo "loop: $loop ($img) on $mnt"
  timeout "${LOOP_T:-240}" bash "$here/compare.sh" "$hwc" "$mnt/hwc-gds.bin" "${LOOP_ROUNDS:-4}" "$out/loop"
  echo "loop compare rc=$? after $(($(date +%s) - t0)) s"
  cleanup; loop=
else
  echo "no RAM-backed loop device here (losetup, mkfs.ext4 or /dev/shm missing)"
fi
t1=$(date +%s)
timeout "${DISK_T:-270}" bash "$here/compare.sh" "$hwc" "${DISK_FILE:-/var/tmp/hwc-gds.bin}" \
  "${DISK_ROUNDS:-2}" "$out/disk"
echo "disk compare rc=$? after $(($(date +%s) - t1)) s"
# A round cut by the timeout still leaves whole tools' files: tabulate what is there.
for d in loop disk; do python3 "$here/ratio.py" "$out/$d" >"$out/$d/table-partial.md" 2>&1; done
cd "$out" && tar czf gds.tgz loop disk driver.log && rm -rf loop disk
