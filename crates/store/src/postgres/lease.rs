//! The leader's lease: a leader that stops renewing it, because it froze,
//! its machine stalled or it lost the database, is replaced once it runs
//! out, although its connection may still hold the owner lock.
//!
//! The lease is a time in `deskbroker_leader`, by the database server's
//! clock, so replicas never compare their own clocks. The leader renews it
//! over a connection of its own, never queued behind the writer's batches.
//! A replica that finds it expired ends the leader's database session,
//! which frees the owner lock, and campaigns (see `PostgresStore::campaign`).
//! An expired lease cannot be renewed, so that judgement is final.
//!
//! The leader keeps its own copy by its monotonic clock: a renewal sent at
//! `t` and answered makes it valid until `t + lease`, never later than what
//! the server wrote. A leader that wakes from a freeze therefore knows at
//! once, before it answers anything, that it may no longer decide.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio_postgres::Client;

use super::PostgresError;
use super::connection::{configure_session, open_connection};
use crate::StoreError;

/// How many renewals a lease gets: one every `lease / RENEWALS_PER_LEASE`,
/// so that a few delayed or lost renewals in a row cost nothing.
pub const RENEWALS_PER_LEASE: u32 = 5;

/// The leader a campaign's winner replaces.
#[derive(Clone, Debug)]
pub(super) struct Predecessor {
    pub(super) epoch: Option<i64>,
    /// Where it answered (its advertised address).
    pub(super) url: Option<String>,
    /// Until when its lease may run: taken when the server's answer
    /// arrived, plus what the server said was left, so never sooner than
    /// by the server's clock.
    pub(super) until: Instant,
}

/// How a leader lost its lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LeaseLost {
    /// The database says so: the lease expired, or another replica leads
    /// under a newer epoch. This process must not decide again.
    Replaced,
    /// No renewal was answered for a whole lease (the database is
    /// unreachable from here); another replica may lead by now.
    Expired(String),
}

/// A won campaign's lease and its epoch (see the module's docs).
pub struct Lease {
    database_url: String,
    epoch: i64,
    duration: Duration,
    valid_until: Mutex<Instant>,
    /// The previous leader: this one decides nothing before its lease has
    /// run out (see [`Lease::predecessor_gone`]).
    predecessor: Predecessor,
    lost: watch::Sender<Option<LeaseLost>>,
}

impl Lease {
    /// The lease the server granted at `granted` (when the campaign sent
    /// its publication) under `epoch`; the previous leader's may run until
    /// `predecessor.until`.
    pub(super) fn new(
        database_url: &str,
        epoch: i64,
        duration: Duration,
        granted: Instant,
        predecessor: Predecessor,
    ) -> Lease {
        Lease {
            database_url: database_url.to_string(),
            epoch,
            duration,
            valid_until: Mutex::new(granted + duration),
            predecessor,
            lost: watch::Sender::new(None),
        }
    }

    /// The previous leader's epoch (None for the first leader).
    pub fn predecessor_epoch(&self) -> Option<i64> {
        self.predecessor.epoch
    }

    /// Where the previous leader answered (None for the first leader).
    pub fn predecessor_url(&self) -> Option<&str> {
        self.predecessor.url.as_deref()
    }

    /// How long the previous leader's lease still runs.
    pub fn predecessor_left(&self) -> Duration {
        self.predecessor
            .until
            .saturating_duration_since(Instant::now())
    }

    /// Waits until the previous leader's lease has run out. Until then that
    /// leader, cut off from the database without knowing it yet (its
    /// session ended by a database restart, a cut connection or a replica
    /// that found it frozen), may still answer a reconnect from memory, as
    /// a leader does; deciding meanwhile could send the same user to two
    /// hosts. Its writes are fenced already: the new epoch is published.
    pub async fn predecessor_gone(&self) {
        tokio::time::sleep_until(self.predecessor.until.into()).await;
    }

    /// Gives the lease up at once, for a clean stop: the next leader need
    /// not wait for it to run out. The caller must answer nothing more as
    /// the leader (this lease is invalid from now on, whatever the database
    /// answers); bounded by `timeout`.
    pub async fn release(&self, timeout: Duration) -> Result<(), StoreError> {
        self.lost.send_replace(Some(LeaseLost::Replaced));
        let release = async {
            let (c, _) = open_connection(&self.database_url).await?;
            configure_session(&c).await?;
            c.execute(
                "UPDATE deskbroker_leader SET lease_until = now() WHERE epoch = $1",
                &[&self.epoch],
            )
            .await
            .map_err(|e| PostgresError::query("cannot release the leader's lease", e))?;
            Ok::<_, StoreError>(())
        };
        match tokio::time::timeout(timeout, release).await {
            Ok(r) => r,
            Err(_) => Err(StoreError::Task(format!(
                "the database did not answer the lease's release within {} ms",
                timeout.as_millis()
            ))),
        }
    }

