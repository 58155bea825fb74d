//! What a user's workspace feed lists, and the files and icons it names
//! (rule F4): decided here, served by the RD Gateway's HTTPS front
//! (`gateway::feed`, `/RDWeb/Feed/webfeed.aspx`), in this process or on
//! its own machine through `GET /api/v1/users/{name}/feed`.
//!
//! The feed lists what [`Workspace::published_to`] gives the user (the
//! portal's list, the launch files' check), less what a subscribed client
//! could not open: its files are kept by the client and opened days later,
//! so they carry no ticket, and a pool is listed only when one of the
//! doors takes such a file:
//!
//! - the RD Gateway with Windows sign-in, for a pool whose `gatewaySignIn`
//!   is `TicketOrWindows` (rule AD2), when this broker knows the gateway;
//! - else the RDP front door by the pool's routing token, for a pool that
//!   allows the front door (`allowFrontDoor`) without requiring tickets.
//!
//! A pool that takes neither is left out of the feed (its users still have
//! the portal).
//!
//! `LastUpdated` is the time the user's list last changed: a digest of the
//! list is kept with that time per user in the store
//! ([`Workspace::feed_since`]), so it is the same on every fetch, after a
//! restart and on every replica, and moves when, and only when, the list
//! does.

use api::types::{FeedOutput, FeedResourceOutput};
use placement::{ConnectionTarget, GatewaySignIn};
use sha2::{Digest, Sha256};

use crate::error::BrokerError;
use crate::state::Broker;
#[cfg(doc)]
use crate::workspace::Workspace;

/// How a pool's feed files reach it.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Route {
    /// Through the RD Gateway at this address, signed in with Windows.
    Gateway(String),
    /// Through the RDP front door at this address, by routing token.
    FrontDoor(String),
}

impl Route {
    /// The server a file of this route connects to: its host name.
    fn terminal_server(&self) -> String {
        let address = match self {
            Route::Gateway(a) | Route::FrontDoor(a) => a,
        };
        // `host:port`, `[v6]:port` or a bare name.
        let host = match address.rsplit_once(':') {
            Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host,
            _ => address.as_str(),
        };
        host.trim_start_matches('[')
            .trim_end_matches(']')
            .to_string()
    }
}

/// How `pool`'s feed files reach it, if any door takes a file without a
/// ticket there.
fn route(b: &Broker, pool: &str) -> Result<Option<Route>, BrokerError> {
    let (front_door, gateway) = b.connector().doors();
    b.core().peek(pool, |p| {
        let c = p.config();
        Ok(match (gateway, front_door) {
            (Some(gateway), _) if c.gateway_sign_in == GatewaySignIn::TicketOrWindows => {
                Some(Route::Gateway(gateway.to_string()))
            }
            // A host-named pool (rule AD4) names its host when a file is
            // fetched, which a kept file cannot.
            (_, Some(door))
                if c.allow_front_door
                    && !c.require_connection_ticket
                    && c.connection_target == ConnectionTarget::Pool =>
            {
                Some(Route::FrontDoor(door.to_string()))
            }
            _ => None,
        })
    })
}

/// The groups that decide what `user` is given: the directory's.
async fn groups(b: &Broker, user: &str, pool: Option<&str>) -> Result<Vec<String>, BrokerError> {
    placement::validate_user("user", user)?;
    b.workspace().groups_of(user, pool, &[]).await
}

/// What `user`'s feed lists, and its `LastUpdated`.
pub async fn feed(b: &Broker, user: &str) -> Result<FeedOutput, BrokerError> {
    let groups = groups(b, user, None).await?;
    let mut resources = Vec::new();
    for pool in b.workspace().published_to(user, &groups) {
        let Ok(Some(route)) = route(b, &pool.pool) else {
            continue;
        };
        let terminal_server = route.terminal_server();
        if pool.desktop {
            resources.push(FeedResourceOutput {
                host_pool: pool.pool.clone(),
                alias: None,
                title: pool.title.clone(),
                // A desktop has no record of its own: it changed when the
                // list did (set below).
                modified_ms: 0,
                file_extensions: Vec::new(),
                folder: String::new(),
                icon: None,
                terminal_server: terminal_server.clone(),
            });
        }
        for app in pool.applications {
            let a = app.application;
            resources.push(FeedResourceOutput {
                host_pool: pool.pool.clone(),
                alias: Some(app.alias),
                title: a.display_name,
                modified_ms: a.modified_ms,
                file_extensions: a.file_extensions,
                folder: a.folder,
                // Any change of the application (its icon's included)
                // changes its time: the icon's address changes with it.
                icon: app.has_icon.then(|| format!("{:x}", a.modified_ms)),
                terminal_server: terminal_server.clone(),
            });
        }
    }
    let digest = set_digest(&resources);
    let since = b.workspace().feed_since(user, &digest).await?;
    for r in resources.iter_mut().filter(|r| r.alias.is_none()) {
        r.modified_ms = since;
    }
    Ok(FeedOutput {
        user: user.to_string(),
        last_updated_ms: since,
        resources,
    })
}

