//! Seeded randomness beyond `rand`: picks from lists, name suffixes in the
//! Kubernetes alphabet, hex ids, and hashes and UUIDs stable per seed.

use std::fmt::Write as _;

use rand::Rng;
use rand::rngs::SmallRng;
use serde_json::Value;

/// One of `options` other than `current`.
pub(super) fn pick_other<'a>(rng: &mut SmallRng, options: &[&'a str], current: &Value) -> &'a str {
    let others: Vec<&str> = options.iter().copied().filter(|o| current != o).collect();
    others[rng.random_range(0..others.len())]
}

/// `n` distinct items of `items`, in their order.
pub(super) fn pick_distinct<T>(
    rng: &mut SmallRng,
    items: &'static [T],
    n: usize,
) -> Vec<&'static T> {
    let mut indexes: Vec<usize> = (0..items.len()).collect();
    for i in 0..n.min(items.len()) {
        let j = rng.random_range(i..items.len());
        indexes.swap(i, j);
    }
    indexes.truncate(n.min(items.len()));
    indexes.sort_unstable();
    indexes.into_iter().map(|i| &items[i]).collect()
}

/// The alphabet of generated names (`k8s.io/apimachinery/pkg/util/rand`):
/// no vowels, so no words, and no look-alike digits.
const SAFE_ALPHABET: &[u8; 27] = b"bcdfghjklmnpqrstvwxz2456789";
/// Distinct 5-character suffixes.
pub(super) const SUFFIXES: u64 = 27 * 27 * 27 * 27 * 27;

pub(super) fn safe_encode(mut x: u64, len: usize) -> String {
    let mut s = String::with_capacity(len);
    for _ in 0..len {
        s.push(SAFE_ALPHABET[(x % 27) as usize] as char);
        x /= 27;
    }
    s
}

pub(super) fn random_suffix(rng: &mut SmallRng, len: usize) -> String {
    safe_encode(rng.random(), len)
}

/// A random-looking name suffix that differs for every `seq` of one
/// `stream`: an affine bijection of `seq` modulo 27⁵, five characters, with
/// more characters once the 27⁵ suffixes are used up.
pub(super) fn unique_suffix(seed: u64, stream: u64, seq: u64) -> String {
    let h = mix64(seed ^ mix64(stream));
    let mut a = 1 + h % (SUFFIXES - 1);
    if a.is_multiple_of(3) {
        a += 1; // coprime with 27⁵
    }
    let b = (h >> 32) % SUFFIXES;
    let mut s = safe_encode((a * (seq % SUFFIXES) + b) % SUFFIXES, 5);
    let round = seq / SUFFIXES;
    if round > 0 {
        s.push_str(&safe_encode(round, 1 + (round.ilog(27) as usize)));
    }
    s
}

pub(super) fn random_hex(rng: &mut SmallRng, len: usize) -> String {
    let mut s = String::with_capacity(len + 16);
    while s.len() < len {
        let _ = write!(s, "{:016x}", rng.random::<u64>());
    }
    s.truncate(len);
    s
}

/// The splitmix64 finaliser: a good 64-bit mix.
pub(super) fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A stable hash of `parts` under `seed` (FNV-1a, then mixed).
pub(super) fn hash(seed: u64, parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for b in part.bytes().chain([0xff]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    mix64(h ^ seed)
}

/// A version-4-shaped UUID derived from `seed` and `parts`.
pub(super) fn uuid(seed: u64, parts: &[&str]) -> String {
    let hi = hash(seed, parts);
    let lo = mix64(hi ^ 0x5555_5555_5555_5555);
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        hi >> 32,
        (hi >> 16) & 0xffff,
        hi & 0xfff,
        0x8000 | ((lo >> 48) & 0x3fff),
        lo & 0xffff_ffff_ffff
    )
}
