//! The open hosts of a pool ranked by (session count, query order), the
//! order BreadthFirst and DepthFirst pick from (B1, B3, D1), kept as one
//! bitmap over query order per session count.
//!
//! Why not an order-statistic tree. A placement moves one host from count
//! `c` to `c + 1` (and a logoff back), and BreadthFirst randomized reads
//! the host at a random rank. In a B-tree of `(sessions, seq)` pairs both
//! land on random nodes: the update shifts half a node of 16-byte keys
//! twice and the lookup walks node boundaries, each a cache miss on a
//! large pool. Session counts are small integers (bounded by the limit),
//! so here each count has a bitmap of the hosts at that count, indexed by
//! query order, and a Fenwick tree over its 512-bit blocks; a second
//! Fenwick tree over the counts says how many hosts have fewer sessions.
//! The r-th host is then two short descents over small, hot arrays and one
//! cache line of the bitmap; an update flips one bit in each of two
//! bitmaps. Everything is O(log n) and allocation-free in a steady state.
//!
//! Memory: each count that some open host has costs `seq_max / 8` bytes
//! (12.5 KiB at 100,000 hosts); a bitmap that empties is kept as one of at
//! most [`SPARE_BITMAPS`] spares, so a DepthFirst host climbing the counts
//! reuses the bitmap it leaves instead of allocating one.

/// Empty bitmaps kept for reuse. A DepthFirst pool moves its fullest host
/// to a count no host has yet and empties the one it leaves, placement
/// after placement: one spare makes that free; a few absorb bursts.
pub(super) const SPARE_BITMAPS: usize = 4;

/// 64-bit words per block of a bitmap: 512 bits, one cache line.
const BLOCK_WORDS: usize = 8;
const BLOCK_BITS: usize = BLOCK_WORDS * 64;

/// A Fenwick tree over `len` counters (a power of two), 1-based inside.
#[derive(Clone, Debug, Default)]
struct Fenwick {
    /// `tree[i]` is the sum of counters `(i - lowbit(i), i]`; `tree[0]` is
    /// unused. Empty before the first counter is needed.
    tree: Vec<u32>,
}

impl Fenwick {
    fn len(&self) -> usize {
        self.tree.len().saturating_sub(1)
    }

    /// Doubles the number of counters until `i` is one; the new counters
    /// are 0. With a power-of-two length, the only node of the new half
    /// that covers old counters is the last one, which covers them all.
    fn grow_to(&mut self, i: usize) {
        if self.tree.is_empty() {
            self.tree = vec![0; 2];
        }
        while i >= self.len() {
            let n = self.len();
            let total = self.tree[n];
            self.tree.resize(2 * n + 1, 0);
            self.tree[2 * n] = total;
        }
    }

    /// Adds 1 to counter `i` (grown if needed).
    fn increment(&mut self, i: usize) {
        self.grow_to(i);
        let mut k = i + 1;
        while k < self.tree.len() {
            self.tree[k] += 1;
            k += k & k.wrapping_neg();
        }
    }

    /// Takes 1 from counter `i`, which must be positive.
    fn decrement(&mut self, i: usize) {
        let mut k = i + 1;
        while k < self.tree.len() {
            self.tree[k] -= 1;
            k += k & k.wrapping_neg();
        }
    }

    /// The sum of counters `0..i`.
    fn prefix(&self, i: usize) -> usize {
        let mut k = i.min(self.len());
        let mut sum = 0;
        while k > 0 {
            sum += self.tree[k] as usize;
            k &= k - 1;
        }
        sum
    }

    /// The counter that holds item `r` (0-based) when each counter holds
    /// that many items in order, and `r`'s offset inside it. `r` must be
    /// below the total.
    fn find(&self, mut r: usize) -> (usize, usize) {
        let n = self.len();
        let mut pos = 0;
        let mut step = n;
        while step > 0 {
            let next = pos + step;
            if next <= n && (self.tree[next] as usize) <= r {
                pos = next;
                r -= self.tree[next] as usize;
            }
            step /= 2;
        }
        (pos, r)
    }
}

/// A set of positions with rank and select in O(log n): a bitmap and a
/// Fenwick tree over its blocks' counts.
#[derive(Clone, Debug, Default)]
struct Bitmap {
    words: Vec<u64>,
    blocks: Fenwick,
    len: usize,
}

impl Bitmap {
    fn contains(&self, pos: usize) -> bool {
        self.words
            .get(pos / 64)
            .is_some_and(|w| w & (1 << (pos % 64)) != 0)
    }

