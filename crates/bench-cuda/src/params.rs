//! What a planned case asks of this engine: the planner's typed spec ([`hwc_model::GpuCopySpec`],
//! checked when it was planned), turned into the flows of copies that run at once.

use hwc_model::{Case, CopyDirection, PathId, Spec};
use hwc_numa::Pages;

pub use hwc_model::HostMemory;

/// A case this engine cannot interpret: a planner bug, the case fails alone.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParamError {
    #[error("path `{0}` is not a GPU copy path")]
    NotACopyPath(PathId),
    #[error("the CUDA copy engine was given a {0} case")]
    NotACopySpec(&'static str),
    #[error("size_bytes {0} does not fit this machine's address space")]
    SizeTooLarge(u64),
}

/// One direction of copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    H2d,
    D2h,
    D2d,
}

impl Direction {
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::H2d => "h2d",
            Direction::D2h => "d2h",
            Direction::D2d => "d2d",
        }
    }
}

/// One group of streams copying in one direction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flow {
    pub direction: Direction,
    /// NUMA node of the host buffers (H2D/D2H), `None` = no placement requested.
    pub host_node: Option<u32>,
}

/// A case, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopySpec {
    pub gpu: String,
    pub size_bytes: usize,
    pub streams: u32,
    pub host_memory: HostMemory,
    /// Node whose CPUs issue the copies; `None` = leave the thread where it is.
    pub cpu_node: Option<u32>,
    /// The flows that run at once: one, or two for duplex.
    pub flows: Vec<Flow>,
    /// Index in `flows` of the flow whose throughput is reported.
    pub measured: usize,
}

impl CopySpec {
    /// The flows of a case's typed spec.
    pub fn from_case(case: &Case) -> Result<Self, ParamError> {
        let p = match &case.spec {
            Spec::GpuCopy(p) => p,
            other => return Err(ParamError::NotACopySpec(other.kind())),
        };
        let size_bytes = usize::try_from(p.size_bytes)
            .ok()
            .filter(|s| *s <= isize::MAX as usize / 2)
            .ok_or(ParamError::SizeTooLarge(p.size_bytes))?;
        let host_memory = p.host_memory.unwrap_or(HostMemory::Pinned);
        let flow = |direction| Flow {
            direction,
            host_node: p.host_node,
        };
        let (flows, measured) = match case.path {
            PathId::H2d => (vec![flow(Direction::H2d)], 0),
            PathId::D2h => (vec![flow(Direction::D2h)], 0),
            PathId::D2d => (
                vec![Flow {
                    direction: Direction::D2d,
                    host_node: None,
                }],
                0,
            ),
            PathId::Duplex => {
                let measured = match p.direction {
                    Some(CopyDirection::D2h) => 1,
                    _ => 0,
                };
                (vec![flow(Direction::H2d), flow(Direction::D2h)], measured)
            }
            other => return Err(ParamError::NotACopyPath(other)),
        };
        Ok(CopySpec {
            gpu: p.gpu.clone(),
            size_bytes,
            streams: p.streams,
            host_memory,
            cpu_node: if case.path == PathId::D2d {
                None
            } else {
                p.cpu_node
            },
            flows,
            measured,
        })
    }

    /// True when the copies touch host memory.
    pub fn uses_host(&self) -> bool {
        self.flows.iter().any(|f| f.direction != Direction::D2d)
    }

    /// True when the copies wait behind the latch (pinned host memory, or none).
    pub fn latched(&self) -> bool {
        self.host_memory == HostMemory::Pinned || !self.uses_host()
    }

