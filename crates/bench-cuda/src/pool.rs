//! Buffers kept from one case to the next on a GPU.
//!
//! Mapping, pre-faulting, pinning and pattern-filling 256 MiB of host memory, and filling as
//! much device memory, costs more than the timed part of a case of that size (a 256 MiB, 8-stream
//! case spent about 4 of its 6 s there). So each buffer a case uses is taken from this pool and
//! given back when the case ends: one buffer per role (source or destination), lane (stream
//! index) and, for host memory, node, kind and pages. A case of size S uses S bytes from a
//! buffer's start, or, for a case that searches placement (small duplex and one-stream D2H),
//! from one of the offsets it tries in each buffer (`CopySpec::placements`; the case asks for
//! room for the farthest).
//!
//! Keeping the data check honest:
//! - a source is only ever read by copies, so its pattern (a function of the buffer's seed and the
//!   byte offset, see `pattern`) stays valid; it is written once, up to the largest size used;
//! - a destination is poisoned over the case's bytes before the case, so a copy that moved
//!   nothing, or only part, cannot pass the check with data an earlier case left there.
//!
//! Capacity: [`Pool::expect`] is told the largest size each buffer will serve (from the cases the
//! runner announces), so a buffer is allocated once at that size instead of growing with the
//! plan's ascending sizes. Without a hint a buffer is allocated at the size asked for and
//! replaced when a larger one is needed.

use std::collections::HashMap;
use std::sync::Arc;

use cudarc::driver::CudaContext;

use crate::driver::{DeviceBuffer, HostBuffer};
use crate::error::CudaError;
use crate::params::{CopySpec, Direction, HostMemory};
use crate::pattern;
use hwc_numa::Pages;

/// Which end of a copy a buffer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Holds the pattern; copies read it.
    Src,
    /// Poisoned before each case; copies write it.
    Dst,
}

/// A host buffer's identity in the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HostKey {
    pub role: Role,
    pub node: Option<u32>,
    pub memory: HostMemory,
    pub pages: Pages,
    pub lane: u32,
}

impl HostKey {
    /// The host buffer of `role` that lane `lane` of `spec`'s flow with host memory on `node`
    /// copies from or to.
    pub fn of(spec: &CopySpec, node: Option<u32>, lane: u32, role: Role) -> HostKey {
        HostKey {
            role,
            node,
            memory: spec.host_memory,
            pages: spec.host_pages(),
            lane,
        }
    }
}

/// A device buffer's identity in the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DeviceKey {
    pub role: Role,
    pub lane: u32,
}

/// Byte poisoned into destinations before a case (the pattern's bytes are pseudo-random, so a
/// stale or missing copy shows up at its first byte).
pub const POISON: u8 = 0xA5;

/// A buffer lent to a case.
pub struct Lent<K, B> {
    pub key: K,
    pub buf: B,
    /// The pattern's seed (sources; destinations keep the seed they had, unused).
    pub seed: u64,
    /// Bytes from offset 0 that hold the pattern (sources only).
    filled_bytes: usize,
    /// The CPU wrote it since its lines were last put out of the CPU caches, so it may hold
    /// some of them modified: a case flushes such a host buffer first (see `cache`), and only
    /// such a one.
    pub cached: bool,
}

/// The buffers of one GPU's context.
#[derive(Default)]
pub struct Pool {
    host: HashMap<HostKey, Lent<HostKey, HostBuffer>>,
    device: HashMap<DeviceKey, Lent<DeviceKey, DeviceBuffer>>,
    host_hint: HashMap<HostKey, usize>,
    device_hint: HashMap<DeviceKey, usize>,
}

