//! Who may call what (rule T1): the roles of API credentials and the ONE
//! authorization table that decides every route of the API.
//!
//! Each entry maps a method and a route pattern (as the router and the
//! OpenAPI document spell it) to the roles allowed, whether the session
//! host named in the path may call it with its own host credential, and
//! how the route relates to pools. A route without an entry is refused
//! (deny by default); a test checks that every path and method of the
//! OpenAPI document has one. A refusal is 403 `Forbidden` naming the role
//! the call needs, before any handler runs, so nothing changes.

use crate::enroll::Caller;

/// The role of an API credential.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Everything (the bootstrap admin token of `serve` is one).
    Admin,
    /// Reads everything; drains and undrains hosts, logs sessions off and
    /// changes their state.
    Operator,
    /// Reads everything but secrets.
    Reader,
    /// Reads pools, connects users and fetches connection files.
    Portal,
    /// A stand-alone RDP front door (`deskbroker gateway`): reads pools and
    /// their hosts, connects users (with R5's `exclude`), and marks or ends
    /// the sessions it relays. Not in the contract's list: what a front
    /// door needs without the admin token's power over everything else.
    Gateway,
}

impl Role {
    pub const ALL: [Role; 5] = [
        Role::Admin,
        Role::Operator,
        Role::Reader,
        Role::Portal,
        Role::Gateway,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::Operator => "operator",
            Role::Reader => "reader",
            Role::Portal => "portal",
            Role::Gateway => "gateway",
        }
    }

    pub fn parse(s: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.as_str() == s)
    }
}

/// How a route relates to host pools, for credentials limited to some.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Names one pool in its path (`{pool}`): a limited credential may
    /// call it only for its pools.
    Pool,
    /// Lists pools: a limited credential sees only its own.
    PoolList,
    /// Spans every pool (metrics, credentials): refused to a limited
    /// credential.
    Global,
    /// Not authenticated by a bearer token (registration carries its
    /// token in the body).
    Public,
}

/// One entry of the table.
#[derive(Clone, Copy, Debug)]
pub struct Rule {
    pub method: &'static str,
    pub route: &'static str,
    pub roles: &'static [Role],
    /// Whether the host named by `{host}` may call it with its own host
    /// credential.
    pub own_host: bool,
    pub scope: Scope,
}

use Role::{Admin, Gateway, Operator, Portal, Reader};

const ALL: &[Role] = &[Admin, Operator, Reader, Portal, Gateway];
const READERS: &[Role] = &[Admin, Operator, Reader];
const OPERATORS: &[Role] = &[Admin, Operator];
/// Who changes sessions: operators, and front doors marking the sessions
/// they relay Active or Disconnected, or ending them.
const SESSION_CHANGERS: &[Role] = &[Admin, Operator, Gateway];
const ADMIN: &[Role] = &[Admin];

const fn rule(
    method: &'static str,
    route: &'static str,
    roles: &'static [Role],
    own_host: bool,
    scope: Scope,
) -> Rule {
    Rule {
        method,
        route,
        roles,
        own_host,
        scope,
    }
}

const POOL: &str = "/api/v1/hostPools/{pool}";
const HOST: &str = "/api/v1/hostPools/{pool}/sessionHosts/{host}";
const SESSION: &str = "/api/v1/hostPools/{pool}/userSessions/{id}";

