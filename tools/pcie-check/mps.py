#!/usr/bin/env python3
"""Independent check of hwceiling's PCIe reading: for each BDF given (or every NVIDIA display
controller), walk the config space's capability list to the PCI Express capability (ID 0x10) and
print Max Payload Size and Max Read Request Size, as set (Device Control) and as capable (Device
Capabilities), and the link's current and capable speed/width. Needs root to read beyond 64 bytes.

usage: mps.py [BDF ...]
"""
import glob
import os
import sys


def pcie_cap(cfg):
    if len(cfg) < 64 or not cfg[6] & 0x10:  # Status: capabilities list
        return None
    ptr, seen = cfg[0x34] & 0xFC, set()
    while ptr and ptr not in seen and ptr + 2 <= len(cfg):
        seen.add(ptr)
        if cfg[ptr] == 0x10:
            return ptr
        ptr = cfg[ptr + 1] & 0xFC
    return None


def word(cfg, off, n):
    return int.from_bytes(cfg[off:off + n], "little")


def main():
    bdfs = sys.argv[1:] or [
        os.path.basename(d) for d in glob.glob("/sys/bus/pci/devices/*")
        if open(d + "/vendor").read().strip() == "0x10de"
        and open(d + "/class").read().startswith("0x03")
    ]
    for bdf in bdfs:
        cfg = open(f"/sys/bus/pci/devices/{bdf}/config", "rb").read()
        cap = pcie_cap(cfg)
        if cap is None:
            print(f"{bdf}: no PCI Express capability readable ({len(cfg)} bytes)")
            continue
        devcap, devctl = word(cfg, cap + 4, 4), word(cfg, cap + 8, 2)
        lnkcap, lnksta = word(cfg, cap + 0x0C, 4), word(cfg, cap + 0x12, 2)
        print(f"{bdf}: mps_set={128 << ((devctl >> 5) & 7)} mps_capable={128 << (devcap & 7)} "
              f"mrrs_set={128 << ((devctl >> 12) & 7)} "
              f"link_capable=gen{lnkcap & 0xF}x{(lnkcap >> 4) & 0x3F} "
              f"link_current=gen{lnksta & 0xF}x{(lnksta >> 4) & 0x3F} config_bytes={len(cfg)}")


if __name__ == "__main__":
    main()