/// The host and device buffers `spec` uses, as pool keys: (H2D, D2H, D2D) lanes of every flow.
pub fn keys_of(spec: &CopySpec) -> (Vec<HostKey>, Vec<DeviceKey>) {
    let mut host = Vec::new();
    let mut device = Vec::new();
    for flow in &spec.flows {
        for lane in 0..spec.streams {
            let host_key = |role| HostKey::of(spec, flow.host_node, lane, role);
            let dev = |role| DeviceKey { role, lane };
            match flow.direction {
                Direction::H2d => {
                    host.push(host_key(Role::Src));
                    device.push(dev(Role::Dst));
                }
                Direction::D2h => {
                    device.push(dev(Role::Src));
                    host.push(host_key(Role::Dst));
                }
                Direction::D2d => {
                    device.push(dev(Role::Src));
                    device.push(dev(Role::Dst));
                }
            }
        }
    }
    (host, device)
}

fn role_tag(role: Role) -> u8 {
    match role {
        Role::Src => 1,
        Role::Dst => 2,
    }
}

fn host_seed(k: &HostKey) -> u64 {
    let node = k.node.map_or("any".to_string(), |n| n.to_string());
    pattern::seed(
        &format!("host/{node}/{}/{:?}", k.memory.as_str(), k.pages),
        k.lane,
        role_tag(k.role),
    )
}

fn device_seed(k: &DeviceKey) -> u64 {
    pattern::seed("device", k.lane, role_tag(k.role))
}

/// What the pool needs of a kind of buffer.
trait Poolable: Sized {
    type Key: Copy + Eq + std::hash::Hash;
    /// What allocating one needs (the CUDA context).
    type Ctx;
    fn role(key: &Self::Key) -> Role;
    fn seed(key: &Self::Key) -> u64;
    fn alloc(ctx: &Self::Ctx, key: &Self::Key, len: usize) -> Result<Self, CudaError>;
    fn capacity(&self) -> usize;
    /// Write the pattern of `seed` over `[from, to)` (`from` a multiple of 8). Returns whether
    /// CPU caches may now hold written lines.
    fn write_pattern(&mut self, from: usize, to: usize, seed: u64) -> Result<bool, CudaError>;
    /// Poison `[0, len)`; returns as [`Poolable::write_pattern`] does.
    fn poison(&mut self, len: usize) -> Result<bool, CudaError>;
}

impl Poolable for HostBuffer {
    type Key = HostKey;
    type Ctx = Arc<CudaContext>;
    fn role(key: &HostKey) -> Role {
        key.role
    }
    fn seed(key: &HostKey) -> u64 {
        host_seed(key)
    }
    fn alloc(ctx: &Arc<CudaContext>, key: &HostKey, len: usize) -> Result<Self, CudaError> {
        HostBuffer::new(ctx, len, key.node, key.memory, key.pages)
    }
    fn capacity(&self) -> usize {
        self.len()
    }
    fn write_pattern(&mut self, from: usize, to: usize, seed: u64) -> Result<bool, CudaError> {
        pattern::fill(&mut self.as_mut_slice()[from..to], seed, from);
        Ok(true)
    }
    fn poison(&mut self, len: usize) -> Result<bool, CudaError> {
        Ok(!crate::cache::fill_uncached_on_threads(
            &mut self.as_mut_slice()[..len],
            POISON,
        ))
    }
}

impl Poolable for DeviceBuffer {
    type Key = DeviceKey;
    type Ctx = Arc<CudaContext>;
    fn role(key: &DeviceKey) -> Role {
        key.role
    }
    fn seed(key: &DeviceKey) -> u64 {
        device_seed(key)
    }
    fn alloc(ctx: &Arc<CudaContext>, _key: &DeviceKey, len: usize) -> Result<Self, CudaError> {
        DeviceBuffer::new(ctx, len)
    }
    fn capacity(&self) -> usize {
        self.len()
    }
    // Device memory is written by DMA through a staging buffer, which no copy of a case uses:
    // nothing of it is left in a CPU cache that the case's copies meet.
    fn write_pattern(&mut self, from: usize, to: usize, seed: u64) -> Result<bool, CudaError> {
        self.write_range(from, to - from, |chunk, off| {
            pattern::fill(chunk, seed, off)
        })?;
        Ok(false)
    }
    fn poison(&mut self, len: usize) -> Result<bool, CudaError> {
        self.fill_prefix(len, POISON)?;
        Ok(false)
    }
}