    /// The placements the case tries, fastest kept: [`SEARCH_PLACEMENTS`] for duplex (a
    /// device-memory write and a device-memory read in flight at once) and D2H, on one stream
    /// per direction, latched and of at most [`PLACEMENT_SEARCH_MAX_BYTES`];
    /// [`D2D_SEARCH_PLACEMENTS`] for one-stream D2D of at most [`D2D_SEARCH_MAX_BYTES`]; every
    /// other case only [`HOME_PLACEMENT`]. See [`SEARCH_PLACEMENTS`] and
    /// [`D2D_SEARCH_PLACEMENTS`] for why, and for why not H2D or several streams.
    pub fn placements(&self) -> &'static [CopyPlacement] {
        if !self.latched() || self.streams != 1 {
            return &[HOME_PLACEMENT];
        }
        let small = self.size_bytes <= PLACEMENT_SEARCH_MAX_BYTES;
        match self.flows.as_slice() {
            [one] if one.direction == Direction::D2d && self.size_bytes <= D2D_SEARCH_MAX_BYTES => {
                &D2D_SEARCH_PLACEMENTS
            }
            [_, _] if small => &SEARCH_PLACEMENTS,
            [one] if one.direction == Direction::D2h && small => &SEARCH_PLACEMENTS,
            _ => &[HOME_PLACEMENT],
        }
    }

    /// True when the case tries several placements and measures at the fastest.
    pub fn searches_placement(&self) -> bool {
        self.placements().len() > 1
    }

    /// The pages of the case's host buffers: small (4 KiB) where the case searches placement
    /// (duplex, and one-stream D2H with it, whose rates did not move with the change),
    /// transparent huge pages elsewhere. (A D2D case searches too, but has no host buffers.)
    ///
    /// Why: 512 KiB duplex pairs reach faster placements (about 1–2 %) in host buffers of small
    /// pages, which lie in pieces scattered over physical memory, than in huge pages, which are
    /// contiguous (evidence: docs/gpu-method.md and `tools/gpu-reference/README.md`). Large copies
    /// keep huge pages: fewer, larger pieces for the DMA engine to walk.
    pub fn host_pages(&self) -> Pages {
        if self.searches_placement() {
            Pages::Small
        } else {
            Pages::Huge
        }
    }

    /// Bytes each device source buffer must hold: the copy, plus the largest offset it may be
    /// placed at.
    pub fn device_source_bytes(&self) -> usize {
        self.size_bytes + self.largest_offset(|p| p.device_source_offset_bytes)
    }

    /// Bytes each device destination buffer must hold, as [`CopySpec::device_source_bytes`].
    pub fn device_destination_bytes(&self) -> usize {
        self.size_bytes + self.largest_offset(|p| p.device_destination_offset_bytes)
    }

    /// Bytes each host source buffer (H2D) must hold, as [`CopySpec::device_source_bytes`].
    pub fn host_source_bytes(&self) -> usize {
        self.size_bytes + self.largest_offset(|p| p.host_source_offset_bytes)
    }

    /// Bytes each host destination buffer (D2H) must hold, as
    /// [`CopySpec::device_source_bytes`].
    pub fn host_destination_bytes(&self) -> usize {
        self.size_bytes + self.largest_offset(|p| p.host_destination_offset_bytes)
    }

    fn largest_offset(&self, of: impl Fn(&CopyPlacement) -> usize) -> usize {
        self.placements().iter().map(of).max().unwrap_or(0)
    }

    /// Device memory the case allocates, in bytes.
    pub fn device_bytes(&self) -> u64 {
        let (sources, destinations) =
            self.flows
                .iter()
                .fold((0u64, 0u64), |(s, d), f| match f.direction {
                    Direction::D2d => (s + 1, d + 1),
                    Direction::H2d => (s, d + 1),
                    Direction::D2h => (s + 1, d),
                });
        (sources * self.device_source_bytes() as u64
            + destinations * self.device_destination_bytes() as u64)
            * u64::from(self.streams)
    }
}

/// Where a case's copies start in each of their buffers, in bytes from the buffer's start.
/// Every copy has one source and one destination, each in device or host memory, so one
/// offset per kind of endpoint places every flow of a case: an H2D copy reads its host source
/// and writes its device destination, a D2H copy reads its device source and writes its host
/// destination, a D2D copy reads and writes device memory. Every placement searched leaves the
/// device destination at 0 (see [`SEARCH_PLACEMENTS`]); that offset is kept, with its
/// arithmetic and data check tested, for D2D and H2D, which do not search yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyPlacement {
    pub device_source_offset_bytes: usize,
    pub device_destination_offset_bytes: usize,
    pub host_source_offset_bytes: usize,
    pub host_destination_offset_bytes: usize,
    /// Which stream the copies are queued on: 0, the case's own (made for it); n > 0, the
    /// GPU's n-th standing stream (made once, in order, the first time a case asks; a case's
    /// further lanes take the standing streams after it).
    pub queue: usize,
}