    fn insert(&mut self, pos: usize) -> bool {
        let word = pos / 64;
        if word >= self.words.len() {
            self.blocks.grow_to(word / BLOCK_WORDS);
            self.words.resize(self.blocks.len() * BLOCK_WORDS, 0);
        }
        let bit = 1 << (pos % 64);
        if self.words[word] & bit != 0 {
            return false;
        }
        self.words[word] |= bit;
        self.blocks.increment(word / BLOCK_WORDS);
        self.len += 1;
        true
    }

    fn remove(&mut self, pos: usize) -> bool {
        if !self.contains(pos) {
            return false;
        }
        self.words[pos / 64] &= !(1 << (pos % 64));
        self.blocks.decrement(pos / BLOCK_BITS);
        self.len -= 1;
        true
    }

    /// How many positions below `pos` are set.
    fn rank(&self, pos: usize) -> usize {
        let word = (pos / 64).min(self.words.len());
        let block_start = word - word % BLOCK_WORDS;
        let mut n = self.blocks.prefix(word / BLOCK_WORDS);
        n += self.words[block_start..word]
            .iter()
            .map(|w| w.count_ones() as usize)
            .sum::<usize>();
        if let Some(w) = self.words.get(word) {
            n += (w & ((1 << (pos % 64)) - 1)).count_ones() as usize;
        }
        n
    }

    /// The `r`-th set position (0-based); `r` must be below `len`.
    fn select(&self, r: usize) -> usize {
        let (block, mut r) = self.blocks.find(r);
        let start = block * BLOCK_WORDS;
        for (i, &w) in self.words[start..start + BLOCK_WORDS].iter().enumerate() {
            let ones = w.count_ones() as usize;
            if r < ones {
                return (start + i) * 64 + nth_bit(w, r);
            }
            r -= ones;
        }
        unreachable!("the block's count covers r")
    }

    /// The set positions, ascending.
    fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.words.iter().enumerate().flat_map(|(i, &w)| {
            let mut rest = w;
            std::iter::from_fn(move || {
                (rest != 0).then(|| {
                    let bit = rest.trailing_zeros() as usize;
                    rest &= rest - 1;
                    i * 64 + bit
                })
            })
        })
    }
}

/// The position of the `r`-th set bit of `w` (0-based); `w` has more than
/// `r` set bits.
fn nth_bit(mut w: u64, r: usize) -> usize {
    for _ in 0..r {
        w &= w - 1;
    }
    w.trailing_zeros() as usize
}

/// Open hosts as `(sessions, seq)`, in that order: see the file's comment.
#[derive(Clone, Debug, Default)]
pub(super) struct OpenHosts {
    /// Session count → the hosts with that count, as bits at their `seq`.
    by_count: Vec<Bitmap>,
    /// How many hosts have each session count.
    counts: Fenwick,
    /// Emptied bitmaps, all zero, kept for the next count that needs one.
    spare: Vec<Bitmap>,
    len: usize,
}

impl OpenHosts {
    pub(super) fn insert(&mut self, sessions: u32, seq: u64) -> bool {
        let c = sessions as usize;
        if c >= self.by_count.len() {
            self.by_count.resize_with(c + 1, Bitmap::default);
        }
        let bits = &mut self.by_count[c];
        if bits.len == 0
            && bits.words.is_empty()
            && let Some(spare) = self.spare.pop()
        {
            *bits = spare;
        }
        if !bits.insert(seq as usize) {
            return false;
        }
        self.counts.increment(c);
        self.len += 1;
        true
    }

    pub(super) fn remove(&mut self, sessions: u32, seq: u64) -> bool {
        let c = sessions as usize;
        let Some(bits) = self.by_count.get_mut(c) else {
            return false;
        };
        if !bits.remove(seq as usize) {
            return false;
        }
        if bits.len == 0 && self.spare.len() < SPARE_BITMAPS {
            self.spare.push(std::mem::take(bits));
        }
        self.counts.decrement(c);
        self.len -= 1;
        true
    }

    pub(super) fn contains(&self, sessions: u32, seq: u64) -> bool {
        self.by_count
            .get(sessions as usize)
            .is_some_and(|b| b.contains(seq as usize))
    }

    /// How many open hosts have fewer than `sessions` sessions.
    pub(super) fn count_below(&self, sessions: u32) -> usize {
        self.counts.prefix(sessions as usize)
    }

    /// How many open hosts come before `(sessions, seq)`.
    pub(super) fn rank(&self, sessions: u32, seq: u64) -> usize {
        self.count_below(sessions)
            + self
                .by_count
                .get(sessions as usize)
                .map_or(0, |b| b.rank(seq as usize))
    }

    /// The `i`-th open host in `(sessions, seq)` order, if there are more.
    pub(super) fn get(&self, i: usize) -> Option<(u32, u64)> {
        if i >= self.len {
            return None;
        }
        let (count, r) = self.counts.find(i);
        let seq = self.by_count[count].select(r);
        Some((count as u32, seq as u64))
    }

