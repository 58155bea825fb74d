//! Slots by hash, in [`SHARDS`] hash tables instead of one, so that no
//! insert ever moves the whole index.
//!
//! Why: a hash table grows by moving every entry into a table twice as
//! large, all in the insert that crosses its load limit. One table of a
//! pool's sessions did that under the pool's lock: past 100,000 sessions
//! a placement that takes microseconds took up to 50–100 ms (the session
//! index and the user index grow on the same insert when every user has
//! one session), and every request for the pool — and every task of the
//! tokio worker waiting for its lock — waited with it: the connect tail
//! under load (`docs/benchmarks.md`, 2026-12-03, evening). Split by the hash, each table holds a
//! [`SHARDS`]th of the entries and grows on its own insert, so a growth
//! moves a [`SHARDS`]th as much; the work over a storm is the same.
//!
//! The shard is picked by bits of the hash that the table itself does not
//! use: hashbrown places an entry by the hash's low bits (as many as the
//! table has buckets: fewer than 40 below a trillion entries) and tags it
//! with the top seven, so every shard still sees well-spread hashes.

use hashbrown::HashTable;

/// How many tables: a growth moves at most a 64th of the entries.
const SHARDS: usize = 64;
/// The first bit of the hash that picks the shard (see the module's note).
const SHARD_SHIFT: u32 = 40;

/// Slots (`u32`), each with the hash it is filed under, in [`SHARDS`] hash
/// tables; the caller says how two entries with one hash are told apart.
#[derive(Clone, Debug)]
pub(super) struct SlotIndex {
    shards: Box<[HashTable<(u32, u64)>]>,
    len: usize,
}

impl Default for SlotIndex {
    fn default() -> Self {
        SlotIndex {
            shards: (0..SHARDS).map(|_| HashTable::new()).collect(),
            len: 0,
        }
    }
}

impl SlotIndex {
    fn shard(&self, hash: u64) -> &HashTable<(u32, u64)> {
        &self.shards[(hash >> SHARD_SHIFT) as usize % SHARDS]
    }

    fn shard_mut(&mut self, hash: u64) -> &mut HashTable<(u32, u64)> {
        &mut self.shards[(hash >> SHARD_SHIFT) as usize % SHARDS]
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// The slot filed under `hash` for which `is` holds.
    pub(super) fn find(&self, hash: u64, mut is: impl FnMut(u32) -> bool) -> Option<u32> {
        self.shard(hash)
            .find(hash, |&(s, _)| is(s))
            .map(|&(s, _)| s)
    }

    /// Files `slot` under `hash`; the caller knows no entry equal to it is
    /// there.
    pub(super) fn insert(&mut self, hash: u64, slot: u32) {
        self.shard_mut(hash)
            .insert_unique(hash, (slot, hash), |&(_, h)| h);
        self.len += 1;
    }

    /// Takes `slot`, filed under `hash`, out; false when it was not there.
    pub(super) fn remove(&mut self, hash: u64, slot: u32) -> bool {
        match self.shard_mut(hash).find_entry(hash, |&(s, _)| s == slot) {
            Ok(found) => {
                found.remove();
                self.len -= 1;
                true
            }
            Err(_) => false,
        }
    }

    /// The most entries a shard holds: what its next growth moves.
    #[cfg(test)]
    fn largest_shard(&self) -> usize {
        self.shards.iter().map(HashTable::len).max().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use std::hash::{BuildHasher, RandomState};

    use super::*;

    /// Hashes as the session table makes them spread over every shard, so
    /// a growth moves a small part of the index; and every slot is found
    /// under its hash, and only there, until it is removed.
    #[test]
    fn hashes_spread_over_the_shards_and_each_slot_is_found_under_its_own() {
        let hasher = RandomState::new();
        let mut index = SlotIndex::default();
        let hashes: Vec<u64> = (0..100_000u32)
            .map(|i| hasher.hash_one(format!("0193a1b2-0000-7000-8000-{i:012}")))
            .collect();
        for (slot, &hash) in hashes.iter().enumerate() {
            index.insert(hash, slot as u32);
        }
        assert_eq!(index.len(), hashes.len());
        // A 64th of 100,000 is 1,563; uneven shards would defeat the split.
        assert!(
            index.largest_shard() < 2_000,
            "largest shard: {}",
            index.largest_shard()
        );
        for (slot, &hash) in hashes.iter().enumerate() {
            assert_eq!(index.find(hash, |s| s == slot as u32), Some(slot as u32));
        }
        for (slot, &hash) in hashes.iter().enumerate().step_by(2) {
            assert!(index.remove(hash, slot as u32));
            assert!(!index.remove(hash, slot as u32), "removed twice");
        }
        assert_eq!(index.len(), hashes.len() / 2);
        for (slot, &hash) in hashes.iter().enumerate() {
            let found = index.find(hash, |s| s == slot as u32);
            assert_eq!(found.is_some(), slot % 2 == 1, "slot {slot}");
        }
    }
}