/// The authorization table. An operator's `PATCH` of a session host may
/// only change `allowNewSession` (drain and undrain); the handler checks
/// that with [`operator_may_patch_host`].
pub const TABLE: &[Rule] = &[
    rule("GET", "/api/v1/hostPools", ALL, false, Scope::PoolList),
    rule("GET", POOL, ALL, false, Scope::Pool),
    rule("PUT", POOL, ADMIN, false, Scope::Pool),
    rule("PATCH", POOL, ADMIN, false, Scope::Pool),
    rule("DELETE", POOL, ADMIN, false, Scope::Pool),
    // A front door finds a host by address (R3's redirection tokens).
    rule(
        "GET",
        "/api/v1/hostPools/{pool}/sessionHosts",
        &[Admin, Operator, Reader, Gateway],
        false,
        Scope::Pool,
    ),
    rule("GET", HOST, READERS, true, Scope::Pool),
    rule("PUT", HOST, ADMIN, false, Scope::Pool),
    rule("PATCH", HOST, OPERATORS, false, Scope::Pool),
    rule("DELETE", HOST, ADMIN, false, Scope::Pool),
    rule(
        "POST",
        "/api/v1/hostPools/{pool}/sessionHosts/{host}/heartbeat",
        ADMIN,
        true,
        Scope::Pool,
    ),
    rule(
        "POST",
        "/api/v1/hostPools/{pool}/connect",
        &[Admin, Portal, Gateway],
        false,
        Scope::Pool,
    ),
    rule(
        "GET",
        "/api/v1/hostPools/{pool}/userSessions",
        READERS,
        false,
        Scope::Pool,
    ),
    rule("GET", SESSION, READERS, false, Scope::Pool),
    rule("PATCH", SESSION, SESSION_CHANGERS, false, Scope::Pool),
    rule("DELETE", SESSION, SESSION_CHANGERS, false, Scope::Pool),
    rule(
        "GET",
        "/api/v1/hostPools/{pool}/rdpFile",
        ALL,
        false,
        Scope::Pool,
    ),
    // Always a ticket: the admin and portals only (the handler checks that
    // an admin credential limited to some pools has this one).
    rule(
        "GET",
        "/api/v1/hostPools/{pool}/webUrl",
        &[Admin, Portal],
        false,
        Scope::Pool,
    ),
    // Registration tokens are secrets.
    rule(
        "POST",
        "/api/v1/hostPools/{pool}/registrationToken",
        ADMIN,
        false,
        Scope::Pool,
    ),
    rule(
        "DELETE",
        "/api/v1/hostPools/{pool}/registrationToken",
        ADMIN,
        false,
        Scope::Pool,
    ),
    rule("POST", "/api/v1/register", ALL, false, Scope::Public),
    // Only the admin manages credentials.
    rule("GET", "/api/v1/credentials", ADMIN, false, Scope::Global),
    rule("POST", "/api/v1/credentials", ADMIN, false, Scope::Global),
    // Only the admin rotates the keys that sign tickets (T3).
    rule(
        "POST",
        "/api/v1/signingKeys/rotate",
        ADMIN,
        false,
        Scope::Global,
    ),
    rule(
        "POST",
        "/api/v1/signingKeys/revoke",
        ADMIN,
        false,
        Scope::Global,
    ),
    rule(
        "DELETE",
        "/api/v1/credentials/{name}",
        ADMIN,
        false,
        Scope::Global,
    ),
    rule("GET", "/metrics", READERS, false, Scope::Global),
    // Rule T5: a credential limited to some pools sees their entries only
    // (the handler narrows the query).
    rule("GET", "/api/v1/auditLog", READERS, false, Scope::PoolList),
    // A stand-alone RD Gateway's refused sign-ins (rule AD2).
    rule(
        "POST",
        "/api/v1/auditLog/signInRefusals",
        &[Admin, Gateway],
        false,
        Scope::Global,
    ),
    rule("GET", "/api/v1/whoami", ALL, false, Scope::PoolList),
    // Rule AD1: a user's directory groups, for those who read everything;
    // a user spans pools, so a credential limited to some does not.
    rule("GET", "/api/v1/users/{name}", READERS, false, Scope::Global),
    // Rule F1: what a user is given, for those who read everything and
    // for the doors that serve a user's workspace.
    rule(
        "GET",
        "/api/v1/users/{name}/workspace",
        &[Admin, Operator, Reader, Gateway],
        false,
        Scope::Global,
    ),
    // Rule F4: a user's feed, its files and icons, for the RD Gateway
    // that signed the user in and serves the feed (and the admin): they
    // answer for whoever the caller names.
    rule(
        "GET",
        "/api/v1/users/{name}/feed",
        &[Admin, Gateway],
        false,
        Scope::Global,
    ),
    rule(
        "GET",
        "/api/v1/users/{name}/feed/{pool}/rdpFile",
        &[Admin, Gateway],
        false,
        Scope::Global,
    ),
    rule(
        "GET",
        "/api/v1/users/{name}/feed/{pool}/applications/{alias}/rdpFile",
        &[Admin, Gateway],
        false,
        Scope::Global,
    ),
    rule(
        "GET",
        "/api/v1/users/{name}/feed/{pool}/applications/{alias}/icon",
        &[Admin, Gateway],
        false,
        Scope::Global,
    ),
    // Rule A9: operators start and stop hosts (T1); the record of what
    // was done is for every reader (A10).
    rule(
        "POST",
        "/api/v1/hostPools/{pool}/sessionHosts/{host}/start",
        OPERATORS,
        false,
        Scope::Pool,
    ),
    rule(
        "POST",
        "/api/v1/hostPools/{pool}/sessionHosts/{host}/stop",
        OPERATORS,
        false,
        Scope::Pool,
    ),
    rule(
        "GET",
        "/api/v1/hostPools/{pool}/scalingActions",
        READERS,
        false,
        Scope::Pool,
    ),
    // A message shows on a user's screen: operators only (never a host,
    // which receives its own in its heartbeat's answer).
    rule(
        "POST",
        "/api/v1/hostPools/{pool}/userSessions/{id}/sendMessage",
        OPERATORS,
        false,
        Scope::Pool,
    ),
    // Rules A1–A7: the admin changes scaling plans; operators and readers
    // read them. A plan spans pools, so a credential limited to some
    // pools neither reads nor changes plans.
    rule("GET", "/api/v1/scalingPlans", READERS, false, Scope::Global),
    rule("GET", PLAN, READERS, false, Scope::Global),
    rule("PUT", PLAN, ADMIN, false, Scope::Global),
    rule("PATCH", PLAN, ADMIN, false, Scope::Global),
    rule("DELETE", PLAN, ADMIN, false, Scope::Global),
    rule(
        "GET",
        "/api/v1/scalingPlans/{plan}/status",
        READERS,
        false,
        Scope::Global,
    ),
    // Rule F1: the admin publishes applications and assigns groups;
    // operators and readers read them. A group names its pool in its
    // body, not its path, so a credential limited to some pools neither
    // reads nor changes groups.
    rule(
        "GET",
        "/api/v1/hostPools/{pool}/applications",
        READERS,
        false,
        Scope::Pool,
    ),
    rule("GET", APP, READERS, false, Scope::Pool),
    rule("PUT", APP, ADMIN, false, Scope::Pool),
    rule("DELETE", APP, ADMIN, false, Scope::Pool),
    // Rule F2: as the pool's rdpFile (a ticket for the admin and portals
    // only, checked by the handler).
    rule(
        "GET",
        "/api/v1/hostPools/{pool}/applications/{alias}/rdpFile",
        ALL,
        false,
        Scope::Pool,
    ),
    rule(
        "GET",
        "/api/v1/applicationGroups",
        READERS,
        false,
        Scope::Global,
    ),
    rule("GET", APP_GROUP, READERS, false, Scope::Global),
    rule("PUT", APP_GROUP, ADMIN, false, Scope::Global),
    rule("DELETE", APP_GROUP, ADMIN, false, Scope::Global),
];