/// Take `key`'s buffer out of `pooled` (a new one when there is none of `len` bytes or more,
/// sized to the hint when one was given), and prepare its first `len` bytes for its role.
fn take<B: Poolable>(
    pooled: &mut HashMap<B::Key, Lent<B::Key, B>>,
    hints: &HashMap<B::Key, usize>,
    ctx: &B::Ctx,
    key: B::Key,
    len: usize,
) -> Result<Lent<B::Key, B>, CudaError> {
    let mut lent = match pooled.remove(&key) {
        Some(l) if l.buf.capacity() >= len => l,
        // A smaller one is dropped here, first: its memory may be what the new one needs.
        _ => {
            let hint = hints.get(&key).copied().unwrap_or(0);
            let buf = match B::alloc(ctx, &key, len.max(hint)) {
                Ok(b) => b,
                Err(_) if hint > len => B::alloc(ctx, &key, len)?,
                Err(e) => return Err(e),
            };
            Lent {
                key,
                buf,
                seed: B::seed(&key),
                filled_bytes: 0,
                cached: false,
            }
        }
    };
    match B::role(&key) {
        Role::Src if lent.filled_bytes < len => {
            let from = lent.filled_bytes & !7;
            lent.cached |= lent.buf.write_pattern(from, len, lent.seed)?;
            lent.filled_bytes = len;
        }
        Role::Src => {}
        Role::Dst => lent.cached = lent.buf.poison(len)?,
    }
    Ok(lent)
}

