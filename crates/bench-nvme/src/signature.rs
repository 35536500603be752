//! Known on-disk signatures, looked for in the first and last MiB of a device before anything
//! is written to it: a drive that carries a filesystem, a partition table, a RAID or LVM member,
//! swap, an encrypted volume or a cache device is never a write target.
//!
//! Covered (with where they are looked for):
//! - ext2/3/4: magic `0xEF53` at byte 0x438; XFS: `XFSB` at 0; btrfs: `_BHRfS_M` at 0x10040;
//!   F2FS: `0xF2F52010` at 0x400;
//! - GPT: `EFI PART` at 512 or 4096 (primary) and 512 or 4096 bytes before the end (backup);
//! - MBR: `0x55AA` at 510 with a non-empty partition entry;
//! - LVM2: `LABELONE` at the start of any of the first four sectors;
//! - Linux MD RAID: `0xa92b4efc` at 4096 (v1.2), at 0 (v1.1), near the end (v1.0: 8–12 KiB
//!   before it, 4 KiB aligned; v0.90: the last 64 KiB-aligned 64 KiB block);
//! - swap: `SWAPSPACE2` / `SWAP-SPACE` at the end of the first page (4, 8, 16 or 64 KiB pages);
//! - ZFS: uberblock magic `0x00bab10c` (either byte order) in the uberblock rings of the four
//!   vdev labels (two at the start, two at the end);
//! - bcache: its 16-byte magic at 4096 + 24;
//! - NTFS (`NTFS    ` at 3), exFAT (`EXFAT   ` at 3), FAT12/16/32 (type string at 54 or 82);
//! - ISO 9660: `CD001` at 0x8001; LUKS: `LUKS\xba\xbe` at 0.

use std::fs::File;
use std::os::unix::fs::FileExt;

/// Bytes read at each end of a device.
pub const PROBE_BYTES: u64 = 1 << 20;

/// One signature found: what it is and its byte offset on the device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub kind: &'static str,
    pub offset: u64,
}

impl std::fmt::Display for Found {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} signature at byte {:#x}", self.kind, self.offset)
    }
}

/// The first and last bytes of a device, as read.
pub struct Ends<'a> {
    pub head: &'a [u8],
    pub tail: &'a [u8],
    pub size: u64,
}

impl Ends<'_> {
    /// `len` bytes at absolute `offset`, from whichever end holds them.
    fn at(&self, offset: u64, len: usize) -> Option<&[u8]> {
        let end = offset.checked_add(len as u64)?;
        if end > self.size {
            return None;
        }
        if end <= self.head.len() as u64 {
            let o = usize::try_from(offset).ok()?;
            return self.head.get(o..o + len);
        }
        let tail_start = self.size - self.tail.len() as u64;
        if offset >= tail_start {
            let o = usize::try_from(offset - tail_start).ok()?;
            return self.tail.get(o..o + len);
        }
        None
    }

    fn is(&self, offset: u64, magic: &[u8]) -> bool {
        self.at(offset, magic.len()) == Some(magic)
    }

    fn u32_le(&self, offset: u64) -> Option<u32> {
        let b = self.at(offset, 4)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
}

const MD_MAGIC: u32 = 0xa92b_4efc;
const ZFS_MAGIC: u64 = 0x00ba_b10c;
const BCACHE_MAGIC: [u8; 16] = [
    0xc6, 0x85, 0x73, 0xf6, 0x4e, 0x1a, 0x45, 0xca, 0x82, 0x65, 0xf5, 0x7f, 0x48, 0xba, 0x6d, 0x81,
];
const KIB: u64 = 1024;

