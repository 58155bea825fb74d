//! Hearing from session hosts: a heartbeat says the host is alive (rule
//! S7) and carries its metrics, its own thresholds (H6) and, from an agent,
//! its list of user sessions, which the broker reconciles with its own.

use api::types::{HeartbeatInput, SessionHostOutput};
use placement::HostSpec;

use crate::error::BrokerError;
use crate::state::Broker;

impl Broker {
    /// A heartbeat of `host`: the host is alive (rule S7), its metrics and
    /// own thresholds (H6) replace the last ones, and its list of sessions,
    /// when it sends one, is reconciled with the broker's.
    pub async fn heartbeat(
        &self,
        pool: &str,
        host: &str,
        input: HeartbeatInput,
    ) -> Result<SessionHostOutput, BrokerError> {
        let reported: Option<Vec<(String, placement::SessionState)>> = input
            .sessions
            .map(|v| v.into_iter().map(|s| (s.user, s.state)).collect());
        self.write(pool, |p, now| {
            if let Some(policy) = input.policy {
                let current = p.find_host(host)?;
                if current.spec.policy != policy {
                    let spec = HostSpec {
                        policy,
                        ..current.spec.clone()
                    };
                    p.upsert_host(spec, now)?;
                }
            }
            p.heartbeat(host, input.metrics, now)?;
            if let Some(reported) = &reported {
                p.reconcile(host, reported, now, &mut || {
                    uuid::Uuid::now_v7().to_string()
                })?;
            }
            Ok(SessionHostOutput::from(p.find_host(host)?))
        })
        .await
    }
}
