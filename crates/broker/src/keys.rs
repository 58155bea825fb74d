//! The broker's signing keys: what signs connection tickets (rule T3) and
//! the front door's redirection tokens (R3).
//!
//! Both travel in clear (a ticket in the client's first PDU, a redirection
//! token in its cookie), so each one is an offline test of any guess of the
//! key's secret. The secret is therefore never something a person chose
//! (such as the admin token) but 32 random bytes the broker makes the first
//! time it opens a store without one, and keeps there: every replica of one
//! database signs and verifies alike, and a restart changes nothing.
//!
//! A rotation (`POST /api/v1/signingKeys/rotate`) makes a new secret that
//! signs from then on; the previous ones keep verifying for
//! [`RETIRED_KEY_KEPT_MS`] (the longest a ticket can live, and some
//! leeway), so no ticket already handed out stops working early, and are
//! then forgotten at the next rotation or start. That is a change of key,
//! not a revocation: after a leak (a store backup, a database dump), a
//! rotation that revokes (`POST /api/v1/signingKeys/revoke`) makes a new
//! secret and forgets every other one at once, in the store and in every
//! front door of the process, so that nothing signed before verifies any
//! more — tickets already handed out included, whose users fetch new ones.

use std::sync::RwLock;

use crate::sync::{MutexExt, RwLockExt};
use api::ticket::{Ticket, TicketKey, TicketRefusal};
use gateway::redirect::{RedirectKey, RedirectKeys};
use store::{Mutation, SigningKey};

/// How long a retired key still verifies: the longest ticket lifetime a
/// pool may set, plus the ticket leeway and a minute for clocks.
pub const RETIRED_KEY_KEPT_MS: i64 = (placement::MAX_TICKET_LIFETIME_SECONDS as i64
    + api::ticket::TICKET_LEEWAY_SECONDS as i64
    + 60)
    * 1000;

/// The keys in force, as stored and as derived for each use.
pub struct SigningKeys {
    inner: RwLock<Derived>,
    /// The front doors' views of the redirection keys, refilled on every
    /// change (front doors in this process).
    redirects: std::sync::Mutex<Vec<RedirectKeys>>,
    /// Held through a rotation, so that each starts from the last.
    pub rotation: tokio::sync::Mutex<()>,
}

struct Derived {
    stored: store::SigningKeys,
    /// Newest first, as `stored.keys`.
    tickets: Vec<TicketKey>,
}

/// A new random secret: 32 bytes, in hex.
fn new_secret() -> String {
    crate::state::new_secret("")
}

fn redirect_keys(stored: &store::SigningKeys) -> Vec<RedirectKey> {
    stored
        .keys
        .iter()
        .map(|k| RedirectKey::derive(&k.secret))
        .collect()
}

/// `stored` without the retired keys whose time to verify has passed.
fn current(mut stored: store::SigningKeys, now_ms: i64) -> store::SigningKeys {
    stored.keys.retain(|k| {
        k.retired_ms
            .is_none_or(|r| now_ms - r < RETIRED_KEY_KEPT_MS)
    });
    stored
}

impl SigningKeys {
    /// The keys of a store (`None`: it has none yet, and a new one is made);
    /// with the mutation that must be made durable before anything is
    /// signed, when a key was made.
    pub fn load(
        stored: Option<store::SigningKeys>,
        now_ms: i64,
    ) -> (SigningKeys, Option<Mutation>) {
        let (stored, made) = match stored.filter(|s| s.keys.iter().any(|k| k.retired_ms.is_none()))
        {
            Some(s) => (current(s, now_ms), false),
            None => (
                store::SigningKeys {
                    keys: vec![SigningKey {
                        secret: new_secret(),
                        created_ms: now_ms,
                        retired_ms: None,
                    }],
                },
                true,
            ),
        };
        let put = made.then(|| Mutation::PutSigningKeys {
            keys: stored.clone(),
        });
        let keys = SigningKeys {
            inner: RwLock::new(Derived::of(stored.clone())),
            redirects: Default::default(),
            rotation: Default::default(),
        };
        (keys, put)
    }

    /// Fills `handle` (a front door's redirection keys) with these keys,
    /// now and at every rotation.
    pub fn share_redirect_keys(&self, handle: &RedirectKeys) {
        let inner = self.inner.read_or_recover();
        handle.set(redirect_keys(&inner.stored));
        self.redirects.lock_or_recover().push(handle.clone());
    }

    /// A new handle on the redirection keys, kept up to date.
    pub fn redirect_keys(&self) -> RedirectKeys {
        let handle = RedirectKeys::default();
        self.share_redirect_keys(&handle);
        handle
    }