/// Every known signature in a device's ends. Pure.
pub fn scan(ends: &Ends) -> Vec<Found> {
    let mut found = Vec::new();
    let mut check = |kind: &'static str, offset: u64, hit: bool| {
        if hit {
            found.push(Found { kind, offset });
        }
    };
    let size = ends.size;
    check("ext2/3/4", 0x438, ends.is(0x438, &[0x53, 0xef]));
    check("XFS", 0, ends.is(0, b"XFSB"));
    check("btrfs", 0x10040, ends.is(0x10040, b"_BHRfS_M"));
    check("F2FS", 0x400, ends.u32_le(0x400) == Some(0xF2F5_2010));
    for off in [512, 4096] {
        check("GPT (primary)", off, ends.is(off, b"EFI PART"));
        if let Some(backup) = size.checked_sub(off).filter(|&b| b > 4096) {
            check("GPT (backup)", backup, ends.is(backup, b"EFI PART"));
        }
    }
    let mbr_entries = (0..4).any(|i| ends.at(446 + 16 * i + 4, 1).is_some_and(|t| t[0] != 0));
    check(
        "MBR partition table",
        510,
        ends.is(510, &[0x55, 0xaa]) && mbr_entries,
    );
    for sector in 0..4 {
        check("LVM2 PV", sector * 512, ends.is(sector * 512, b"LABELONE"));
    }
    check("MD RAID v1.2", 4096, ends.u32_le(4096) == Some(MD_MAGIC));
    check("MD RAID v1.1", 0, ends.u32_le(0) == Some(MD_MAGIC));
    if size >= 12 * KIB {
        let v10 = ((size / 512 - 16) & !7) * 512;
        check("MD RAID v1.0", v10, ends.u32_le(v10) == Some(MD_MAGIC));
    }
    if size >= 128 * KIB {
        let v090 = (size & !(64 * KIB - 1)) - 64 * KIB;
        check("MD RAID v0.90", v090, ends.u32_le(v090) == Some(MD_MAGIC));
    }
    for page in [4 * KIB, 8 * KIB, 16 * KIB, 64 * KIB] {
        let at = page - 10;
        check(
            "swap",
            at,
            ends.is(at, b"SWAPSPACE2") || ends.is(at, b"SWAP-SPACE"),
        );
    }
    // ZFS vdev labels are 256 KiB: two at the start, two at the end (aligned down to 256 KiB);
    // each holds a ring of 1 KiB (or larger) uberblocks from 128 KiB into the label.
    let label = 256 * KIB;
    let aligned_end = size & !(label - 1);
    let mut labels = vec![0, label];
    if aligned_end >= 4 * label {
        labels.extend([aligned_end - 2 * label, aligned_end - label]);
    }
    if let Some(at) = labels.iter().find_map(|&l| {
        (0..128)
            .map(|i| l + 128 * KIB + i * KIB)
            .find(|&o| zfs_uberblock(ends, o))
    }) {
        check("ZFS", at, true);
    }
    check("bcache", 4096 + 24, ends.is(4096 + 24, &BCACHE_MAGIC));
    check("NTFS", 3, ends.is(3, b"NTFS    "));
    check("exFAT", 3, ends.is(3, b"EXFAT   "));
    for (off, name) in [(54, b"FAT12   "), (54, b"FAT16   "), (82, b"FAT32   ")] {
        check(
            "FAT",
            off,
            ends.is(off, name) && ends.is(510, &[0x55, 0xaa]),
        );
    }
    check("ISO 9660", 0x8001, ends.is(0x8001, b"CD001"));
    check("LUKS", 0, ends.is(0, b"LUKS\xba\xbe"));
    found
}

fn zfs_uberblock(ends: &Ends, offset: u64) -> bool {
    ends.at(offset, 8).is_some_and(|b| {
        let a: [u8; 8] = [b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]];
        u64::from_le_bytes(a) == ZFS_MAGIC || u64::from_be_bytes(a) == ZFS_MAGIC
    })
}

