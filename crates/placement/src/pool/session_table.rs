//! A pool's sessions and their users, each in a slab: a session is named
//! inside the engine by its *slot* (a dense `u32`), and every index keyed by
//! a session (`pending`, `disconnected`, `by_create_time`, each host's
//! list, each user's list) holds slots, never ids.
//!
//! Why: on a pool of 100,000 hosts a logoff is of a session placed long
//! ago, so all its data is cold. With the indexes keyed by the id string,
//! every comparison in an ordered set of `(time, id)` read a cold string
//! (and sessions made in the same millisecond compare on the id alone),
//! and every map keyed by a host name or a user key hashed it and read a
//! cold key again. Now a logoff finds the session by its id once (a hash of
//! the id and one comparison with the entry it needs anyway) and everything
//! else is integers: its host by `seq`, its user by slot, its index entries
//! by `(time, slot)`.
//!
//! Users are matched without regard to ASCII case (`user_key`): the user
//! table hashes and compares a name's lowercase bytes as it reads them, so
//! looking a user up allocates nothing.
//!
//! Slots are reused (last freed, first reused), so the slab is as long as
//! the most sessions (users) the pool has held at once; it grows by chunks
//! and never moves an entry (`chunked.rs`). The hash indexes keep each
//! entry's hash beside its slot, so growing them rehashes nothing and reads
//! nothing but the index, and removing an entry compares slots, not
//! strings; each is split in 64 tables (`slot_index.rs`), so a growth
//! moves a 64th of it, not a whole pool's sessions under the pool's lock.

use std::hash::{BuildHasher, Hasher, RandomState};

use super::chunked::Chunked;
use super::slot_index::SlotIndex;
use crate::model::Session;

/// A session's place in the slab.
pub(super) type Slot = u32;

/// A user's place in the user slab.
pub(super) type UserSlot = u32;

/// One session with what the engine keeps beside it.
#[derive(Clone, Debug)]
pub(super) struct Entry {
    pub(super) session: Session,
    /// The `seq` of the session's host: a logoff finds its host without
    /// its name. A host keeps its `seq` when it is replaced, and a host is
    /// removed only once its sessions are ended.
    pub(super) host: u64,
    /// The session's user in the user table.
    pub(super) user: UserSlot,
    /// Adopted from its host's list (S8) and not yet confirmed: it counts
    /// on its host, but S1 never uses it and it is never stored.
    pub(super) unconfirmed: bool,
    /// The hash of the id in `by_id`.
    id_hash: u64,
}

/// One user with sessions in the pool.
#[derive(Clone, Debug)]
struct User {
    /// `user_key` of the user's name (lowercase).
    key: String,
    /// The hash of `key` in `by_key`.
    hash: u64,
    /// The user's sessions, in the order they were (re)indexed.
    sessions: Vec<Slot>,
}

#[derive(Clone, Debug, Default)]
pub(super) struct SessionTable {
    entries: Chunked<Option<Entry>>,
    free: Vec<Slot>,
    /// Slots by the hash of their session's id.
    by_id: SlotIndex,
    users: Chunked<Option<User>>,
    free_users: Vec<UserSlot>,
    /// User slots by the hash of their key.
    by_key: SlotIndex,
    hasher: RandomState,
}

impl SessionTable {
    pub(super) fn len(&self) -> usize {
        self.by_id.len()
    }

    /// The slot of the session `id`.
    pub(super) fn slot_of(&self, id: &str) -> Option<Slot> {
        let hash = self.hasher.hash_one(id);
        self.by_id.find(hash, |s| {
            self.entries[s as usize]
                .as_ref()
                .expect("live slot")
                .session
                .id
                == id
        })
    }

    pub(super) fn contains(&self, id: &str) -> bool {
        self.slot_of(id).is_some()
    }

    /// The session `id`.
    pub(super) fn get(&self, id: &str) -> Option<&Session> {
        self.slot_of(id).map(|s| &self[s].session)
    }

    pub(super) fn entry_mut(&mut self, slot: Slot) -> &mut Entry {
        self.entries[slot as usize]
            .as_mut()
            .expect("session table: no session in this slot")
    }

