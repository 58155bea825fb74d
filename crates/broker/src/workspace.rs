//! Published applications and application groups (rule F1), and what each
//! user is given: their workspace, which the launch files (F2), the feed
//! (F4) and the portal (F5) all read from [`Workspace::published_to`], so
//! that none of them can list what another would refuse.
//!
//! [`Workspace`] is the service: it keeps every pool's applications and
//! every application group in memory, as the store does. A change is made
//! under the lock of the pool it concerns (`Core::write_with`), so that it
//! is ordered with the pool's deletion: a deleted pool's applications and
//! groups go in the batch that deletes it (`Workspace::forget_pool`),
//! and nothing can be put for a pool once it is gone.
//!
//! Who is given what:
//! - a pool with no application group publishes its desktop to every user
//!   its entitlements admit (rule T2), as it always has;
//! - a pool with application groups publishes its desktop to the users of
//!   its `Desktop` group, and each application to the users of a
//!   `RemoteApp` group that lists it;
//! - a user given both a pool's desktop and some of its applications sees
//!   the kind the pool prefers (`preferredAppGroupType`): a pooled pool
//!   gives a user one session, a desktop or applications;
//! - nothing is published to a user the pool's entitlements refuse, so a
//!   workspace never lists what its user could not open.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use placement::{
    AppGroupKind, Application, ApplicationGroup, ApplicationMode, FeedStamp,
    MAX_APPLICATION_GROUPS, MAX_APPLICATIONS_PER_POOL, MAX_FEED_STAMPS, MAX_ICON_BYTES,
    PreferredAppGroupType,
};
use store::{Mutation, PoolRecord, Snapshot};

use crate::core::Core;
use crate::directory::Directory;
use crate::error::BrokerError;
use crate::sync::MutexExt;

/// What a user is given of one pool.
#[derive(Clone, Debug, PartialEq)]
pub struct PublishedPool {
    pub pool: String,
    /// The pool's `friendlyName`, or its name when it has none.
    pub title: String,
    /// Whether the pool's desktop is given.
    pub desktop: bool,
    /// The applications given, in alias order.
    pub applications: Vec<PublishedApp>,
}

/// An application as a user's workspace lists it: without its icons'
/// data, which a list of hundreds would copy for nothing (they are served
/// one at a time, `Workspace::application`).
#[derive(Clone, Debug, PartialEq)]
pub struct PublishedApp {
    pub alias: String,
    /// Its fields, `iconPng` and `iconIco` left out.
    pub application: Application,
    /// Whether it has an icon.
    pub has_icon: bool,
}

impl PublishedApp {
    fn of(alias: &str, app: &Application) -> PublishedApp {
        PublishedApp {
            alias: alias.to_string(),
            application: Application {
                display_name: app.display_name.clone(),
                program: app.program.clone(),
                command_line_policy: app.command_line_policy,
                command_line: app.command_line.clone(),
                icon_png: None,
                icon_ico: None,
                file_extensions: app.file_extensions.clone(),
                folder: app.folder.clone(),
                modified_ms: app.modified_ms,
            },
            has_icon: app.icon_png.is_some() || app.icon_ico.is_some(),
        }
    }
}

/// The applications and groups, as the store keeps them.
#[derive(Default)]
struct State {
    /// Each pool's applications by alias.
    applications: BTreeMap<String, BTreeMap<String, Application>>,
    groups: BTreeMap<String, ApplicationGroup>,
}

impl State {
    fn groups_of<'a>(
        &'a self,
        pool: &'a str,
    ) -> impl Iterator<Item = (&'a String, &'a ApplicationGroup)> {
        self.groups.iter().filter(move |(_, g)| g.host_pool == pool)
    }
}

/// The applications, groups and feed stamps a store kept, for
/// [`Workspace::new`].
pub(crate) struct Stored(State, HashMap<String, FeedStamp>);

/// The published applications and application groups (rule F1).
pub struct Workspace {
    core: Arc<Core>,
    /// The directory whose groups assignments name (rule AD1), if any.
    directory: Option<Arc<Directory>>,
    state: Mutex<State>,
    /// Each user's feed stamp (rule F4): what their feed last listed, and
    /// since when; at most [`MAX_FEED_STAMPS`].
    stamps: Mutex<HashMap<String, FeedStamp>>,
}

fn application_not_found(pool: &str, alias: &str) -> BrokerError {
    BrokerError::NotFound(format!("host pool {pool} publishes no application {alias}"))
}

fn group_not_found(name: &str) -> BrokerError {
    BrokerError::NotFound(format!("application group {name} does not exist"))
}