/// Read the first and last [`PROBE_BYTES`] of an open device (or file) of `size` bytes and scan
/// them. Reads only.
pub fn probe(file: &File, size: u64) -> std::io::Result<Vec<Found>> {
    let n = usize::try_from(PROBE_BYTES.min(size)).unwrap_or(0);
    let mut head = vec![0u8; n];
    file.read_exact_at(&mut head, 0)?;
    let mut tail = vec![0u8; n];
    file.read_exact_at(&mut tail, size - n as u64)?;
    Ok(scan(&Ends {
        head: &head,
        tail: &tail,
        size,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SIZE: u64 = 64 << 20;
    /// Bytes to place at absolute offsets.
    type Writes<'a> = Vec<(u64, &'a [u8])>;

    /// A blank device of SIZE bytes with `bytes` written at absolute offsets.
    fn device(writes: &[(u64, &[u8])]) -> (Vec<u8>, Vec<u8>) {
        let n = PROBE_BYTES as usize;
        let (mut head, mut tail) = (vec![0u8; n], vec![0u8; n]);
        for (off, bytes) in writes {
            if *off < PROBE_BYTES {
                let o = *off as usize;
                head[o..o + bytes.len()].copy_from_slice(bytes);
            } else {
                let o = (*off - (SIZE - PROBE_BYTES)) as usize;
                tail[o..o + bytes.len()].copy_from_slice(bytes);
            }
        }
        (head, tail)
    }

    fn kinds(writes: &[(u64, &[u8])]) -> Vec<&'static str> {
        let (head, tail) = device(writes);
        scan(&Ends {
            head: &head,
            tail: &tail,
            size: SIZE,
        })
        .into_iter()
        .map(|f| f.kind)
        .collect()
    }

    #[test]
    fn a_blank_device_carries_nothing() {
        assert!(kinds(&[]).is_empty());
    }

    #[test]
    fn each_signature_is_found_where_it_lives() {
        let md = MD_MAGIC.to_le_bytes();
        let v10 = ((SIZE / 512 - 16) & !7) * 512;
        let v090 = (SIZE & !(64 * KIB - 1)) - 64 * KIB;
        let zfs = ZFS_MAGIC.to_le_bytes();
        let zfs_be = ZFS_MAGIC.to_be_bytes();
        let f2fs = 0xF2F5_2010u32.to_le_bytes();
        let mut mbr = vec![0u8; 512];
        mbr[446 + 4] = 0x83;
        mbr[510] = 0x55;
        mbr[511] = 0xaa;
        let cases: Vec<(Writes, &str)> = vec![
            (vec![(0x438, &[0x53, 0xef])], "ext2/3/4"),
            (vec![(0, b"XFSB")], "XFS"),
            (vec![(0x10040, b"_BHRfS_M")], "btrfs"),
            (vec![(0x400, &f2fs)], "F2FS"),
            (vec![(512, b"EFI PART")], "GPT (primary)"),
            (vec![(4096, b"EFI PART")], "GPT (primary)"),
            (vec![(SIZE - 512, b"EFI PART")], "GPT (backup)"),
            (vec![(SIZE - 4096, b"EFI PART")], "GPT (backup)"),
            (vec![(0, &mbr)], "MBR partition table"),
            (vec![(512, b"LABELONE")], "LVM2 PV"),
            (vec![(1536, b"LABELONE")], "LVM2 PV"),
            (vec![(4096, &md)], "MD RAID v1.2"),
            (vec![(0, &md)], "MD RAID v1.1"),
            (vec![(v10, &md)], "MD RAID v1.0"),
            (vec![(v090, &md)], "MD RAID v0.90"),
            (vec![(4086, b"SWAPSPACE2")], "swap"),
            (vec![(65526, b"SWAP-SPACE")], "swap"),
            (vec![(128 * KIB + 5 * KIB, &zfs)], "ZFS"),
            (vec![(SIZE - 256 * KIB + 128 * KIB, &zfs_be)], "ZFS"),
            (vec![(4096 + 24, &BCACHE_MAGIC)], "bcache"),
            (vec![(3, b"NTFS    ")], "NTFS"),
            (vec![(3, b"EXFAT   ")], "exFAT"),
            (vec![(82, b"FAT32   "), (510, &[0x55, 0xaa])], "FAT"),
            (vec![(54, b"FAT16   "), (510, &[0x55, 0xaa])], "FAT"),
            (vec![(0x8001, b"CD001")], "ISO 9660"),
            (vec![(0, b"LUKS\xba\xbe")], "LUKS"),
        ];
        for (writes, want) in cases {
            let got = kinds(&writes);
            assert!(got.contains(&want), "{want}: found {got:?}");
        }
    }

    #[test]
    fn a_boot_signature_without_partitions_is_not_a_table() {
        assert!(kinds(&[(510, &[0x55, 0xaa])]).is_empty());
    }

    #[test]
    fn a_real_ext4_image_is_recognised_when_mkfs_exists() {
        let Ok(out) = std::process::Command::new("mkfs.ext4").arg("-V").output() else {
            eprintln!("SKIPPED: mkfs.ext4 is not installed");
            return;
        };
        assert!(out.status.success() || !out.stderr.is_empty());
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("fs.img");
        let f = File::create(&img).unwrap();
        f.set_len(8 << 20).unwrap();
        drop(f);
        let ok = std::process::Command::new("mkfs.ext4")
            .args(["-q", "-F"])
            .arg(&img)
            .status()
            .unwrap();
        assert!(ok.success());
        let f = File::open(&img).unwrap();
        let found = probe(&f, 8 << 20).unwrap();
        assert!(found.iter().any(|s| s.kind == "ext2/3/4"), "{found:?}");
    }

    #[test]
    fn small_devices_are_probed_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("small");
        let mut data = vec![0u8; 8192];
        data[0..4].copy_from_slice(b"XFSB");
        std::fs::write(&path, &data).unwrap();
        let f = File::open(&path).unwrap();
        let found = probe(&f, 8192).unwrap();
        assert_eq!(
            found,
            vec![Found {
                kind: "XFS",
                offset: 0
            }]
        );
    }

    proptest! {
        /// Scanning arbitrary ends of arbitrary sizes never panics.
        #[test]
        fn scanning_never_panics(size in 0u64..(4 << 20), seed in any::<u8>()) {
            let n = PROBE_BYTES.min(size) as usize;
            let head: Vec<u8> = (0..n).map(|i| (i as u8).wrapping_mul(seed)).collect();
            let tail = head.clone();
            let _ = scan(&Ends { head: &head, tail: &tail, size });
        }
    }
}