    /// The key that signs new tickets.
    pub fn ticket_signer(&self) -> TicketKey {
        let inner = self.inner.read_or_recover();
        inner.tickets[0].clone()
    }

    /// Rule T3's check with every key in force: the key that signed the
    /// ticket decides; none did: `BadSignature`.
    pub fn verify_ticket(
        &self,
        ticket: &Ticket,
        pool: &str,
        now_unix_seconds: u64,
    ) -> Result<String, TicketRefusal> {
        let inner = self.inner.read_or_recover();
        let mut outcome = Err(TicketRefusal::BadSignature);
        for key in &inner.tickets {
            outcome = key.verify(ticket, pool, now_unix_seconds);
            if outcome != Err(TicketRefusal::BadSignature) {
                break;
            }
        }
        outcome
    }

    /// The set a rotation at `now_ms` makes: a new signing key first, the
    /// one it replaces retired now, older retired ones kept while they may
    /// still verify — or, with `revoke_previous`, the new key alone.
    /// Nothing changes until [`SigningKeys::install`].
    pub fn rotated(&self, now_ms: i64, revoke_previous: bool) -> store::SigningKeys {
        let inner = self.inner.read_or_recover();
        let mut keys = vec![SigningKey {
            secret: new_secret(),
            created_ms: now_ms,
            retired_ms: None,
        }];
        if !revoke_previous {
            keys.extend(inner.stored.keys.iter().map(|k| SigningKey {
                retired_ms: k.retired_ms.or(Some(now_ms)),
                ..k.clone()
            }));
        }
        current(store::SigningKeys { keys }, now_ms)
    }

    /// Puts `stored` in force (once it is durable).
    pub fn install(&self, stored: store::SigningKeys) {
        for handle in self.redirects.lock_or_recover().iter() {
            handle.set(redirect_keys(&stored));
        }
        *self.inner.write_or_recover() = Derived::of(stored);
    }

    /// How many keys verify, and when the signing one was made.
    pub fn summary(&self) -> (usize, i64) {
        let inner = self.inner.read_or_recover();
        (inner.stored.keys.len(), inner.stored.keys[0].created_ms)
    }
}

impl Derived {
    fn of(stored: store::SigningKeys) -> Derived {
        let tickets = stored
            .keys
            .iter()
            .map(|k| TicketKey::derive(&k.secret))
            .collect();
        Derived { stored, tickets }
    }
}

