"""RAPIDS kvikio's cuFile reads, for comparison with hwceiling's cufile engine on the same file.

For each BLOCK in SIZES and QD in DEPTHS: one kvikio pread of BYTES from offset 0 into one GPU
buffer, split into BLOCK-byte tasks over a pool of QD threads (kvikio's `num_threads` and
`task_size`: QD reads in flight), one untimed, then REPS timed. KVIKIO_COMPAT_MODE=OFF unless set:
kvikio's own compat mode is a POSIX read through the page cache that never calls cuFile, which
is not what is compared. The system's libcufile is loaded first, so kvikio and hwceiling use the
same library.

    python3 kvikio_read.py FILE BYTES REPS SIZES(MiB,comma) DEPTHS(comma)
    → CSV lines: kvikio,BLOCK,QD,REP,GBPS
"""
import ctypes
import glob
import os
import sys
import time

os.environ.setdefault("KVIKIO_COMPAT_MODE", "OFF")
for lib in sorted(glob.glob("/usr/local/cuda*/targets/x86_64-linux/lib/libcufile.so.0")):
    ctypes.CDLL(lib, mode=ctypes.RTLD_GLOBAL)
    print(f"# libcufile {lib}", file=sys.stderr)
    break

import torch  # noqa: E402  (any CUDA array with __cuda_array_interface__ would do)
import kvikio  # noqa: E402
import kvikio.defaults  # noqa: E402

path, nbytes, reps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
sizes = [int(s) << 20 for s in sys.argv[4].split(",")]
depths = [int(q) for q in sys.argv[5].split(",")]
try:
    compat = kvikio.defaults.get("compat_mode")
except Exception as e:  # older and newer kvikio spell it differently
    compat = f"unknown ({e})"
print(f"# kvikio {kvikio.__version__}, compat_mode {compat}", file=sys.stderr)
buf = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
with kvikio.CuFile(path, "r") as f:
    for block in sizes:
        for qd in depths:
            n = nbytes // (block * qd) * block * qd
            kvikio.defaults.set({"num_threads": qd, "task_size": block, "gds_threshold": 0})
            for rep in range(reps + 1):
                torch.cuda.synchronize()
                t = time.perf_counter()
                got = f.pread(buf, n, 0, task_size=block).get()
                torch.cuda.synchronize()
                dt = time.perf_counter() - t
                assert got == n, (got, n)
                if rep > 0:
                    print(f"kvikio,{block},{qd},{rep},{n / dt / 1e9:.4f}", flush=True)