const PLAN: &str = "/api/v1/scalingPlans/{plan}";
const APP: &str = "/api/v1/hostPools/{pool}/applications/{alias}";
const APP_GROUP: &str = "/api/v1/applicationGroups/{name}";

/// The entry for a method and route pattern, if there is one.
pub fn lookup(method: &str, route: &str) -> Option<&'static Rule> {
    TABLE
        .iter()
        .find(|r| r.method.eq_ignore_ascii_case(method) && r.route == route)
}

/// Whether the table has an entry for `route` with any method: a method
/// without one on such a route is answered 405 (still nothing runs).
pub fn known_route(route: &str) -> bool {
    TABLE.iter().any(|r| r.route == route)
}

/// What the caller is, for the table: a role with the pools it is limited
/// to (empty: every pool), or a session host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Principal {
    Role {
        role: Role,
        host_pools: Vec<String>,
        /// For messages: the credential's name (None: the admin token).
        name: Option<String>,
    },
    Host {
        pool: String,
        host: String,
    },
}

impl Principal {
    pub fn of(caller: &Caller) -> Principal {
        match caller {
            Caller::Admin => Principal::Role {
                role: Role::Admin,
                host_pools: Vec::new(),
                name: None,
            },
            Caller::Credential {
                name,
                role,
                host_pools,
                ..
            } => Principal::Role {
                role: *role,
                host_pools: host_pools.clone(),
                name: Some(name.clone()),
            },
            Caller::Host { pool, host } => Principal::Host {
                pool: pool.clone(),
                host: host.clone(),
            },
        }
    }