    /// The leadership's epoch: one more at every election won.
    pub fn epoch(&self) -> i64 {
        self.epoch
    }

    /// Whether this process may still decide, by its own clock.
    pub fn is_valid(&self) -> bool {
        self.lost.borrow().is_none()
            && Instant::now() < *self.valid_until.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How long the lease still runs by this process's clock (zero once
    /// lost).
    pub fn left(&self) -> Duration {
        if self.lost.borrow().is_some() {
            return Duration::ZERO;
        }
        self.valid_until
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .saturating_duration_since(Instant::now())
    }

    /// Whether the database said that another replica may lead now.
    pub fn replaced(&self) -> bool {
        matches!(*self.lost.borrow(), Some(LeaseLost::Replaced))
    }

    /// Waits until the lease is lost; answers how.
    pub async fn lost(&self) -> LeaseLost {
        let mut rx = self.lost.subscribe();
        loop {
            if let Some(lost) = rx.borrow_and_update().clone() {
                return lost;
            }
            if rx.changed().await.is_err() {
                return LeaseLost::Expired("the lease keeper stopped".into());
            }
        }
    }

    /// Renews the lease every `lease / RENEWALS_PER_LEASE` for as long as it
    /// holds; returns once it is lost, which [`Lease::lost`] then answers.
    pub async fn keep(&self) {
        let lost = self.renew_until_lost().await;
        match &lost {
            LeaseLost::Replaced => {
                tracing::warn!(
                    epoch = self.epoch,
                    "the lease is lost: another replica leads now"
                );
            }
            LeaseLost::Expired(why) => {
                tracing::warn!(epoch = self.epoch, error = %why, "the lease ran out: could not renew it");
            }
        }
        self.lost.send_replace(Some(lost));
    }

    async fn renew_until_lost(&self) -> LeaseLost {
        let interval = self.duration / RENEWALS_PER_LEASE;
        let mut client: Option<Client> = None;
        let mut last_error = String::from("no renewal was answered");
        loop {
            let sent = Instant::now();
            let valid_until = *self.valid_until.lock().unwrap_or_else(|e| e.into_inner());
            if sent >= valid_until {
                return LeaseLost::Expired(last_error);
            }
            // Never past the lease: an answer after it is of no use.
            let budget = (valid_until - sent).min(self.duration / 2);
            match tokio::time::timeout(budget, self.renew(&mut client)).await {
                Ok(Ok(true)) => {
                    let mut until = self.valid_until.lock().unwrap_or_else(|e| e.into_inner());
                    *until = (*until).max(sent + self.duration);
                }
                Ok(Ok(false)) => return LeaseLost::Replaced,
                Ok(Err(e)) => {
                    client = None;
                    last_error = e.to_string();
                }
                Err(_) => {
                    client = None;
                    last_error = format!(
                        "the database did not answer a renewal within {} ms",
                        budget.as_millis()
                    );
                }
            }
            tokio::time::sleep_until((sent + interval).into()).await;
        }
    }

    /// One renewal: true when the lease still ran and now runs a whole
    /// `lease` from the server's now, false when it had expired or another
    /// epoch leads.
    async fn renew(&self, client: &mut Option<Client>) -> Result<bool, StoreError> {
        if client.is_none() {
            let (c, _) = open_connection(&self.database_url).await?;
            configure_session(&c).await?;
            *client = Some(c);
        }
        let Some(c) = client.as_ref() else {
            return Err(StoreError::Task("no lease connection".into()));
        };
        let renewed = c
            .execute(
                "UPDATE deskbroker_leader
                    SET lease_until = now() + make_interval(secs => $2), renewed_at = now()
                  WHERE epoch = $1 AND lease_until >= now()",
                &[&self.epoch, &self.duration.as_secs_f64()],
            )
            .await
            .map_err(|e| PostgresError::query("cannot renew the leader's lease", e))?;
        Ok(renewed == 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_lease_is_valid_until_its_duration_passes_or_it_is_lost() {
        let now = Instant::now();
        let none = Predecessor {
            epoch: None,
            url: None,
            until: now,
        };
        let lease = Lease::new(
            "postgres://x/y",
            3,
            Duration::from_secs(10),
            now,
            none.clone(),
        );
        assert!(lease.is_valid());
        assert_eq!(lease.epoch(), 3);
        let frozen = Lease::new(
            "postgres://x/y",
            3,
            Duration::from_millis(1),
            Instant::now() - Duration::from_secs(1),
            none,
        );
        assert!(!frozen.is_valid(), "a lease granted long ago has run out");
        lease.lost.send_replace(Some(LeaseLost::Replaced));
        assert!(!lease.is_valid());
        assert!(lease.replaced());
        assert_eq!(lease.lost().await, LeaseLost::Replaced);
    }
}