/// A searched placement: the device source, host source and host destination offsets, in KiB.
const fn at(
    device_source_kib: usize,
    host_source_kib: usize,
    host_destination_kib: usize,
) -> CopyPlacement {
    CopyPlacement {
        device_source_offset_bytes: device_source_kib << 10,
        device_destination_offset_bytes: 0,
        host_source_offset_bytes: host_source_kib << 10,
        host_destination_offset_bytes: host_destination_kib << 10,
        queue: 0,
    }
}

/// Where every case that does not search lies: at its buffers' starts.
pub const HOME_PLACEMENT: CopyPlacement = at(0, 0, 0);

/// The placements a duplex or one-stream D2H case of at most [`PLACEMENT_SEARCH_MAX_BYTES`]
/// tries (the first is [`HOME_PLACEMENT`]): 24 offsets of the D2H device source, each with
/// its own offsets of the H2D host source and the D2H host destination (a one-way D2H case
/// uses the first and the last), all below 4.1 MiB and multiples of 64 KiB (the pattern check
/// needs 8). The host offsets were drawn at random once, so that the 24 tries sample both the
/// device and the host side together; the device destination stays at its buffer's start.
///
/// Why: on H200s, small copies that read device memory change speed with where their source
/// lies, and small duplex pairs also with where their host buffers lie, by several percent
/// more than their repetitions differ; 4 MiB and larger copies do not move. The GPU and the
/// host's memory controllers map physical addresses onto channels that software neither sees
/// nor chooses, so which placement is fast is not known in advance: the search keeps the
/// fastest. Where the device destination lies, and where it is allocated, did not matter, nor
/// did 48 tries against 24. Evidence: docs/gpu-method.md and `tools/gpu-reference/README.md`.
///
/// Not searched: one-way H2D, whose 128 KiB and 1 MiB copies read the same (±0.3 %) at 8
/// destination offsets; and several streams per direction (D2H or duplex), where each stream's
/// buffer lies elsewhere and a common offset has no one effect (not measured; the plan's duplex
/// cases have one stream per direction). D2D has its own placements, [`D2D_SEARCH_PLACEMENTS`].
pub const SEARCH_PLACEMENTS: [CopyPlacement; 24] = [
    HOME_PLACEMENT,
    at(64, 512, 2048),
    at(128, 1344, 3136),
    at(192, 2112, 3200),
    at(320, 3904, 2432),
    at(512, 2112, 1856),
    at(704, 2688, 1024),
    at(832, 3584, 64),
    at(1088, 3904, 2560),
    at(1280, 448, 384),
    at(1536, 3648, 512),
    at(1600, 960, 1216),
    at(1856, 3712, 3392),
    at(2112, 2496, 448),
    at(2368, 2560, 1856),
    at(2560, 2304, 64),
    at(2880, 1728, 3392),
    at(3008, 3264, 3712),
    at(3200, 2368, 2816),
    at(3264, 2304, 2048),
    at(3520, 3456, 2816),
    at(3712, 3008, 1344),
    at(3968, 3200, 896),
    at(4160, 3200, 1664),
];

/// A searched D2D placement: the device source and destination offsets, in KiB, and the
/// standing stream the copies are queued on.
const fn d2d_at(
    device_source_kib: usize,
    device_destination_kib: usize,
    queue: usize,
) -> CopyPlacement {
    CopyPlacement {
        device_source_offset_bytes: device_source_kib << 10,
        device_destination_offset_bytes: device_destination_kib << 10,
        host_source_offset_bytes: 0,
        host_destination_offset_bytes: 0,
        queue,
    }
}