    /// Every session with its slot, in slot order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (Slot, &Entry)> {
        self.entries
            .iter()
            .enumerate()
            .filter_map(|(i, e)| Some((i as Slot, e.as_ref()?)))
    }

    /// Puts a session (whose id is not in the table) in a free slot and
    /// its user in the user table; answers the slot. The caller indexes it.
    pub(super) fn insert(&mut self, session: Session, host: u64, unconfirmed: bool) -> Slot {
        let id_hash = self.hasher.hash_one(session.id.as_str());
        let user = self.user_slot_or_insert(&session.user);
        let entry = Entry {
            session,
            host,
            user,
            unconfirmed,
            id_hash,
        };
        let slot = match self.free.pop() {
            Some(slot) => {
                self.entries[slot as usize] = Some(entry);
                slot
            }
            None => {
                self.entries.push(Some(entry));
                Slot::try_from(self.entries.len() - 1).expect("fewer than 2^32 sessions")
            }
        };
        self.by_id.insert(id_hash, slot);
        slot
    }

    /// Takes the session out of its slot (the caller has unindexed it) and
    /// its user out of the user table if it has no other session.
    pub(super) fn remove(&mut self, slot: Slot) -> Entry {
        let entry = self.entries[slot as usize]
            .take()
            .expect("session table: no session in this slot");
        self.free.push(slot);
        self.by_id.remove(entry.id_hash, slot);
        let user = self.users[entry.user as usize]
            .as_ref()
            .expect("a session's user is in the table");
        if user.sessions.is_empty() {
            let hash = user.hash;
            self.by_key.remove(hash, entry.user);
            self.users[entry.user as usize] = None;
            self.free_users.push(entry.user);
        }
        entry
    }

    /// The sessions of the user named `user` (any case), in the order they
    /// were indexed; empty for a user with none.
    pub(super) fn user_sessions(&self, user: &str) -> &[Slot] {
        match self.user_slot(user) {
            Some(u) => &self.user(u).sessions,
            None => &[],
        }
    }

    /// Whether the user named `user` (any case) has a session here.
    pub(super) fn has_user(&self, user: &str) -> bool {
        self.user_slot(user).is_some()
    }

    /// Adds `slot` at the end of its user's list.
    pub(super) fn index_user(&mut self, slot: Slot) {
        let u = self[slot].user;
        self.user_mut(u).sessions.push(slot);
    }

    /// Takes `slot` out of its user's list, keeping the others' order.
    pub(super) fn unindex_user(&mut self, slot: Slot) {
        let u = self[slot].user;
        self.user_mut(u).sessions.retain(|&s| s != slot);
    }

    fn user(&self, u: UserSlot) -> &User {
        self.users[u as usize].as_ref().expect("live user slot")
    }

    fn user_mut(&mut self, u: UserSlot) -> &mut User {
        self.users[u as usize].as_mut().expect("live user slot")
    }

    fn user_slot(&self, user: &str) -> Option<UserSlot> {
        let hash = caseless_hash(&self.hasher, user);
        self.by_key
            .find(hash, |u| self.user(u).key.eq_ignore_ascii_case(user))
    }

    fn user_slot_or_insert(&mut self, user: &str) -> UserSlot {
        if let Some(u) = self.user_slot(user) {
            return u;
        }
        let hash = caseless_hash(&self.hasher, user);
        let entry = User {
            key: crate::model::user_key(user),
            hash,
            sessions: Vec::new(),
        };
        let u = match self.free_users.pop() {
            Some(u) => {
                self.users[u as usize] = Some(entry);
                u
            }
            None => {
                self.users.push(Some(entry));
                UserSlot::try_from(self.users.len() - 1).expect("fewer than 2^32 users")
            }
        };
        self.by_key.insert(hash, u);
        u
    }
}

impl std::ops::Index<Slot> for SessionTable {
    type Output = Entry;

    fn index(&self, slot: Slot) -> &Entry {
        self.entries[slot as usize]
            .as_ref()
            .expect("session table: no session in this slot")
    }
}

/// The hash of `user_key(user)`, computed from `user`'s bytes lowercased
/// on the way, without allocating.
fn caseless_hash(hasher: &RandomState, user: &str) -> u64 {
    let mut h = hasher.build_hasher();
    let mut buf = [0u8; 64];
    for chunk in user.as_bytes().chunks(buf.len()) {
        let lower = &mut buf[..chunk.len()];
        lower.copy_from_slice(chunk);
        lower.make_ascii_lowercase();
        h.write(lower);
    }
    h.write_u8(0xff);
    h.finish()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::model::SessionState;

    fn session(id: &str, user: &str) -> Session {
        Session {
            id: id.to_string(),
            host: "h".into(),
            user: user.to_string(),
            state: SessionState::Active,
            create_time_ms: 0,
            state_since_ms: 0,
            awaiting_logon: false,
        }
    }

    proptest! {
        /// Against a map of id → user: the table finds every live session
        /// by its id and every user's sessions by any case of the name, and
        /// forgets a user with none, through inserts and removes in any order.
        #[test]
        fn agrees_with_maps(ops in proptest::collection::vec((0u8..40, 0u8..6, any::<bool>()), 0..300)) {
            let mut table = SessionTable::default();
            let mut model: std::collections::BTreeMap<String, (Slot, String)> = Default::default();
            for (id, user, upper) in ops {
                let id = format!("s{id}");
                let name = if upper { format!("User{user}@X") } else { format!("user{user}@x") };
                match model.remove(&id) {
                    Some((slot, _)) => {
                        table.unindex_user(slot);
                        let e = table.remove(slot);
                        prop_assert_eq!(e.session.id, id);
                    }
                    None => {
                        let slot = table.insert(session(&id, &name), 7, false);
                        table.index_user(slot);
                        model.insert(id, (slot, crate::model::user_key(&name)));
                    }
                }
                prop_assert_eq!(table.len(), model.len());
                for (id, (slot, _)) in &model {
                    prop_assert_eq!(table.slot_of(id), Some(*slot));
                    prop_assert_eq!(table[*slot].host, 7);
                }
                for user in 0..6 {
                    let key = format!("user{user}@x");
                    let mut want: Vec<Slot> = model.values().filter(|(_, k)| *k == key).map(|(s, _)| *s).collect();
                    let mut got = table.user_sessions(&format!("USER{user}@X")).to_vec();
                    want.sort_unstable();
                    got.sort_unstable();
                    prop_assert_eq!(table.has_user(&key), !want.is_empty());
                    prop_assert_eq!(got, want);
                }
                prop_assert!(table.slot_of("absent").is_none());
            }
        }
    }
}
