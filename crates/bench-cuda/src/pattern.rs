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

/// Fill `buf` with the pattern as it stands at byte `offset` of the whole buffer
/// (`offset` is a multiple of 8).
pub fn fill(buf: &mut [u8], seed: u64, offset: usize) {
    debug_assert_eq!(offset % 8, 0);
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
/// from the pattern.
pub fn check(buf: &[u8], seed: u64, offset: usize) -> Option<Mismatch> {
    debug_assert_eq!(offset % 8, 0);
    let first = (offset / 8) as u64;
    for (i, chunk) in buf.chunks(8).enumerate() {
        let expected = word(seed, first + i as u64).to_le_bytes();
        if chunk != &expected[..chunk.len()] {
            let j = chunk
                .iter()
                .zip(expected)
                .position(|(a, b)| *a != b)
                .unwrap_or(0);
            return Some(Mismatch {
                offset: offset + i * 8 + j,
                expected: expected[j],
                found: chunk[j],
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filled_buffer_checks_clean_and_a_flipped_byte_is_found() {
        let s = seed("h2d/gpu0/4MiB/s1", 0, 1);
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
}