/// The placements a one-stream D2D case of at most [`D2D_SEARCH_MAX_BYTES`] tries (the first
/// is [`HOME_PLACEMENT`]): 24 pairs of source and destination offsets, drawn at random once
/// from multiples of 64 KiB up to 240 MiB, each source offset different, each on its own
/// standing stream, every 4th of the first 92 the GPU makes.
///
/// Why the offsets: on an H200 a D2D copy small enough to stay in the L2 cache changes speed
/// with where in device memory its two buffers lie, by more than its repetitions differ, and
/// which pair of offsets is fast differs from process to process, so it is found in each
/// process by this search. Offsets of a few MiB move it little, so these spread over hundreds
/// of MiB: the case's buffers grow by up to 240 MiB each, which the default plan's largest D2D
/// buffers, several times the L2, already hold.
///
/// Why the streams: the same copies read at two levels (a few percent apart) by the stream
/// they are queued on; a process's streams fall into runs of consecutive ones at each level,
/// and each stream keeps its level. A case's own stream is one draw; every 4th of 92 standing
/// streams spans several runs. With offsets and streams searched, one-stream D2D copies of
/// 128 KiB–16 MiB read at or above plain CUDA's in the same process; with offsets alone they
/// stayed a few percent under. Evidence: docs/gpu-method.md and `tools/gpu-reference/README.md`.
///
/// Larger copies, which read HBM, keep their buffers' starts and their own stream (neither
/// was measured to matter there).
pub const D2D_SEARCH_PLACEMENTS: [CopyPlacement; 24] = [
    HOME_PLACEMENT,
    d2d_at(37120, 236608, 4),
    d2d_at(65280, 38976, 8),
    d2d_at(61184, 50624, 12),
    d2d_at(43264, 17664, 16),
    d2d_at(233600, 243456, 20),
    d2d_at(22336, 60160, 24),
    d2d_at(36736, 84480, 28),
    d2d_at(232384, 9984, 32),
    d2d_at(216960, 119040, 36),
    d2d_at(220544, 45824, 40),
    d2d_at(163776, 173312, 44),
    d2d_at(25344, 79808, 48),
    d2d_at(204992, 43072, 52),
    d2d_at(225472, 141248, 56),
    d2d_at(158720, 145920, 60),
    d2d_at(169856, 86336, 64),
    d2d_at(156672, 144896, 68),
    d2d_at(220480, 220800, 72),
    d2d_at(188416, 66048, 76),
    d2d_at(103616, 241472, 80),
    d2d_at(122432, 160704, 84),
    d2d_at(152000, 153600, 88),
    d2d_at(27712, 133952, 92),
];

/// The farthest a [`D2D_SEARCH_PLACEMENTS`] offset reaches into its buffer.
pub const D2D_SEARCH_REACH_BYTES: usize = 240 << 20;

/// Largest one-stream D2D copy that searches placement: the spec's largest D2D size below the
/// L2 multiples, whose source and destination (32 MiB) fit an H200's L2.
pub const D2D_SEARCH_MAX_BYTES: usize = 16 << 20;

/// Largest copy size that searches placement: from 4 MiB on no placement differed (above),
/// and a case's extra repetitions stay short (24 × 2 + 3 × 4 at K ≤ 256 copies of ≤ 2 MiB).
pub const PLACEMENT_SEARCH_MAX_BYTES: usize = 2 << 20;

/// The L2 rule: a D2D copy's working set (source and destination of every stream) that fits
/// in the L2 cache measures the cache, not device memory.
pub fn l2_resident(size_bytes: u64, streams: u32, l2_cache_bytes: u64) -> bool {
    l2_cache_bytes > 0
        && 2u64
            .saturating_mul(size_bytes)
            .saturating_mul(u64::from(streams))
            <= l2_cache_bytes
}

#[cfg(test)]
mod tests {
    use super::*;
    use hwc_model::v1::CaseParams;
    use hwc_model::{EngineId, Reps};

    /// A case of `path` with the typed spec of these (version 1 style) parameters: the host
    /// buffers on `src_node` for H2D and duplex, on `dst_node` for D2H.
    fn case(path: PathId, params: CaseParams) -> Case {
        Case::new(
            path,
            EngineId::new("cuda-copy"),
            "k",
            params.spec(path, "k"),
            Reps {
                warmup: 1,
                timed: 3,
                retry_above_spread_pct: None,
                steady: None,
            },
        )
    }

    fn base() -> CaseParams {
        CaseParams {
            gpu: Some("gpu0".into()),
            size_bytes: Some(4 << 20),
            streams: Some(2),
            host_memory: Some("pinned".into()),
            src_node: Some(0),
            dst_node: Some(1),
            cpu_node: Some(0),
            ..CaseParams::default()
        }
    }

    #[test]
    fn h2d_reads_its_source_node_and_d2h_its_destination_node() {
        let s = CopySpec::from_case(&case(PathId::H2d, base())).unwrap();
        assert_eq!(s.gpu, "gpu0");
        assert_eq!((s.size_bytes, s.streams), (4 << 20, 2));
        assert_eq!(s.host_memory, HostMemory::Pinned);
        assert_eq!(s.flows.len(), 1);
        assert_eq!(s.flows[0].direction, Direction::H2d);
        assert_eq!(s.flows[0].host_node, Some(0));
        assert_eq!(s.cpu_node, Some(0));
        assert_eq!(s.device_bytes(), 2 * (4 << 20));

        let s = CopySpec::from_case(&case(PathId::D2h, base())).unwrap();
        assert_eq!(s.flows[0].direction, Direction::D2h);
        assert_eq!(s.flows[0].host_node, Some(1));
    }

