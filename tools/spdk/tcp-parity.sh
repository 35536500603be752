#!/usr/bin/env bash
# The native SPDK engine against spdk_nvme_perf on one NVMe-oF TCP loopback target, interleaved
# in one run (crates/hwceiling/examples/spdk_tcp_parity.rs). Touches no drive and no hugepage:
# the target is a 1 GiB malloc bdev in nvmf_tgt's ordinary memory (--no-huge) on CPU 0; both
# engines poll from CPU $HWC_PARITY_CPU (default: the last CPU).
#
#   SPDK_DIR=/tmp/spdk tools/spdk/tcp-parity.sh [BLOCK_BYTES QD ROUNDS BYTES_PER_REP [read|write]]
#
# Builds the example with --features spdk, unless HWC_PARITY_BIN names one already built (for
# a machine without cargo: tools/spdk/bundle.sh). Method and figures: docs/measurements.md.
set -euo pipefail
SPDK_DIR=${SPDK_DIR:?set SPDK_DIR to a built SPDK tree}
BLOCK=${1:-131072} QD=${2:-16} ROUNDS=${3:-9} BYTES=${4:-2147483648} RW=${5:-read}
CPU=${HWC_PARITY_CPU:-$(($(nproc) - 1))}
NQN=nqn.2016-06.io.spdk:hwcparity
PORT=4420
here=$(cd "$(dirname "$0")" && pwd)
bin=${HWC_PARITY_BIN:-}
if [[ -z "$bin" ]]; then
  (cd "$here/../.." && cargo build --release -q -p hwceiling --features spdk --example spdk_tcp_parity)
  bin=$here/../../target/release/examples/spdk_tcp_parity
fi
export LD_LIBRARY_PATH=$SPDK_DIR/build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
conf=$(mktemp --suffix=.json)
cat >"$conf" <<JSON
{"subsystems": [
 {"subsystem": "bdev", "config": [{"method": "bdev_malloc_create",
   "params": {"name": "Malloc0", "num_blocks": 262144, "block_size": 4096}}]},
 {"subsystem": "nvmf", "config": [
   {"method": "nvmf_create_transport", "params": {"trtype": "TCP"}},
   {"method": "nvmf_create_subsystem",
    "params": {"nqn": "$NQN", "allow_any_host": true, "serial_number": "HWC0001"}},
   {"method": "nvmf_subsystem_add_ns", "params": {"nqn": "$NQN", "namespace": {"bdev_name": "Malloc0"}}},
   {"method": "nvmf_subsystem_add_listener", "params": {"nqn": "$NQN",
    "listen_address": {"trtype": "TCP", "adrfam": "IPv4", "traddr": "127.0.0.1", "trsvcid": "$PORT"}}}]}]}
JSON
mkdir -p /var/tmp
"$SPDK_DIR/build/bin/nvmf_tgt" -m 0x1 --no-huge -s 2048 -r /var/tmp/hwc-parity.sock -c "$conf" \
  >/tmp/hwc-parity-tgt.log 2>&1 &
tgt=$!
trap 'kill $tgt 2>/dev/null; wait $tgt 2>/dev/null || true; rm -f "$conf"' EXIT
for _ in $(seq 100); do
  (exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break
  kill -0 $tgt 2>/dev/null || { cat /tmp/hwc-parity-tgt.log; exit 1; }
  sleep 0.1
done
echo "target: nvmf_tgt -m 0x1 --no-huge -s 2048, a 1 GiB malloc bdev, $NQN on 127.0.0.1:$PORT"
echo "engines: CPU $CPU, $RW, $BLOCK-byte I/Os, QD $QD, $ROUNDS rounds, native $BYTES bytes/rep"
"$bin" "$SPDK_DIR/build/bin/spdk_nvme_perf" 127.0.0.1 "$PORT" "$NQN" "$CPU" "$BLOCK" "$QD" \
  "$ROUNDS" "$BYTES" "$RW"
