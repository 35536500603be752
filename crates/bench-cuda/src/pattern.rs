//! The data every copy carries: a pattern unique to the case, the stream and the byte offset,
//! so a copy that moved nothing, moved stale data or moved the wrong part of a buffer is caught.

/// The pattern's 8-byte word at `index` for `seed`.
fn word(seed: u64, index: u64) -> u64 {
    (seed ^ index).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (index << 1) ^ seed.rotate_left(29)
}

/// A seed for one buffer: FNV-1a of the case key, mixed with the stream and direction.
pub fn seed(case_key: &str, stream: u32, direction: u8) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in case_key
        .bytes()
        .chain(stream.to_le_bytes())
        .chain([direction])
    {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Buffers larger than this are filled, checked and poisoned by several threads.
pub(crate) const PARALLEL_BYTES: usize = 32 << 20;
/// Bytes per thread's piece (a multiple of 8, so every piece starts on a word).
pub(crate) const PIECE_BYTES: usize = 16 << 20;

/// Fill `buf` with the pattern as it stands at byte `offset` of the whole buffer
/// (`offset` is a multiple of 8). Large buffers are filled by several threads.
pub fn fill(buf: &mut [u8], seed: u64, offset: usize) {
    debug_assert_eq!(offset % 8, 0);
    if buf.len() <= PARALLEL_BYTES {
        return fill_serial(buf, seed, offset);
    }
    let pieces = buf
        .chunks_mut(PIECE_BYTES)
        .enumerate()
        .map(|(i, c)| (offset + i * PIECE_BYTES, c))
        .collect();
    on_threads(pieces, |(at, piece)| fill_serial(piece, seed, at));
}

fn fill_serial(buf: &mut [u8], seed: u64, offset: usize) {
    let first = (offset / 8) as u64;
    let mut chunks = buf.chunks_exact_mut(8);
    let mut index = first;
    for chunk in &mut chunks {
        chunk.copy_from_slice(&word(seed, index).to_le_bytes());
        index += 1;
    }
    let tail = chunks.into_remainder();
    let n = tail.len();
    tail.copy_from_slice(&word(seed, index).to_le_bytes()[..n]);
}

/// A byte that differs from the pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mismatch {
    /// Offset in the whole buffer.
    pub offset: usize,
    pub expected: u8,
    pub found: u8,
}

/// The first byte of `buf` (holding bytes from `offset` of the whole buffer on) that differs
/// from the pattern. Large buffers are checked by several threads; the mismatch reported is
/// still the first one.
pub fn check(buf: &[u8], seed: u64, offset: usize) -> Option<Mismatch> {
    debug_assert_eq!(offset % 8, 0);
    if buf.len() <= PARALLEL_BYTES {
        return check_serial(buf, seed, offset);
    }
    let pieces = buf
        .chunks(PIECE_BYTES)
        .enumerate()
        .map(|(i, c)| (offset + i * PIECE_BYTES, c))
        .collect();
    // Results come back in buffer order: the first mismatch found is the first one.
    on_threads(pieces, |(at, piece)| check_serial(piece, seed, at))
        .into_iter()
        .flatten()
        .next()
}

/// `f` applied to every piece, on up to [`worker_count`] threads, results in piece order. A
/// panic in a worker is raised again here (a check must never pass because a worker died).
pub(crate) fn on_threads<T: Send, R: Send>(pieces: Vec<T>, f: impl Fn(T) -> R + Sync) -> Vec<R> {
    let per = pieces.len().div_ceil(worker_count()).max(1);
    let mut groups: Vec<Vec<T>> = Vec::new();
    let mut rest = pieces.into_iter().peekable();
    while rest.peek().is_some() {
        groups.push(rest.by_ref().take(per).collect());
    }
    let f = &f;
    std::thread::scope(|scope| {
        let handles: Vec<_> = groups
            .into_iter()
            .map(|g| scope.spawn(move || g.into_iter().map(f).collect::<Vec<R>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    })
}

fn check_serial(buf: &[u8], seed: u64, offset: usize) -> Option<Mismatch> {
    let first = (offset / 8) as u64;
    let mut chunks = buf.chunks_exact(8);
    for (i, chunk) in (&mut chunks).enumerate() {
        let expected = word(seed, first + i as u64);
        let found = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
        if found != expected {
            return Some(first_byte(offset + i * 8, chunk, &expected.to_le_bytes()));
        }
    }
    let tail = chunks.remainder();
    let at = buf.len() - tail.len();
    let expected = word(seed, first + (at / 8) as u64).to_le_bytes();
    (tail != &expected[..tail.len()]).then(|| first_byte(offset + at, tail, &expected))
}

fn first_byte(offset: usize, found: &[u8], expected: &[u8]) -> Mismatch {
    let j = found
        .iter()
        .zip(expected)
        .position(|(a, b)| a != b)
        .unwrap_or(0);
    Mismatch {
        offset: offset + j,
        expected: expected[j],
        found: found[j],
    }
}

/// Threads for a large fill or check: the CPUs this thread may run on, at most 16.
fn worker_count() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, 16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filled_buffer_checks_clean_and_a_flipped_byte_is_found() {
        let s = seed("h2d/cuda-copy/gpu0/4MiB/s1", 0, 1);
        let mut buf = vec![0u8; 4099];
        fill(&mut buf, s, 0);
        assert_eq!(check(&buf, s, 0), None);
        buf[4097] ^= 0x10;
        let m = check(&buf, s, 0).unwrap();
        assert_eq!(m.offset, 4097);
        assert_eq!(m.found, m.expected ^ 0x10);
    }

    #[test]
    fn windows_match_the_whole() {
        let s = seed("d2d", 3, 2);
        let mut whole = vec![0u8; 1 << 16];
        fill(&mut whole, s, 0);
        let mut window = vec![0u8; 1000];
        fill(&mut window, s, 4096);
        assert_eq!(&whole[4096..5096], &window[..]);
        assert_eq!(check(&whole[8192..9000], s, 8192), None);
        // The same bytes read as another window, another stream or another case all fail.
        assert!(check(&whole[8192..9000], s, 8200).is_some());
        assert!(check(&whole[..4096], seed("d2d", 4, 2), 0).is_some());
        assert!(check(&whole[..4096], seed("d2d-", 3, 2), 0).is_some());
        // Zeroed memory (a copy that never happened) fails at once.
        assert_eq!(check(&[0u8; 64], s, 0).map(|m| m.offset < 8), Some(true));
    }

    #[test]
    fn threaded_fill_and_check_agree_with_the_serial_ones() {
        let s = seed("h2d/cuda-copy/gpu0/256MiB/s8", 7, 1);
        // Larger than PARALLEL_BYTES, not a multiple of the piece or of 8, from an offset.
        let len = PARALLEL_BYTES + PIECE_BYTES + 13;
        let mut big = vec![0u8; len];
        fill(&mut big, s, 64);
        let mut serial = vec![0u8; len];
        fill_serial(&mut serial, s, 64);
        assert!(big == serial, "threaded fill differs from the serial one");
        assert_eq!(check(&big, s, 64), None);
        // Two corruptions in different pieces: the first one is reported.
        big[len - 3] ^= 1;
        big[PIECE_BYTES + 5] ^= 0x80;
        let m = check(&big, s, 64).unwrap();
        assert_eq!(m.offset, 64 + PIECE_BYTES + 5);
        assert_eq!(m.found, m.expected ^ 0x80);
        big[PIECE_BYTES + 5] ^= 0x80;
        assert_eq!(check(&big, s, 64).map(|m| m.offset), Some(64 + len - 3));
    }
}