    #[test]
    fn a_case_of_another_path_or_workload_fails_with_what_it_was() {
        assert_eq!(
            CopySpec::from_case(&case(PathId::HostRam, base())).unwrap_err(),
            ParamError::NotACopySpec("host_copy")
        );
        let mut c = case(PathId::H2d, base());
        c.path = PathId::HostRam;
        assert_eq!(
            CopySpec::from_case(&c).unwrap_err(),
            ParamError::NotACopyPath(PathId::HostRam)
        );
        let mut p = base();
        p.host_memory = Some("pageable".into());
        assert_eq!(
            CopySpec::from_case(&case(PathId::D2h, p))
                .unwrap()
                .host_memory,
            HostMemory::Pageable
        );
    }

    /// A one-stream case of `path`.
    fn spec_of(path: PathId, size_bytes: u64, host_memory: &str) -> CopySpec {
        let mut p = base();
        p.streams = Some(1);
        p.size_bytes = Some(size_bytes);
        p.host_memory = Some(host_memory.into());
        if path == PathId::Duplex {
            p.direction = Some("h2d".into());
        }
        CopySpec::from_case(&case(path, p)).unwrap()
    }

    #[test]
    fn small_duplex_one_stream_d2h_and_one_stream_d2d_search_placement_and_nothing_else_does() {
        let placements = |path, size, memory, streams| {
            let mut p = base();
            p.size_bytes = Some(size);
            p.host_memory = Some(String::from(memory));
            p.streams = Some(streams);
            if path == PathId::Duplex {
                p.direction = Some("h2d".into());
            }
            CopySpec::from_case(&case(path, p)).unwrap().placements()
        };
        let home = &[HOME_PLACEMENT][..];
        // (path, host memory, streams, searches)
        let expected = [
            (PathId::Duplex, "pinned", 1, true),
            (PathId::Duplex, "pinned", 2, false),
            (PathId::D2h, "pinned", 1, true),
            (PathId::D2h, "pinned", 2, false),
            (PathId::D2d, "pinned", 1, true),
            (PathId::D2d, "pinned", 2, false),
            (PathId::H2d, "pinned", 1, false),
            (PathId::D2h, "pageable", 1, false),
            (PathId::H2d, "pageable", 1, false),
        ];
        for size in [128 << 10, 512 << 10, 1 << 20, 2 << 20] {
            for (path, memory, streams, searches) in expected {
                let want = match (searches, path) {
                    (false, _) => home,
                    (true, PathId::D2d) => &D2D_SEARCH_PLACEMENTS[..],
                    (true, _) => &SEARCH_PLACEMENTS[..],
                };
                let got = placements(path, size, memory, streams);
                assert_eq!(got, want, "{path:?} {memory} ×{streams} {size}");
            }
        }
        // One byte past the limit: placement made no difference there.
        assert!(!spec_of(PathId::Duplex, (2 << 20) + 1, "pinned").searches_placement());
        assert_eq!(placements(PathId::D2h, (2 << 20) + 1, "pinned", 1), home);
        assert!(!spec_of(PathId::D2d, 256 << 20, "pinned").searches_placement());
        assert!(spec_of(PathId::Duplex, 2 << 20, "pinned").searches_placement());
        // D2D searches up to its own limit, past the duplex one.
        assert_eq!(
            placements(PathId::D2d, 16 << 20, "pinned", 1),
            &D2D_SEARCH_PLACEMENTS[..]
        );
        assert_eq!(placements(PathId::D2d, (16 << 20) + 1, "pinned", 1), home);
        assert_eq!(placements(PathId::D2d, 16 << 20, "pinned", 4), home);
        assert_eq!(placements(PathId::D2h, 16 << 20, "pinned", 1), home);
    }