impl crate::Broker {
    /// Rotates the signing keys: the new set is made durable, then put in
    /// force. One rotation at a time, so each starts from the last. With
    /// `revoke_previous`, every key but the new one is forgotten: what
    /// they signed stops verifying as soon as the new set is in force (a
    /// replica that leads next loads the new set from the store).
    pub async fn rotate_signing_keys(
        &self,
        revoke_previous: bool,
    ) -> Result<(), crate::BrokerError> {
        let _one_at_a_time = self.keys().rotation.lock().await;
        let keys = self.keys().rotated(self.now_ms(), revoke_previous);
        let put = store::Mutation::PutSigningKeys { keys: keys.clone() };
        self.core().commit(|| Ok(((), vec![put]))).await?;
        self.keys().install(keys);
        if revoke_previous {
            tracing::warn!(
                "rotated the signing keys and revoked every previous one: tickets and \
                 redirection tokens signed before no longer verify"
            );
        } else {
            tracing::info!("rotated the signing keys");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW_MS: i64 = 1_800_000_000_000;

    #[test]
    fn a_store_without_keys_gets_a_random_one_to_write() {
        let (a, put_a) = SigningKeys::load(None, NOW_MS);
        let (b, put_b) = SigningKeys::load(None, NOW_MS);
        assert!(matches!(put_a, Some(Mutation::PutSigningKeys { .. })));
        assert!(put_b.is_some());
        let ticket = a
            .ticket_signer()
            .issue("p", "alice", 2_000_000_000)
            .expect("fits");
        let parsed = Ticket::parse(&ticket).expect("parses");
        assert_eq!(
            a.verify_ticket(&parsed, "p", 1_800_000_000).as_deref(),
            Ok("alice")
        );
        assert_eq!(
            b.verify_ticket(&parsed, "p", 1_800_000_000),
            Err(TicketRefusal::BadSignature),
            "two stores made two keys"
        );
    }

    #[test]
    fn a_rotation_signs_with_the_new_key_and_verifies_the_old_for_a_ticket_lifetime() {
        let (keys, _) = SigningKeys::load(None, NOW_MS);
        let old = keys
            .ticket_signer()
            .issue("p", "bob", 2_000_000_000)
            .expect("fits");
        let rotated = keys.rotated(NOW_MS + 1, false);
        assert_eq!(rotated.keys.len(), 2);
        assert_eq!(rotated.keys[1].retired_ms, Some(NOW_MS + 1));
        keys.install(rotated.clone());
        let new = keys
            .ticket_signer()
            .issue("p", "bob", 2_000_000_000)
            .expect("fits");
        assert_ne!(old, new);
        for t in [&old, &new] {
            let parsed = Ticket::parse(t).expect("parses");
            assert_eq!(
                keys.verify_ticket(&parsed, "p", 1_800_000_000).as_deref(),
                Ok("bob")
            );
        }
        // Loaded once the retired key's time has passed, it verifies no more.
        let later = NOW_MS + 1 + RETIRED_KEY_KEPT_MS;
        let (reloaded, put) = SigningKeys::load(Some(rotated), later);
        assert!(put.is_none());
        let parsed = Ticket::parse(&old).expect("parses");
        assert_eq!(
            reloaded.verify_ticket(&parsed, "p", 1_800_000_000),
            Err(TicketRefusal::BadSignature)
        );
        assert_eq!(reloaded.summary().0, 1);
    }

    /// The redirection token a client sends back, as the front door reads
    /// it: `line` in a first PDU, parsed.
    fn redirect_token(line: &str) -> gateway::pdu::RedirectToken {
        let li = 6 + line.len() + 2;
        let mut pdu = vec![3, 0];
        pdu.extend_from_slice(&u16::try_from(4 + 1 + li).unwrap().to_be_bytes());
        pdu.extend_from_slice(&[u8::try_from(li).unwrap(), 0xE0, 0, 0, 0, 0, 0]);
        pdu.extend_from_slice(line.as_bytes());
        pdu.extend_from_slice(b"\r\n");
        match gateway::pdu::parse(&pdu).expect("parses").routing {
            Some(gateway::pdu::Routing::Redirect(t)) => t,
            other => panic!("{other:?}"),
        }
    }

    /// A redirection token signed with the key that signs now.
    fn signed_now(keys: &SigningKeys, addr: std::net::SocketAddrV4) -> gateway::pdu::RedirectToken {
        let secret = keys.inner.read_or_recover().stored.keys[0].secret.clone();
        redirect_token(&RedirectKey::derive(&secret).issue_until(addr, 1_800_000_100))
    }

    #[test]
    fn a_revoking_rotation_forgets_every_previous_key_at_once() {
        let (keys, _) = SigningKeys::load(None, NOW_MS);
        let door = keys.redirect_keys();
        let addr = std::net::SocketAddrV4::new(std::net::Ipv4Addr::new(10, 0, 0, 7), 3389);
        let old_token = signed_now(&keys, addr);
        assert_eq!(door.verify(&old_token, 1_800_000_000), Ok(addr));
        let first = keys
            .ticket_signer()
            .issue("p", "bob", 2_000_000_000)
            .expect("fits");
        // A plain rotation first: two keys verify.
        keys.install(keys.rotated(NOW_MS + 1, false));
        let second = keys
            .ticket_signer()
            .issue("p", "bob", 2_000_000_000)
            .expect("fits");
        assert_eq!(keys.summary().0, 2);
        assert_eq!(door.verify(&old_token, 1_800_000_000), Ok(addr));
        let revoked = keys.rotated(NOW_MS + 2, true);
        assert_eq!(revoked.keys.len(), 1);
        assert_eq!(revoked.keys[0].retired_ms, None);
        keys.install(revoked.clone());
        for t in [&first, &second] {
            let parsed = Ticket::parse(t).expect("parses");
            assert_eq!(
                keys.verify_ticket(&parsed, "p", 1_800_000_000),
                Err(TicketRefusal::BadSignature)
            );
        }
        // The front door in this process follows at once.
        assert_eq!(
            door.verify(&old_token, 1_800_000_000),
            Err(gateway::redirect::RedirectRefusal::BadSignature)
        );
        let new_token = signed_now(&keys, addr);
        assert_eq!(door.verify(&new_token, 1_800_000_000), Ok(addr));
        // And the store holds the new key alone: a restart (or a replica
        // that leads next) verifies nothing older either.
        let (reloaded, put) = SigningKeys::load(Some(revoked), NOW_MS + 3);
        assert!(put.is_none());
        assert_eq!(reloaded.summary().0, 1);
        let new = keys
            .ticket_signer()
            .issue("p", "bob", 2_000_000_000)
            .expect("fits");
        let parsed = Ticket::parse(&new).expect("parses");
        assert_eq!(
            reloaded
                .verify_ticket(&parsed, "p", 1_800_000_000)
                .as_deref(),
            Ok("bob")
        );
    }
}
