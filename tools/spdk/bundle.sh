#!/usr/bin/env bash
# Gather what tools/spdk/tcp-parity.sh runs into OUT, for a machine without cargo or SPDK (the
# GPU test machine): the example binary, nvmf_tgt, spdk_nvme_perf and every shared library they
# load but glibc's, debug info stripped. There: SPDK_DIR=OUT HWC_PARITY_BIN=OUT/spdk_tcp_parity
# tools/spdk/tcp-parity.sh …
set -euo pipefail
SPDK_DIR=${SPDK_DIR:?set SPDK_DIR to a built SPDK tree}
out=${1:?usage: bundle.sh OUT}
here=$(cd "$(dirname "$0")" && pwd)
(cd "$here/../.." && cargo build --release -q -p hwceiling --features spdk --example spdk_tcp_parity)
mkdir -p "$out/build/bin" "$out/build/lib"
cp "$here/../../target/release/examples/spdk_tcp_parity" "$out/"
cp "$SPDK_DIR/build/bin/nvmf_tgt" "$SPDK_DIR/build/bin/spdk_nvme_perf" "$out/build/bin/"
export LD_LIBRARY_PATH=$SPDK_DIR/build/lib
for p in "$out/spdk_tcp_parity" "$out"/build/bin/*; do ldd "$p"; done |
  awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
  grep -Ev '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*)\.so' |
  while read -r lib; do cp -L "$lib" "$out/build/lib/"; done
strip --strip-debug "$out/spdk_tcp_parity" "$out"/build/bin/* "$out"/build/lib/* 2>/dev/null || true
du -sh "$out"