    #[test]
    fn a_searching_d2d_case_has_room_behind_both_ends_and_no_host_side() {
        let size = 16usize << 20;
        let s = spec_of(PathId::D2d, size as u64, "pinned");
        let largest =
            |of: fn(&CopyPlacement) -> usize| D2D_SEARCH_PLACEMENTS.iter().map(of).max().unwrap();
        let (src, dst) = (
            largest(|p| p.device_source_offset_bytes),
            largest(|p| p.device_destination_offset_bytes),
        );
        assert_eq!((src, dst), (233600 << 10, 243456 << 10));
        assert_eq!(s.device_source_bytes(), size + src);
        assert_eq!(s.device_destination_bytes(), size + dst);
        assert_eq!(s.device_bytes(), (2 * size + src + dst) as u64);
        assert_eq!(D2D_SEARCH_PLACEMENTS[0], HOME_PLACEMENT);
        let sources: Vec<usize> = D2D_SEARCH_PLACEMENTS
            .iter()
            .map(|p| p.device_source_offset_bytes)
            .collect();
        for (i, p) in D2D_SEARCH_PLACEMENTS.iter().enumerate() {
            assert_eq!(
                (p.host_source_offset_bytes, p.host_destination_offset_bytes),
                (0, 0)
            );
            for off in [
                p.device_source_offset_bytes,
                p.device_destination_offset_bytes,
            ] {
                assert_eq!(off % (64 << 10), 0, "{p:?}");
                assert!(off <= D2D_SEARCH_REACH_BYTES, "{p:?}");
            }
            assert!(
                !sources[..i].contains(&p.device_source_offset_bytes),
                "{p:?}"
            );
            // Home on the case's own stream; then every 4th standing stream, each once.
            assert_eq!(p.queue, 4 * i, "{p:?}");
        }
        // The other searches never move a copy off its own stream (what standing streams do
        // to host copies was not measured).
        assert!(SEARCH_PLACEMENTS.iter().all(|p| p.queue == 0));
    }

    #[test]
    fn a_searching_case_allocates_room_behind_each_moved_end_for_its_farthest_placement() {
        let size = 512usize << 10;
        let largest =
            |of: fn(&CopyPlacement) -> usize| SEARCH_PLACEMENTS.iter().map(of).max().unwrap();
        let device_src = largest(|p| p.device_source_offset_bytes);
        let host_src = largest(|p| p.host_source_offset_bytes);
        let host_dst = largest(|p| p.host_destination_offset_bytes);
        assert_eq!(
            (device_src, host_src, host_dst),
            (4160 << 10, 3904 << 10, 3712 << 10)
        );
        // One H2D destination and one D2H source in device memory; the destination stays.
        let s = spec_of(PathId::Duplex, size as u64, "pinned");
        assert_eq!(s.device_destination_bytes(), size);
        assert_eq!(s.device_source_bytes(), size + device_src);
        assert_eq!(s.device_bytes(), (size + size + device_src) as u64);
        assert_eq!(s.host_source_bytes(), size + host_src);
        assert_eq!(s.host_destination_bytes(), size + host_dst);
        for p in SEARCH_PLACEMENTS {
            assert!(p.device_source_offset_bytes + size <= s.device_source_bytes());
            assert!(p.host_source_offset_bytes + size <= s.host_source_bytes());
            assert!(p.host_destination_offset_bytes + size <= s.host_destination_bytes());
        }
        // A one-stream D2H case: room behind its device source and its host destination.
        let mut p = base();
        p.size_bytes = Some(size as u64);
        p.streams = Some(1);
        let d2h = CopySpec::from_case(&case(PathId::D2h, p)).unwrap();
        assert_eq!(d2h.device_bytes(), (size + device_src) as u64);
        assert_eq!(d2h.host_destination_bytes(), size + host_dst);
        // A case that does not search takes exactly its size.
        let h2d = spec_of(PathId::H2d, size as u64, "pinned");
        assert_eq!(
            (
                h2d.device_destination_bytes(),
                h2d.device_source_bytes(),
                h2d.host_source_bytes(),
                h2d.host_destination_bytes()
            ),
            (size, size, size, size)
        );
    }