    /// Whether the caller may act on `pool` (a limited credential only on
    /// its own pools; a host only on its own).
    pub fn may_see_pool(&self, pool: &str) -> bool {
        match self {
            Principal::Role { host_pools, .. } => {
                host_pools.is_empty() || host_pools.iter().any(|p| p == pool)
            }
            Principal::Host { pool: own, .. } => own == pool,
        }
    }
}

/// Decides a call: `route` is the matched pattern (None: no route), `pool`
/// and `host` the decoded names in its path. `Err` is the message of the
/// 403 refusal.
pub fn authorize(
    who: &Principal,
    method: &str,
    route: Option<&str>,
    pool: Option<&str>,
    host: Option<&str>,
) -> Result<(), String> {
    let Some(rule) = route.and_then(|r| lookup(method, r)) else {
        return Err(format!(
            "{method} {} has no entry in the authorization table, so nobody may call it",
            route.unwrap_or("this path")
        ));
    };
    let needs = || {
        let roles: Vec<&str> = rule.roles.iter().map(|r| r.as_str()).collect();
        let mut s = format!("the {} role", roles.join(" or "));
        if rule.own_host {
            s.push_str(", or the host credential of that session host");
        }
        s
    };
    match who {
        Principal::Host { pool: p, host: h } => {
            if rule.own_host && pool == Some(p.as_str()) && host == Some(h.as_str()) {
                Ok(())
            } else {
                Err(format!(
                    "{method} {} needs {}; a host credential only allows heartbeats and reading \
                     its own session host ({p}/{h})",
                    rule.route,
                    needs()
                ))
            }
        }
        Principal::Role {
            role,
            host_pools,
            name,
        } => {
            let who = match name {
                Some(n) => format!("the credential {n} has the {} role", role.as_str()),
                None => format!("the caller has the {} role", role.as_str()),
            };
            if !rule.roles.contains(role) {
                return Err(format!("{method} {} needs {}; {who}", rule.route, needs()));
            }
            if host_pools.is_empty() {
                return Ok(());
            }
            match rule.scope {
                Scope::Pool => match pool {
                    Some(p) if host_pools.iter().any(|own| own == p) => Ok(()),
                    _ => Err(format!(
                        "{who}, limited to the host pools {}; this call names another pool",
                        host_pools.join(", ")
                    )),
                },
                Scope::PoolList | Scope::Public => Ok(()),
                Scope::Global => Err(format!(
                    "{method} {} spans every host pool and needs a credential that is not \
                     limited to some; {who}, limited to {}",
                    rule.route,
                    host_pools.join(", ")
                )),
            }
        }
    }
}