/// Checks an icon: base64 of at most [`MAX_ICON_BYTES`] bytes that the
/// image decoder of its kind reads as an image of bounded size.
fn check_icon(field: &str, base64_text: &str, png: bool) -> Result<(), BrokerError> {
    // Four characters of base64 carry three bytes: judged before decoding.
    if base64_text.len() > MAX_ICON_BYTES.div_ceil(3) * 4 + 4 {
        return Err(BrokerError::Invalid(format!(
            "{field}: larger than {MAX_ICON_BYTES} bytes"
        )));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(base64_text.trim())
        .map_err(|e| BrokerError::Invalid(format!("{field}: not base64: {e}")))?;
    if bytes.len() > MAX_ICON_BYTES {
        return Err(BrokerError::Invalid(format!(
            "{field}: larger than {MAX_ICON_BYTES} bytes"
        )));
    }
    let checked = if png {
        api::feed::icons::check_png(&bytes).map(|_| ())
    } else {
        api::feed::icons::check_ico(&bytes).map(|_| ())
    };
    checked.map_err(|e| BrokerError::Invalid(format!("{field}: {e}")))
}

impl Workspace {
    /// What the store kept, taken from its snapshot before the pools go
    /// to the core.
    pub(crate) fn take_stored(pools: &mut [PoolRecord], snapshot: &mut Snapshot) -> Stored {
        let mut state = State::default();
        for record in pools.iter_mut() {
            let apps = std::mem::take(&mut record.applications);
            if !apps.is_empty() {
                state
                    .applications
                    .insert(record.config.name.clone(), apps.into_iter().collect());
            }
        }
        state.groups = std::mem::take(&mut snapshot.application_groups)
            .into_iter()
            .collect();
        let stamps = std::mem::take(&mut snapshot.feed_stamps)
            .into_iter()
            .collect();
        Stored(state, stamps)
    }

    /// The service over `core`, with what the store kept.
    pub(crate) fn new(
        core: Arc<Core>,
        directory: Option<Arc<Directory>>,
        stored: Stored,
    ) -> Workspace {
        Workspace {
            core,
            directory,
            state: Mutex::new(stored.0),
            stamps: Mutex::new(stored.1),
        }
    }

    /// Since when `user`'s feed has listed the set whose digest is
    /// `set_hash` (rule F4): the stamp's time while the set is the one it
    /// records; else now, recorded durably before it is answered, so that
    /// the feed's `LastUpdated` moves exactly when the set does and is the
    /// same after a restart. Past [`MAX_FEED_STAMPS`] users, a new user's
    /// is now, unrecorded.
    pub async fn feed_since(&self, user: &str, set_hash: &str) -> Result<i64, BrokerError> {
        if let Some(stamp) = self.stamps.lock_or_recover().get(user)
            && stamp.set_hash == set_hash
        {
            return Ok(stamp.since_ms);
        }
        let now = self.core.now_ms();
        self.core
            .commit(|| {
                let mut stamps = self.stamps.lock_or_recover();
                // Another request may have recorded this very set meanwhile.
                if let Some(stamp) = stamps.get(user)
                    && stamp.set_hash == set_hash
                {
                    return Ok((stamp.since_ms, Vec::new()));
                }
                if !stamps.contains_key(user) && stamps.len() >= MAX_FEED_STAMPS {
                    tracing::warn!(
                        user,
                        "workspace feed: {MAX_FEED_STAMPS} users' stamps are kept already; \
                         this user's LastUpdated is not recorded"
                    );
                    return Ok((now, Vec::new()));
                }
                let stamp = FeedStamp {
                    set_hash: set_hash.to_string(),
                    since_ms: now,
                };
                stamps.insert(user.to_string(), stamp.clone());
                let put = Mutation::PutFeedStamp {
                    user: user.to_string(),
                    stamp,
                };
                Ok((now, vec![put]))
            })
            .await
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock_or_recover()
    }

    /// A pool's applications, by alias (404 for a pool that does not
    /// exist).
    pub fn applications(&self, pool: &str) -> Result<Vec<(String, Application)>, BrokerError> {
        self.core.peek(pool, |_| Ok(()))?;
        Ok(self
            .state()
            .applications
            .get(pool)
            .map(|apps| apps.iter().map(|(a, x)| (a.clone(), x.clone())).collect())
            .unwrap_or_default())
    }

    /// One application of a pool.
    pub fn application(&self, pool: &str, alias: &str) -> Result<Application, BrokerError> {
        self.core.peek(pool, |_| Ok(()))?;
        self.state()
            .applications
            .get(pool)
            .and_then(|apps| apps.get(alias))
            .cloned()
            .ok_or_else(|| application_not_found(pool, alias))
    }

    /// Publishes an application, or replaces it (answers whether it was
    /// created): every field checked (400 naming it), the icons read as
    /// images, at most [`MAX_APPLICATIONS_PER_POOL`] in a pool (409).
    pub async fn put_application(
        &self,
        pool: &str,
        alias: &str,
        mut application: Application,
    ) -> Result<(bool, Application), BrokerError> {
        placement::validate_name("alias", alias)?;
        application.validate()?;
        if let Some(icon) = &application.icon_png {
            check_icon("iconPng", icon, true)?;
        }
        if let Some(icon) = &application.icon_ico {
            check_icon("iconIco", icon, false)?;
        }
        self.core
            .write_with(pool, |p, now| {
                check_mode(p.config().application_mode, &application)?;
                let mut state = self.state();
                let apps = state.applications.entry(pool.to_string()).or_default();
                let created = !apps.contains_key(alias);
                if created && apps.len() >= MAX_APPLICATIONS_PER_POOL {
                    return Err(placement::Error::Conflict(format!(
                        "host pool {pool} publishes {MAX_APPLICATIONS_PER_POOL} applications, \
                         the most a pool may"
                    ))
                    .into());
                }
                application.modified_ms = now;
                apps.insert(alias.to_string(), application.clone());
                let put = Mutation::PutApplication {
                    pool: pool.to_string(),
                    alias: alias.to_string(),
                    application: application.clone(),
                };
                Ok(((created, application), vec![put]))
            })
            .await
    }

    /// Stops publishing an application; the groups that listed it no
    /// longer do (in the same batch).
    pub async fn delete_application(&self, pool: &str, alias: &str) -> Result<(), BrokerError> {
        self.core
            .write_with(pool, |_, now| {
                let mut state = self.state();
                let removed = state
                    .applications
                    .get_mut(pool)
                    .and_then(|apps| apps.remove(alias));
                if removed.is_none() {
                    return Err(application_not_found(pool, alias));
                }
                let mut mutations = vec![Mutation::DeleteApplication {
                    pool: pool.to_string(),
                    alias: alias.to_string(),
                }];
                for (name, group) in state.groups.iter_mut() {
                    if group.host_pool == pool && group.applications.iter().any(|a| a == alias) {
                        group.applications.retain(|a| a != alias);
                        group.modified_ms = now;
                        mutations.push(Mutation::PutApplicationGroup {
                            name: name.clone(),
                            group: group.clone(),
                        });
                    }
                }
                Ok(((), mutations))
            })
            .await
    }

    /// Every application group, by name.
    pub fn groups(&self) -> Vec<(String, ApplicationGroup)> {
        self.state()
            .groups
            .iter()
            .map(|(n, g)| (n.clone(), g.clone()))
            .collect()
    }

    /// One application group.
    pub fn group(&self, name: &str) -> Result<ApplicationGroup, BrokerError> {
        self.state()
            .groups
            .get(name)
            .cloned()
            .ok_or_else(|| group_not_found(name))
    }

    /// Creates or replaces an application group (answers whether it was
    /// created): checked field by field (400), its pool existing (400), a
    /// group keeping its pool (400), each application published by the
    /// pool (400), at most one `Desktop` group a pool and
    /// [`MAX_APPLICATION_GROUPS`] in all (409).
    pub async fn put_group(
        &self,
        name: &str,
        mut group: ApplicationGroup,
    ) -> Result<(bool, ApplicationGroup), BrokerError> {
        placement::validate_name("name", name)?;
        group.validate()?;
        let pool = group.host_pool.clone();
        let written = self.core.write_with(&pool, |_, now| {
            let mut state = self.state();
            let current = state.groups.get(name);
            if let Some(current) = current
                && current.host_pool != pool
            {
                return Err(BrokerError::Invalid(format!(
                    "hostPool: application group {name} belongs to host pool {}; a group \
                     cannot move to another pool",
                    current.host_pool
                )));
            }
            let created = current.is_none();
            if created && state.groups.len() >= MAX_APPLICATION_GROUPS {
                return Err(placement::Error::Conflict(format!(
                    "this broker keeps at most {MAX_APPLICATION_GROUPS} application groups"
                ))
                .into());
            }
            if group.kind == AppGroupKind::Desktop
                && let Some((other, _)) = state
                    .groups_of(&pool)
                    .find(|(n, g)| *n != name && g.kind == AppGroupKind::Desktop)
            {
                return Err(placement::Error::Conflict(format!(
                    "host pool {pool} has a Desktop application group already ({other}); a \
                     pool has at most one"
                ))
                .into());
            }
            let published = state.applications.get(&pool);
            for (i, alias) in group.applications.iter().enumerate() {
                if !published.is_some_and(|apps| apps.contains_key(alias)) {
                    return Err(BrokerError::Invalid(format!(
                        "applications[{i}]: host pool {pool} publishes no application {alias}"
                    )));
                }
            }
            group.applications.sort();
            group.applications.dedup();
            group.modified_ms = now;
            state.groups.insert(name.to_string(), group.clone());
            let put = Mutation::PutApplicationGroup {
                name: name.to_string(),
                group: group.clone(),
            };
            Ok(((created, group), vec![put]))
        });
        match written.await {
            Err(BrokerError::PoolNotFound(pool)) => Err(BrokerError::Invalid(format!(
                "hostPool: host pool {pool} does not exist"
            ))),
            other => other,
        }
    }

    /// Removes an application group.
    pub async fn delete_group(&self, name: &str) -> Result<(), BrokerError> {
        let pool = self.group(name)?.host_pool;
        self.core
            .write_with(&pool, |_, _| {
                let mut state = self.state();
                if state.groups.remove(name).is_none() {
                    return Err(group_not_found(name));
                }
                let delete = Mutation::DeleteApplicationGroup {
                    name: name.to_string(),
                };
                Ok(((), vec![delete]))
            })
            .await
    }

    /// A pool is being deleted (under its lock): its applications are
    /// forgotten (the store deletes them with the pool) and its groups
    /// too, by the mutations answered, which go in the pool's batch.
    pub(crate) fn forget_pool(&self, pool: &str) -> Vec<Mutation> {
        let mut state = self.state();
        state.applications.remove(pool);
        let names: Vec<String> = state.groups_of(pool).map(|(n, _)| n.clone()).collect();
        names
            .into_iter()
            .map(|name| {
                state.groups.remove(&name);
                Mutation::DeleteApplicationGroup { name }
            })
            .collect()
    }

    /// Whether what `user` is given in `pool` (in every pool, for None)
    /// depends on their groups: its entitlements name groups and not the
    /// user, or one of its application groups is assigned to groups. Only
    /// then is a directory asked (rule AD1), so that what is given by name
    /// stands while it is down.
    pub fn needs_groups(&self, user: &str, pool: Option<&str>) -> bool {
        let in_scope = |p: &str| pool.is_none_or(|only| only == p);
        let by_group = self
            .state()
            .groups
            .values()
            .any(|g| in_scope(&g.host_pool) && !g.assigned_groups.is_empty());
        by_group
            || self
                .core
                .pool_names()
                .into_iter()
                .filter(|p| in_scope(p))
                .any(|p| {
                    self.core
                        .peek(&p, |p| {
                            Ok(!p.config().entitled_groups.is_empty()
                                && p.check_entitled(user, &[], None).is_err())
                        })
                        .unwrap_or(false)
                })
    }

    /// The groups that decide what `user` is given in `pool` (in every
    /// pool, for None): the directory's (rule AD1) when one is configured
    /// and [`Workspace::needs_groups`], none when it does not, and those
    /// the caller vouches for (`claimed`) without a directory.
    pub async fn groups_of(
        &self,
        user: &str,
        pool: Option<&str>,
        claimed: &[String],
    ) -> Result<Vec<String>, BrokerError> {
        let Some(directory) = &self.directory else {
            return Ok(claimed.to_vec());
        };
        if !self.needs_groups(user, pool) {
            return Ok(Vec::new());
        }
        Ok(directory.groups(user).await?.groups.clone())
    }

    /// What `user`, a member of `groups`, is given, pool by pool in name
    /// order (pools that give them nothing left out).
    pub fn published_to(&self, user: &str, groups: &[String]) -> Vec<PublishedPool> {
        self.core
            .pool_names()
            .into_iter()
            .filter_map(|pool| self.published_in(&pool, user, groups))
            .collect()
    }

    /// What `user`, a member of `groups`, is given in `pool`; None when
    /// nothing (or no such pool). The one place the rules of the module's
    /// comment are applied: every check of one resource asks it of that
    /// pool alone.
    fn published_in(&self, pool: &str, user: &str, groups: &[String]) -> Option<PublishedPool> {
        let (entitled, title, preferred) = self
            .core
            .peek(pool, |p| {
                let c = p.config();
                let title = if c.friendly_name.is_empty() {
                    c.name.clone()
                } else {
                    c.friendly_name.clone()
                };
                Ok((
                    p.check_entitled(user, groups, None).is_ok(),
                    title,
                    c.preferred_app_group_type,
                ))
            })
            .ok()?;
        if !entitled {
            return None;
        }
        let state = self.state();
        let mut any_group = false;
        let mut desktop = false;
        let mut aliases: Vec<&String> = Vec::new();
        for (_, g) in state.groups_of(pool) {
            any_group = true;
            if !g.is_assigned(user, groups) {
                continue;
            }
            match g.kind {
                AppGroupKind::Desktop => desktop = true,
                AppGroupKind::RemoteApp => aliases.extend(g.applications.iter()),
            }
        }
        if !any_group {
            desktop = true;
        }
        let mut applications: Vec<PublishedApp> = state
            .applications
            .get(pool)
            .map(|apps| {
                apps.iter()
                    .filter(|(alias, _)| aliases.contains(alias))
                    .map(|(a, x)| PublishedApp::of(a, x))
                    .collect()
            })
            .unwrap_or_default();
        if desktop && !applications.is_empty() {
            match preferred {
                PreferredAppGroupType::Desktop => applications.clear(),
                PreferredAppGroupType::RemoteApp => desktop = false,
            }
        }
        (desktop || !applications.is_empty()).then(|| PublishedPool {
            pool: pool.to_string(),
            title,
            desktop,
            applications,
        })
    }

    /// Refused with 403 `NotEntitled` unless `user` (of `groups`) is given
    /// the desktop of `pool` (404 when there is no such pool).
    pub fn published_desktop(
        &self,
        pool: &str,
        user: &str,
        groups: &[String],
    ) -> Result<(), BrokerError> {
        self.core.peek(pool, |_| Ok(()))?;
        let given = self
            .published_in(pool, user, groups)
            .is_some_and(|p| p.desktop);
        if !given {
            return Err(placement::Error::NotEntitled(format!(
                "user {user} is not given the desktop of host pool {pool}: its entitlements \
                 or its application groups leave them out"
            ))
            .into());
        }
        Ok(())
    }

    /// The application `alias` of `pool` if `user` (of `groups`) is given
    /// it; refused 403 `NotEntitled` otherwise, and 404 when the pool
    /// publishes no such application.
    pub fn published_application(
        &self,
        pool: &str,
        alias: &str,
        user: &str,
        groups: &[String],
    ) -> Result<Application, BrokerError> {
        let application = self.application(pool, alias)?;
        let given = self
            .published_in(pool, user, groups)
            .is_some_and(|p| p.applications.iter().any(|a| a.alias == alias));
        if !given {
            return Err(placement::Error::NotEntitled(format!(
                "user {user} is not given application {alias} of host pool {pool}: no \
                 RemoteApp application group of the pool assigns it to them (or the pool \
                 gives them its desktop instead, by its preferredAppGroupType)"
            ))
            .into());
        }
        Ok(application)
    }
}

/// `file` (a pool's `.rdp` file) made to open `app` with `args` on a pool
/// of `mode` (rule F2): the one way the API, the portal and the feed
/// write an application's file.
pub(crate) fn launch_file(
    file: &str,
    mode: ApplicationMode,
    app: &Application,
    args: &str,
) -> String {
    api::rdp_file::with_application(
        file,
        &api::rdp_file::LaunchedApplication {
            mode,
            program: &app.program,
            display_name: &app.display_name,
            command_line: args,
            file_extensions: &app.file_extensions,
        },
    )
}

/// The icons the portal and the feed serve for `app` (a 32×32 PNG and an
/// ICO, `api::feed::icons::feed_icons`), None when it has none; an error
/// says why its stored icon cannot be read.
pub(crate) fn icons_of(app: &Application) -> Result<Option<api::feed::icons::FeedIcons>, String> {
    let decode = |text: &Option<String>| {
        text.as_deref()
            .map(|t| base64::engine::general_purpose::STANDARD.decode(t.trim()))
            .transpose()
            .map_err(|e| format!("a stored icon is not base64: {e}"))
    };
    let (png, ico) = (decode(&app.icon_png)?, decode(&app.icon_ico)?);
    api::feed::icons::feed_icons(png.as_deref(), ico.as_deref()).map_err(|e| e.to_string())
}

/// Rule F2: an `AlternateShell` pool runs a program by its path; the
/// host's own aliases (`||name`) are a RemoteApp host's.
pub(crate) fn check_mode(
    mode: ApplicationMode,
    application: &Application,
) -> Result<(), BrokerError> {
    if mode == ApplicationMode::AlternateShell && application.program.starts_with("||") {
        return Err(BrokerError::Invalid(format!(
            "program: {:?} is an alias of a RemoteApp host; this pool's applicationMode is \
             AlternateShell, whose hosts run a program by its path",
            application.program
        )));
    }
    Ok(())
}