    #[test]
    fn placements_start_at_home_are_distinct_leave_the_device_destination_and_keep_the_pattern_aligned(
    ) {
        assert_eq!(SEARCH_PLACEMENTS[0], HOME_PLACEMENT);
        assert_eq!(
            HOME_PLACEMENT,
            CopyPlacement {
                device_source_offset_bytes: 0,
                device_destination_offset_bytes: 0,
                host_source_offset_bytes: 0,
                host_destination_offset_bytes: 0,
                queue: 0,
            }
        );
        let device_sources: Vec<usize> = SEARCH_PLACEMENTS
            .iter()
            .map(|p| p.device_source_offset_bytes)
            .collect();
        for (i, p) in SEARCH_PLACEMENTS.iter().enumerate() {
            assert_eq!(p.device_destination_offset_bytes, 0, "{p:?}");
            for off in [
                p.device_source_offset_bytes,
                p.host_source_offset_bytes,
                p.host_destination_offset_bytes,
            ] {
                assert_eq!(off % (64 << 10), 0, "{p:?}");
            }
            // Every try moves the device source somewhere new: a one-way D2H case, which
            // ignores the host source, never tries the same placement twice.
            assert!(
                !device_sources[..i].contains(&p.device_source_offset_bytes),
                "{p:?}"
            );
        }
    }

    #[test]
    fn cases_that_search_placement_take_small_host_pages_and_the_others_huge_ones() {
        // (path, size, host memory, pages)
        let expected = [
            (PathId::Duplex, 128u64 << 10, "pinned", Pages::Small),
            (PathId::Duplex, 2 << 20, "pinned", Pages::Small),
            (PathId::Duplex, (2 << 20) + 1, "pinned", Pages::Huge),
            (PathId::Duplex, 4 << 20, "pinned", Pages::Huge),
            (PathId::D2h, 128 << 10, "pinned", Pages::Small),
            (PathId::D2h, 2 << 20, "pinned", Pages::Small),
            (PathId::D2h, (2 << 20) + 1, "pinned", Pages::Huge),
            (PathId::D2h, 128 << 10, "pageable", Pages::Huge),
            (PathId::H2d, 128 << 10, "pinned", Pages::Huge),
            (PathId::H2d, 256 << 20, "pinned", Pages::Huge),
            (PathId::H2d, 4 << 20, "pageable", Pages::Huge),
        ];
        for (path, size, memory, pages) in expected {
            let s = spec_of(path, size, memory);
            assert_eq!(s.host_pages(), pages, "{path:?} {size} {memory}");
        }
        // Two streams of a small D2H copy do not search, and keep huge pages.
        let mut p = base();
        p.size_bytes = Some(128 << 10);
        let two = CopySpec::from_case(&case(PathId::D2h, p)).unwrap();
        assert_eq!((two.streams, two.host_pages()), (2, Pages::Huge));
    }

    #[test]
    fn duplex_runs_both_directions_and_reports_the_named_one() {
        let mut p = base();
        p.direction = Some("d2h".into());
        let s = CopySpec::from_case(&case(PathId::Duplex, p)).unwrap();
        let dirs: Vec<_> = s.flows.iter().map(|f| f.direction).collect();
        assert_eq!(dirs, [Direction::H2d, Direction::D2h]);
        assert_eq!(s.flows[s.measured].direction, Direction::D2h);
        // Both directions' host buffers on the one node the case names.
        assert_eq!(s.flows[0].host_node, Some(0));
        assert_eq!(s.flows[1].host_node, Some(0));
        assert_eq!(s.device_bytes(), 2 * 2 * (4 << 20));
    }

    #[test]
    fn d2d_has_no_host_side() {
        let s = CopySpec::from_case(&case(PathId::D2d, base())).unwrap();
        assert!(!s.uses_host());
        assert_eq!(s.cpu_node, None);
        assert_eq!(s.device_bytes(), 2 * 2 * (4 << 20));
    }

    #[test]
    fn l2_rule() {
        const H200_L2: u64 = 60 * 1024 * 1024;
        // 2 × 16 MiB × 1 = 32 MiB fits in 60 MiB; 2 × 16 MiB × 2 = 64 MiB does not.
        assert!(l2_resident(16 << 20, 1, H200_L2));
        assert!(!l2_resident(16 << 20, 2, H200_L2));
        assert!(l2_resident(30 << 20, 1, H200_L2));
        assert!(!l2_resident((30 << 20) + 1, 1, H200_L2));
        assert!(!l2_resident(256 << 20, 1, H200_L2));
        // Unknown L2 size: never claim a cache figure.
        assert!(!l2_resident(128 << 10, 1, 0));
        assert!(!l2_resident(u64::MAX, u32::MAX, H200_L2));
    }
}