/// An operator may change a session host only to drain or undrain it
/// (`allowNewSession`); anything else needs the admin.
pub fn operator_may_patch_host(patch: &api::types::SessionHostPatch) -> Result<(), String> {
    let others = patch.address.is_some()
        || patch.capabilities.is_some()
        || patch.policy.is_some()
        || patch.assigned_user.is_some()
        || patch.tags.is_some()
        || patch.mac_address.is_some()
        || patch.dns_name.is_some()
        || patch.image_version.is_some();
    if others {
        Err(
            "an operator may only change allowNewSession (drain and undrain); changing \
             address, capabilities, policy, assignedUser, tags, macAddress, dnsName or \
             imageVersion needs the admin role"
                .into(),
        )
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use utoipa::OpenApi;

    fn admin() -> Principal {
        Principal::of(&Caller::Admin)
    }

    fn cred(role: Role, pools: &[&str]) -> Principal {
        Principal::Role {
            role,
            host_pools: pools.iter().map(|p| p.to_string()).collect(),
            name: Some("c".into()),
        }
    }

    #[test]
    fn every_route_of_the_openapi_document_has_an_entry() {
        let doc = crate::api::ApiDoc::openapi();
        let mut seen = 0;
        for (path, item) in &doc.paths.paths {
            let ops = [
                ("GET", item.get.is_some()),
                ("PUT", item.put.is_some()),
                ("POST", item.post.is_some()),
                ("PATCH", item.patch.is_some()),
                ("DELETE", item.delete.is_some()),
            ];
            for (method, present) in ops {
                if present {
                    assert!(
                        lookup(method, path).is_some(),
                        "{method} {path} has no entry"
                    );
                    seen += 1;
                }
            }
        }
        // The table has nothing the document lacks except /metrics.
        assert_eq!(seen + 1, TABLE.len(), "the table and the document differ");
    }

    #[test]
    fn a_route_without_an_entry_is_refused_even_to_the_admin() {
        let e = authorize(&admin(), "GET", Some("/api/v1/secrets"), None, None).unwrap_err();
        assert!(e.contains("no entry"), "{e}");
        assert!(authorize(&admin(), "GET", None, None, None).is_err());
        assert!(authorize(&admin(), "TRACE", Some("/api/v1/hostPools"), None, None).is_err());
    }

    #[test]
    fn refusals_name_the_role_needed() {
        let e = authorize(
            &cred(Role::Reader, &[]),
            "DELETE",
            Some(POOL),
            Some("p"),
            None,
        )
        .unwrap_err();
        assert!(e.contains("needs the admin role"), "{e}");
        assert!(e.contains("reader"), "{e}");
    }

    #[test]
    fn a_limited_credential_acts_only_on_its_pools() {
        let c = cred(Role::Operator, &["a"]);
        assert!(authorize(&c, "GET", Some(POOL), Some("a"), None).is_ok());
        assert!(authorize(&c, "GET", Some(POOL), Some("b"), None).is_err());
        assert!(authorize(&c, "GET", Some("/api/v1/hostPools"), None, None).is_ok());
        assert!(authorize(&c, "GET", Some("/metrics"), None, None).is_err());
        assert!(c.may_see_pool("a") && !c.may_see_pool("b"));
    }

    #[test]
    fn a_host_acts_only_as_itself() {
        let h = Principal::of(&Caller::Host {
            pool: "p".into(),
            host: "h1".into(),
        });
        let beat = "/api/v1/hostPools/{pool}/sessionHosts/{host}/heartbeat";
        assert!(authorize(&h, "POST", Some(beat), Some("p"), Some("h1")).is_ok());
        assert!(authorize(&h, "GET", Some(HOST), Some("p"), Some("h1")).is_ok());
        assert!(authorize(&h, "POST", Some(beat), Some("p"), Some("h2")).is_err());
        assert!(authorize(&h, "PATCH", Some(HOST), Some("p"), Some("h1")).is_err());
        assert!(authorize(&h, "GET", Some(POOL), Some("p"), None).is_err());
    }

    #[test]
    fn roles_parse_and_print() {
        for r in Role::ALL {
            assert_eq!(Role::parse(r.as_str()), Some(r));
        }
        assert_eq!(Role::parse("root"), None);
    }
}
