//! A pool's settings: replacing them (P3) and what a replacement may not
//! change (a pool's name; its type while it has hosts; a MultiplePersistent
//! pool with multi-host owners cannot become Persistent).

use std::collections::BTreeSet;

use super::{Change, Pool};
use crate::Error;
use crate::model::*;

impl Pool {
    /// Replaces the pool's settings (rule P3: applies to the next placement;
    /// existing sessions never move). Answers the warnings of rule P5.
    pub fn set_config(&mut self, config: PoolConfig) -> Result<Vec<String>, Error> {
        let warnings = config.validate()?;
        if config.name != self.config.name {
            return Err(Error::InvalidParameter(
                "name: a host pool cannot be renamed".into(),
            ));
        }
        if config.host_pool_type != self.config.host_pool_type && !self.hosts.is_empty() {
            return Err(Error::Conflict(format!(
                "hostPoolType: host pool {} has session hosts; remove them before changing \
                 it from {:?} to {:?}",
                self.config.name, self.config.host_pool_type, config.host_pool_type
            )));
        }
        if config.load_balancer_type == LoadBalancerType::Persistent
            && self.config.load_balancer_type == LoadBalancerType::MultiplePersistent
            && let Some((user, _)) = self.owners.iter().find(|(_, hosts)| hosts.len() > 1)
        {
            return Err(Error::Conflict(format!(
                "loadBalancerType: user {user} owns several session hosts, which a \
                 Persistent pool does not allow"
            )));
        }
        let lifetime_was = self.config.max_session_lifetime_seconds > 0;
        self.config = config;
        if lifetime_was != (self.config.max_session_lifetime_seconds > 0) {
            self.by_create_time = if lifetime_was {
                BTreeSet::new()
            } else {
                self.sessions
                    .iter()
                    .map(|(slot, e)| (e.session.create_time_ms, slot))
                    .collect()
            };
        }
        // Limits, thresholds, factors or the algorithm may have changed:
        // every derived index is recomputed (settings change rarely).
        self.rebuild_indexes();
        self.changes.push(Change::Config);
        Ok(warnings)
    }
}