impl Pool {
    /// Remember the largest size each buffer of `specs` will serve.
    pub fn expect<'s>(&mut self, specs: impl IntoIterator<Item = &'s CopySpec>) {
        for spec in specs {
            let (host, device) = keys_of(spec);
            for k in host {
                let bytes = match k.role {
                    Role::Src => spec.host_source_bytes(),
                    Role::Dst => spec.host_destination_bytes(),
                };
                let e = self.host_hint.entry(k).or_default();
                *e = (*e).max(bytes);
            }
            for k in device {
                let bytes = match k.role {
                    Role::Src => spec.device_source_bytes(),
                    Role::Dst => spec.device_destination_bytes(),
                };
                let e = self.device_hint.entry(k).or_default();
                *e = (*e).max(bytes);
            }
        }
    }

    /// Device memory the pool holds now, in bytes.
    pub fn device_bytes(&self) -> u64 {
        self.device.values().map(|l| l.buf.len() as u64).sum()
    }

    /// Free every pooled device buffer (when a case needs the memory).
    pub fn release_device(&mut self) {
        self.device.clear();
    }

    /// A host buffer of at least `len` bytes for `key`: a source holds the pattern over
    /// `[0, len)`, a destination is poisoned there.
    pub fn take_host(
        &mut self,
        ctx: &Arc<CudaContext>,
        key: HostKey,
        len: usize,
    ) -> Result<Lent<HostKey, HostBuffer>, CudaError> {
        take(&mut self.host, &self.host_hint, ctx, key, len)
    }

    /// A device buffer of at least `len` bytes for `key`, prepared as [`Pool::take_host`] does.
    pub fn take_device(
        &mut self,
        ctx: &Arc<CudaContext>,
        key: DeviceKey,
        len: usize,
    ) -> Result<Lent<DeviceKey, DeviceBuffer>, CudaError> {
        take(&mut self.device, &self.device_hint, ctx, key, len)
    }

    /// Take a host buffer back (its streams have been synchronised).
    pub fn give_host(&mut self, lent: Lent<HostKey, HostBuffer>) {
        self.host.insert(lent.key, lent);
    }

    /// Take a device buffer back (its streams have been synchronised).
    pub fn give_device(&mut self, lent: Lent<DeviceKey, DeviceBuffer>) {
        self.device.insert(lent.key, lent);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::Flow;

    fn spec(flows: Vec<Flow>, streams: u32, size: usize) -> CopySpec {
        CopySpec {
            gpu: "gpu0".into(),
            size_bytes: size,
            streams,
            host_memory: HostMemory::Pinned,
            cpu_node: Some(0),
            flows,
            measured: 0,
        }
    }

    fn flow(direction: Direction, host_node: Option<u32>) -> Flow {
        Flow {
            direction,
            host_node,
        }
    }

    #[test]
    fn every_lane_of_every_flow_has_its_own_buffers() {
        let duplex = spec(
            vec![flow(Direction::H2d, Some(0)), flow(Direction::D2h, Some(0))],
            2,
            1 << 20,
        );
        let (host, device) = keys_of(&duplex);
        assert_eq!(host.len(), 4);
        assert_eq!(device.len(), 4);
        let mut h = host.clone();
        h.sort_by_key(|k| (role_tag(k.role), k.lane));
        h.dedup();
        assert_eq!(h.len(), 4, "no two lanes share a host buffer: {host:?}");
        let mut d = device.clone();
        d.sort_by_key(|k| (role_tag(k.role), k.lane));
        d.dedup();
        assert_eq!(d.len(), 4, "no two lanes share a device buffer: {device:?}");
        // D2D: source and destination of each lane.
        let (host, device) = keys_of(&spec(vec![flow(Direction::D2d, None)], 4, 4096));
        assert!(host.is_empty());
        assert_eq!(device.len(), 8);
    }

    #[test]
    fn seeds_differ_by_role_lane_node_memory_and_pages() {
        let k = HostKey {
            role: Role::Src,
            node: Some(0),
            memory: HostMemory::Pinned,
            pages: Pages::Huge,
            lane: 0,
        };
        let others = [
            HostKey { lane: 1, ..k },
            HostKey {
                role: Role::Dst,
                ..k
            },
            HostKey { node: Some(1), ..k },
            HostKey { node: None, ..k },
            HostKey {
                memory: HostMemory::Pageable,
                ..k
            },
            HostKey {
                pages: Pages::Small,
                ..k
            },
        ];
        for o in others {
            assert_ne!(host_seed(&k), host_seed(&o), "{o:?}");
        }
        let d = DeviceKey {
            role: Role::Src,
            lane: 0,
        };
        assert_ne!(device_seed(&d), device_seed(&DeviceKey { lane: 1, ..d }));
        assert_ne!(host_seed(&k), device_seed(&d));
    }

    /// A buffer in plain memory that counts allocations and can refuse large ones.
    struct Fake {
        bytes: Vec<u8>,
        pattern_writes: Vec<(usize, usize)>,
    }

    struct FakeCtx {
        allocations: std::cell::RefCell<Vec<usize>>,
        refuse_above: usize,
    }

    impl Poolable for Fake {
        type Key = DeviceKey;
        type Ctx = FakeCtx;
        fn role(key: &DeviceKey) -> Role {
            key.role
        }
        fn seed(key: &DeviceKey) -> u64 {
            device_seed(key)
        }
        fn alloc(ctx: &FakeCtx, _key: &DeviceKey, len: usize) -> Result<Self, CudaError> {
            if len > ctx.refuse_above {
                return Err(CudaError::unavailable("out of memory", None));
            }
            ctx.allocations.borrow_mut().push(len);
            Ok(Fake {
                bytes: vec![0; len],
                pattern_writes: Vec::new(),
            })
        }
        fn capacity(&self) -> usize {
            self.bytes.len()
        }
        // As a host buffer: written by the CPU, the pattern with plain stores, the poison
        // with non-temporal ones.
        fn write_pattern(&mut self, from: usize, to: usize, seed: u64) -> Result<bool, CudaError> {
            pattern::fill(&mut self.bytes[from..to], seed, from);
            self.pattern_writes.push((from, to));
            Ok(true)
        }
        fn poison(&mut self, len: usize) -> Result<bool, CudaError> {
            Ok(!crate::cache::fill_uncached(&mut self.bytes[..len], POISON))
        }
    }

    #[test]
    fn buffers_are_reused_sources_filled_once_destinations_poisoned_every_time() {
        let ctx = FakeCtx {
            allocations: Default::default(),
            refuse_above: usize::MAX,
        };
        let src = DeviceKey {
            role: Role::Src,
            lane: 0,
        };
        let dst = DeviceKey {
            role: Role::Dst,
            lane: 0,
        };
        let hints: HashMap<DeviceKey, usize> = [(src, 1 << 16), (dst, 1 << 16)].into();
        let mut pooled: HashMap<DeviceKey, Lent<DeviceKey, Fake>> = HashMap::new();

        // First use: allocated at the hint, the source filled only as far as asked.
        let s = take(&mut pooled, &hints, &ctx, src, 4096).unwrap();
        assert_eq!(s.buf.capacity(), 1 << 16);
        assert_eq!(s.buf.pattern_writes, vec![(0, 4096)]);
        assert_eq!(pattern::check(&s.buf.bytes[..4096], s.seed, 0), None);
        pooled.insert(src, s);
        let mut d = take(&mut pooled, &hints, &ctx, dst, 4096).unwrap();
        assert_eq!(ctx.allocations.borrow().len(), 2, "two allocations");
        assert!(d.buf.bytes[..4096].iter().all(|&b| b == POISON));
        // A "copy" fills the destination; it goes back to the pool.
        d.buf.bytes[..8192].fill(0x11);
        pooled.insert(dst, d);

        // A larger case: no new allocation; the source's pattern is extended, not rewritten;
        // the destination is poisoned again over the whole case.
        let s = take(&mut pooled, &hints, &ctx, src, 8192).unwrap();
        assert_eq!(s.buf.pattern_writes, vec![(0, 4096), (4096, 8192)]);
        assert_eq!(pattern::check(&s.buf.bytes[..8192], s.seed, 0), None);
        let d = take(&mut pooled, &hints, &ctx, dst, 8192).unwrap();
        assert!(d.buf.bytes[..8192].iter().all(|&b| b == POISON));
        assert_eq!(*ctx.allocations.borrow(), vec![1 << 16, 1 << 16]);
        pooled.insert(src, s);

        // Beyond the capacity: the small one is replaced, the new one filled from 0.
        let s = take(&mut pooled, &hints, &ctx, src, 1 << 17).unwrap();
        assert_eq!(s.buf.capacity(), 1 << 17);
        assert_eq!(s.buf.pattern_writes, vec![(0, 1 << 17)]);
        assert_eq!(ctx.allocations.borrow().len(), 3);
    }

    #[test]
    fn a_buffer_is_marked_for_a_flush_only_when_the_cpu_wrote_it_with_plain_stores() {
        let ctx = FakeCtx {
            allocations: Default::default(),
            refuse_above: usize::MAX,
        };
        let key = |role| DeviceKey { role, lane: 0 };
        let hints: HashMap<DeviceKey, usize> = [(key(Role::Src), 1 << 16)].into();
        let mut pooled: HashMap<DeviceKey, Lent<DeviceKey, Fake>> = HashMap::new();
        // Filled: to be flushed. A case flushes it and gives it back.
        let mut s = take(&mut pooled, &hints, &ctx, key(Role::Src), 4096).unwrap();
        assert!(s.cached);
        s.cached = false;
        pooled.insert(key(Role::Src), s);
        // Only read since: nothing to flush. Its pattern extended: to be flushed again.
        let s = take(&mut pooled, &hints, &ctx, key(Role::Src), 4096).unwrap();
        assert!(!s.cached);
        pooled.insert(key(Role::Src), s);
        let s = take(&mut pooled, &hints, &ctx, key(Role::Src), 8192).unwrap();
        assert!(s.cached);
        // A destination poisoned with non-temporal stores needs no flush, whatever it held.
        let mut d = take(&mut pooled, &hints, &ctx, key(Role::Dst), 4096).unwrap();
        d.cached = true;
        pooled.insert(key(Role::Dst), d);
        let d = take(&mut pooled, &hints, &ctx, key(Role::Dst), 4096).unwrap();
        assert_eq!(d.cached, !cfg!(target_arch = "x86_64"));
        assert!(d.buf.bytes[..4096].iter().all(|&b| b == POISON));
    }

    #[test]
    fn a_hint_that_does_not_fit_falls_back_to_the_size_asked() {
        let ctx = FakeCtx {
            allocations: Default::default(),
            refuse_above: 1 << 20,
        };
        let key = DeviceKey {
            role: Role::Dst,
            lane: 3,
        };
        let hints: HashMap<DeviceKey, usize> = [(key, 1 << 30)].into();
        let mut pooled: HashMap<DeviceKey, Lent<DeviceKey, Fake>> = HashMap::new();
        let d = take(&mut pooled, &hints, &ctx, key, 4096).unwrap();
        assert_eq!(d.buf.capacity(), 4096);
        // Too large even alone: the error comes back.
        assert!(take(&mut pooled, &hints, &ctx, key, 2 << 20).is_err());
    }

    #[test]
    fn hints_keep_the_largest_size_per_buffer() {
        let mut pool = Pool::default();
        let small = spec(vec![flow(Direction::H2d, Some(0))], 8, 1 << 20);
        let large = spec(vec![flow(Direction::H2d, Some(0))], 1, 256 << 20);
        let d2d = spec(vec![flow(Direction::D2d, None)], 2, 1 << 30);
        pool.expect([&small, &large, &d2d]);
        let lane = |role, lane| DeviceKey { role, lane };
        assert_eq!(pool.device_hint[&lane(Role::Dst, 0)], 1 << 30);
        assert_eq!(pool.device_hint[&lane(Role::Dst, 7)], 1 << 20);
        assert_eq!(pool.device_hint[&lane(Role::Src, 1)], 1 << 30);
        assert!(!pool.device_hint.contains_key(&lane(Role::Src, 2)));
        let host0 = HostKey {
            role: Role::Src,
            node: Some(0),
            memory: HostMemory::Pinned,
            pages: Pages::Huge,
            lane: 0,
        };
        assert_eq!(pool.host_hint[&host0], 256 << 20);
        assert_eq!(pool.host_hint[&HostKey { lane: 5, ..host0 }], 1 << 20);
    }

    #[test]
    fn hints_leave_room_for_the_placements_a_small_duplex_tries() {
        let mut pool = Pool::default();
        let duplex = spec(
            vec![flow(Direction::H2d, Some(0)), flow(Direction::D2h, Some(0))],
            1,
            512 << 10,
        );
        assert!(duplex.searches_placement());
        pool.expect([&duplex]);
        let lane0 = |role| DeviceKey { role, lane: 0 };
        // The D2H source with room for its farthest offset; the H2D destination does not move.
        assert_eq!(pool.device_hint[&lane0(Role::Dst)], 512 << 10);
        assert_eq!(
            pool.device_hint[&lane0(Role::Src)],
            duplex.device_source_bytes()
        );
        assert!(duplex.device_source_bytes() > 512 << 10);
        // The host source and destination with room for theirs, in small pages: not the
        // huge-page buffers of the large copies.
        let host = |role| HostKey {
            role,
            node: Some(0),
            memory: HostMemory::Pinned,
            pages: Pages::Small,
            lane: 0,
        };
        assert_eq!(pool.host_hint[&host(Role::Src)], duplex.host_source_bytes());
        assert_eq!(
            pool.host_hint[&host(Role::Dst)],
            duplex.host_destination_bytes()
        );
        assert!(duplex.host_source_bytes() > 512 << 10);
        assert!(duplex.host_destination_bytes() > 512 << 10);
    }
}