/// A digest of everything a feed lists (the desktops' times excepted,
/// which are the digest's own).
fn set_digest(resources: &[FeedResourceOutput]) -> String {
    let mut hash = Sha256::new();
    for r in resources {
        // serde_json writes each field once, in declaration order, and
        // escapes every string: the encoding is unambiguous.
        let line = serde_json::to_vec(r).unwrap_or_default();
        hash.update((line.len() as u64).to_le_bytes());
        hash.update(&line);
    }
    hex::encode(hash.finalize())
}

/// The `.rdp` file `user`'s feed names for `pool`'s desktop (`alias`
/// None) or its application `alias`: no ticket inside. Refused 403
/// `NotEntitled` unless the user is given it, 404 `NotFound` when no door
/// takes the pool's files without a ticket.
pub async fn feed_file(
    b: &Broker,
    user: &str,
    pool: &str,
    alias: Option<&str>,
) -> Result<String, BrokerError> {
    let groups = groups(b, user, Some(pool)).await?;
    let application = match alias {
        None => {
            b.workspace().published_desktop(pool, user, &groups)?;
            None
        }
        Some(alias) => Some(
            b.workspace()
                .published_application(pool, alias, user, &groups)?,
        ),
    };
    let route = route(b, pool)?.ok_or_else(|| {
        BrokerError::NotFound(format!(
            "host pool {pool} takes no connection without a ticket (neither Windows sign-in at \
             the RD Gateway nor routing tokens at the front door): it is not in the feed"
        ))
    })?;
    let (kdc_proxy, properties, mode) = b.core().peek(pool, |p| {
        let c = p.config();
        Ok((c.kdc_proxy, c.rdp_properties(), c.application_mode))
    })?;
    let mut file = match &route {
        Route::Gateway(gateway) => {
            let mut file = api::rdp_file::gateway_windows_rdp_file(gateway, pool);
            if kdc_proxy {
                file.push_str(&api::rdp_file::kdc_proxy_line(gateway));
            }
            file
        }
        Route::FrontDoor(door) => api::rdp_file::rdp_file(door, pool),
    };
    file = api::rdp_file::with_properties(&file, &properties);
    if let Some(app) = application {
        crate::workspace::check_mode(mode, &app)?;
        let args = app.launch_command_line(None)?;
        file = crate::workspace::launch_file(&file, mode, &app, &args);
    }
    Ok(file)
}

/// The icons `user`'s feed names for application `alias` of `pool`: a
/// 32×32 PNG and an ICO. Refused as [`feed_file`] is, and 404 for an
/// application without an icon.
pub async fn feed_icon(
    b: &Broker,
    user: &str,
    pool: &str,
    alias: &str,
) -> Result<api::feed::icons::FeedIcons, BrokerError> {
    let groups = groups(b, user, Some(pool)).await?;
    let app = b
        .workspace()
        .published_application(pool, alias, user, &groups)?;
    crate::workspace::icons_of(&app)
        .map_err(|e| BrokerError::NotFound(format!("a stored icon: {e}")))?
        .ok_or_else(|| BrokerError::NotFound(format!("application {alias} of {pool} has no icon")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_names_its_doors_host() {
        assert_eq!(
            Route::Gateway("gw.example:8443".into()).terminal_server(),
            "gw.example"
        );
        assert_eq!(
            Route::FrontDoor("door.example".into()).terminal_server(),
            "door.example"
        );
        assert_eq!(
            Route::FrontDoor("[::1]:3389".into()).terminal_server(),
            "::1"
        );
    }

    #[test]
    fn the_digest_moves_with_any_field_of_the_list() {
        let r = FeedResourceOutput {
            host_pool: "p".into(),
            alias: Some("a".into()),
            title: "A".into(),
            modified_ms: 1,
            file_extensions: vec![],
            folder: String::new(),
            icon: None,
            terminal_server: "gw".into(),
        };
        let base = set_digest(std::slice::from_ref(&r));
        assert_eq!(base, set_digest(std::slice::from_ref(&r)));
        assert_ne!(base, set_digest(&[]));
        let renamed = FeedResourceOutput {
            title: "B".into(),
            ..r.clone()
        };
        assert_ne!(base, set_digest(&[renamed]));
        assert_ne!(base, set_digest(&[r.clone(), r]));
    }
}