    /// Every open host in `(sessions, seq)` order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        self.by_count
            .iter()
            .enumerate()
            .filter(|(_, b)| b.len > 0)
            .flat_map(|(c, b)| b.iter().map(move |seq| (c as u32, seq as u64)))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::*;

    #[derive(Clone, Debug)]
    enum Op {
        Insert(u32, u64),
        Remove(u32, u64),
        /// Move a present host one count up or down, as a placement or a
        /// logoff does (the index of the host among those present).
        Step(usize, bool),
    }

    fn op() -> impl Strategy<Value = Op> {
        // Small counts and seqs so that operations collide; a few large
        // ones so that the trees and bitmaps grow across blocks.
        let count = prop_oneof![8 => 0u32..20, 1 => 0u32..3_000];
        let seq = prop_oneof![8 => 1u64..200, 1 => 1u64..5_000];
        prop_oneof![
            4 => (count.clone(), seq.clone()).prop_map(|(c, s)| Op::Insert(c, s)),
            2 => (count, seq).prop_map(|(c, s)| Op::Remove(c, s)),
            4 => (any::<usize>(), any::<bool>()).prop_map(|(i, up)| Op::Step(i, up)),
        ]
    }

    fn agree(open: &OpenHosts, reference: &BTreeSet<(u32, u64)>) {
        assert_eq!(open.len, reference.len());
        let all: Vec<_> = reference.iter().copied().collect();
        assert_eq!(open.iter().collect::<Vec<_>>(), all);
        for (i, &(c, s)) in all.iter().enumerate() {
            assert_eq!(open.get(i), Some((c, s)), "get({i})");
            assert_eq!(open.rank(c, s), i, "rank of {c},{s}");
            assert!(open.contains(c, s));
            assert!(!open.contains(c + 1, s) || reference.contains(&(c + 1, s)));
        }
        assert_eq!(open.get(all.len()), None);
        for c in [0, 1, 2, 5, 16, 19, 20, 100, 2_999, 3_000, u32::MAX] {
            let below = reference.range(..(c, 0)).count();
            assert_eq!(open.count_below(c), below, "count_below({c})");
            assert_eq!(open.rank(c, 0), below);
        }
    }

    proptest! {
        /// The index agrees with a plain ordered set of `(sessions, seq)`
        /// (what the pool kept before) on every query, after any sequence
        /// of insertions, removals and one-count moves.
        #[test]
        fn agrees_with_an_ordered_set(ops in proptest::collection::vec(op(), 1..300)) {
            let mut open = OpenHosts::default();
            let mut reference = BTreeSet::new();
            for op in ops {
                match op {
                    Op::Insert(c, s) => {
                        prop_assert_eq!(open.insert(c, s), reference.insert((c, s)));
                    }
                    Op::Remove(c, s) => {
                        prop_assert_eq!(open.remove(c, s), reference.remove(&(c, s)));
                    }
                    Op::Step(i, up) => {
                        if reference.is_empty() {
                            continue;
                        }
                        let (c, s) = *reference.iter().nth(i % reference.len()).unwrap();
                        let to = if up { c + 1 } else { c.saturating_sub(1) };
                        prop_assert!(open.remove(c, s));
                        reference.remove(&(c, s));
                        prop_assert_eq!(open.insert(to, s), reference.insert((to, s)));
                    }
                }
                prop_assert!(open.spare.len() <= SPARE_BITMAPS);
                prop_assert!(open.spare.iter().all(|b| b.len == 0
                    && b.words.iter().all(|&w| w == 0)
                    && b.blocks.prefix(b.blocks.len()) == 0));
            }
            agree(&open, &reference);
        }
    }

    #[test]
    fn a_host_climbing_the_counts_reuses_one_bitmap() {
        // DepthFirst: the fullest host goes up one count per placement.
        let mut open = OpenHosts::default();
        open.insert(0, 1);
        open.insert(0, 2);
        for c in 0..1_000 {
            assert!(open.remove(c, 2));
            assert!(open.insert(c + 1, 2));
        }
        assert_eq!(open.get(0), Some((0, 1)));
        assert_eq!(open.get(1), Some((1_000, 2)));
        let allocated = open.by_count.iter().filter(|b| !b.words.is_empty()).count();
        assert_eq!(allocated, 2, "only the two counts in use keep a bitmap");
    }

    #[test]
    fn nth_bit_counts_from_the_lowest() {
        assert_eq!(nth_bit(0b1011_0100, 0), 2);
        assert_eq!(nth_bit(0b1011_0100, 1), 4);
        assert_eq!(nth_bit(0b1011_0100, 3), 7);
        assert_eq!(nth_bit(u64::MAX, 63), 63);
    }
}
