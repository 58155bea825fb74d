//! The directory's LDAP: one connection over TLS (LDAPS, or StartTLS on an
//! `ldap://` URL: never a plain bind), bound as the configured account
//! (with its password, or with Kerberos: `super::keytab`), made again when
//! it breaks; a user's entry found by name; their groups,
//! nested ones included.
//!
//! Nested groups are followed the way the server does best. Active
//! Directory (and Samba AD) computes a user's `tokenGroups`, the groups of
//! their logon token (nested and primary ones included), on the user's own
//! entry: one base read, then the names of groups not seen yet, one search
//! a hundred, remembered by SID. Its "in chain" matching rule
//! (`member:1.2.840.113556.1.4.1941:=`) answers the same in one search,
//! which large directories answer slowly (chosen only by name). Other
//! servers are walked, one search a level, bounded by [`MAX_GROUPS`]. Off
//! token groups, an Active Directory user's primary group (`Domain Users`,
//! usually), which no `member` list holds, is found from the user's
//! `primaryGroupID` and SID, and the groups it is nested in are followed
//! too.
//!
//! Every value put in a filter is escaped (RFC 4515), so no user name can
//! change what a search asks.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::sync::Arc;

use ldap3::adapters::{Adapter, EntriesOnly, PagedResults};
use ldap3::{Ldap, LdapConnAsync, LdapConnSettings, Scope, SearchEntry};

use super::{Bind, DirectoryError, DirectorySettings, DirectoryUser, MAX_GROUPS};

/// The rule Active Directory follows `member` links with, to any depth.
const IN_CHAIN: &str = "1.2.840.113556.1.4.1941";
/// The capability a server's root DSE lists when it is Active Directory.
const ACTIVE_DIRECTORY_CAPABILITY: &str = "1.2.840.113556.1.4.800";
/// Entries asked for a page of a search.
const PAGE_SIZE: i32 = 500;
/// Lookups in flight at once on the connection; more wait their turn
/// (within their timeout), so a logon storm queues here rather than at the
/// directory.
const MAX_IN_FLIGHT: usize = 16;
/// Most primary groups whose nesting is kept (a domain has a handful).
const MAX_PRIMARY_GROUPS: u64 = 1024;
/// Most group SIDs whose names are kept.
const MAX_KNOWN_GROUPS: u64 = 100_000;

/// How nested groups are followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupSearch {
    /// Token groups where the server is Active Directory, else a walk.
    Auto,
    /// Active Directory's `tokenGroups`: every group of the user's logon
    /// token (nested, primary and built-in ones included) read from the
    /// user's own entry, the way Windows itself reads them; then their
    /// names, remembered. Two indexed reads a user.
    TokenGroups,
    /// Active Directory's in-chain rule, one search (costly on large
    /// directories: the server follows every group's members).
    InChain,
    /// One search a level of nesting, on any LDAP server.
    Walk,
}

impl std::str::FromStr for GroupSearch {
    type Err = String;
    fn from_str(s: &str) -> Result<GroupSearch, String> {
        match s {
            "auto" => Ok(GroupSearch::Auto),
            "token-groups" => Ok(GroupSearch::TokenGroups),
            "in-chain" => Ok(GroupSearch::InChain),
            "walk" => Ok(GroupSearch::Walk),
            _ => Err(format!("{s:?}: auto, token-groups, in-chain or walk")),
        }
    }
}

/// How a user name is looked up: `name@suffix` by `userPrincipalName`,
/// `DOMAIN\name` (for a domain this directory answers for) and a bare
/// `name` by the account attribute (`sAMAccountName` by default).
#[derive(Debug, Clone)]
pub struct NameMap {
    /// The NetBIOS names of the domains this directory answers for, in
    /// upper case; a `DOMAIN\name` of another domain has no groups here.
    pub domains: Vec<String>,
    /// The attribute that holds a bare account name.
    pub account_attribute: String,
}

impl NameMap {
    /// The filter that finds `user`'s entry, or None when the name belongs
    /// to a domain this directory does not answer for.
    pub fn filter(&self, user: &str) -> Option<String> {
        if let Some((domain, name)) = user.split_once('\\') {
            let domain = domain.to_ascii_uppercase();
            if !self.domains.contains(&domain) || name.is_empty() {
                return None;
            }
            return Some(format!(
                "({}={})",
                self.account_attribute,
                ldap3::ldap_escape(name)
            ));
        }
        if user.contains('@') {
            return Some(format!("(userPrincipalName={})", ldap3::ldap_escape(user)));
        }
        Some(format!(
            "({}={})",
            self.account_attribute,
            ldap3::ldap_escape(user)
        ))
    }
}

/// The connection, and what the server said it is.
#[derive(Clone)]
struct Session {
    ldap: Ldap,
    search: GroupSearch,
    /// Tells one connection from the next.
    id: u64,
}

/// The LDAP client of a [`super::Directory`].
pub(super) struct Client {
    settings: DirectorySettings,
    tls: Arc<rustls::ClientConfig>,
    session: tokio::sync::Mutex<Option<Session>>,
    in_flight: tokio::sync::Semaphore,
    /// Connections made so far (each one's id).
    connections: std::sync::atomic::AtomicU64,
    /// Primary groups (by the filter that finds them) and the groups they
    /// are nested in, kept as long as users' groups are.
    primary_groups: moka::future::Cache<String, Arc<BTreeMap<String, String>>>,
    /// Groups by SID (token groups), with their DN and name (None: not
    /// found under the base DN), kept as long as users' groups are.
    group_names: moka::future::Cache<Vec<u8>, Option<(String, String)>>,
}

impl Client {
    /// A client of `settings`' servers; checks the URLs and the trust.
    pub(super) fn new(settings: DirectorySettings) -> Result<Client, String> {
        if settings.urls.is_empty() {
            return Err("the directory needs at least one URL".into());
        }
        if let Bind::Keytab(k) = &settings.bind
            && let Some(host) = &k.service_host
            && (host.is_empty()
                || host.len() > 253
                || !host
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-'))
        {
            return Err(format!(
                "the directory's service host {host:?} is not a DNS name"
            ));
        }
        for url in &settings.urls {
            let host = check_url(url)?;
            if let Bind::Keytab(k) = &settings.bind
                && k.service_host.is_none()
                && url_host_is_address(host)
            {
                return Err(format!(
                    "directory URL {url:?} names an address: the Kerberos bind needs the \
                     server's DNS name for its service principal ldap/<name> (give it with \
                     --directory-service-host, or name the server by DNS in the URL)"
                ));
            }
        }
        let attribute = &settings.names.account_attribute;
        if !attribute.starts_with(|c: char| c.is_ascii_alphabetic())
            || !attribute
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-')
        {
            return Err(format!(
                "the account attribute {attribute:?} is not an LDAP attribute name"
            ));
        }
        if settings.base_dn.trim().is_empty() {
            return Err("the directory needs a base DN".into());
        }
        let tls = settings
            .trust
            .client_config()
            .map_err(|e| format!("the directory's TLS trust: {e}"))?;
        let cache_ttl = settings.cache_ttl;
        Ok(Client {
            settings,
            tls: Arc::new(tls),
            session: tokio::sync::Mutex::new(None),
            in_flight: tokio::sync::Semaphore::new(MAX_IN_FLIGHT),
            connections: std::sync::atomic::AtomicU64::new(0),
            primary_groups: moka::future::Cache::builder()
                .max_capacity(MAX_PRIMARY_GROUPS)
                .time_to_live(cache_ttl)
                .build(),
            group_names: moka::future::Cache::builder()
                .max_capacity(MAX_KNOWN_GROUPS)
                .time_to_live(cache_ttl)
                .build(),
        })
    }

    /// What the directory says of `user`, within the query timeout.
    pub(super) async fn user(&self, user: &str) -> Result<DirectoryUser, DirectoryError> {
        let Some(filter) = self.settings.names.filter(user) else {
            return Ok(DirectoryUser {
                dn: None,
                groups: Vec::new(),
            });
        };
        let timeout = self.settings.query_timeout;
        let work = async {
            let _permit = self.in_flight.acquire().await.map_err(|_| {
                DirectoryError::Unavailable("the directory client is closed".into())
            })?;
            // A connection kept from before may have broken meanwhile: one
            // more try on a new one. A lookup that failed on a connection
            // still open (the server refused it, or it was slow) leaves the
            // connection to the lookups beside it.
            let (session, reused) = self.session().await?;
            match self.read_user(session.clone(), &filter).await {
                Err(DirectoryError::Unavailable(_))
                    if reused && self.drop_if_closed(&session).await =>
                {
                    let (session, _) = self.session().await?;
                    let result = self.read_user(session.clone(), &filter).await;
                    self.drop_if_closed(&session).await;
                    result
                }
                Err(e) => {
                    self.drop_if_closed(&session).await;
                    Err(e)
                }
                ok => ok,
            }
        };
        match tokio::time::timeout(timeout, work).await {
            Ok(r) => r,
            Err(_) => Err(DirectoryError::Unavailable(format!(
                "no answer within {} s",
                timeout.as_secs_f64()
            ))),
        }
    }

    /// The connection: the one kept (true), or a new one (false).
    async fn session(&self) -> Result<(Session, bool), DirectoryError> {
        let mut kept = self.session.lock().await;
        if let Some(s) = kept.as_mut()
            && !s.ldap.is_closed()
        {
            return Ok((s.clone(), true));
        }
        let mut failures = Vec::new();
        for url in &self.settings.urls {
            match self.connect(url).await {
                Ok(s) => {
                    *kept = Some(s.clone());
                    return Ok((s, false));
                }
                Err(e) => failures.push(format!("{url}: {e}")),
            }
        }
        Err(DirectoryError::Unavailable(failures.join("; ")))
    }

    /// Forgets `failed` when its connection has closed (and it is still
    /// the one kept), so that the next lookup makes a new one; answers
    /// whether it had closed.
    async fn drop_if_closed(&self, failed: &Session) -> bool {
        let mut probe = failed.ldap.clone();
        if !probe.is_closed() {
            return false;
        }
        let mut kept = self.session.lock().await;
        if kept.as_ref().is_some_and(|k| k.id == failed.id) {
            *kept = None;
        }
        true
    }

    /// A new connection to `url`, over TLS, bound.
    async fn connect(&self, url: &str) -> Result<Session, String> {
        let settings = LdapConnSettings::new()
            .set_conn_timeout(self.settings.query_timeout)
            .set_config(self.tls.clone())
            .set_starttls(url.starts_with("ldap://"));
        let (conn, mut ldap) = LdapConnAsync::with_settings(settings, url)
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(async move {
            if let Err(e) = conn.drive().await {
                tracing::debug!(error = %e, "directory connection ended");
            }
        });
        match &self.settings.bind {
            Bind::Password { dn, password } => ldap
                .simple_bind(dn, password)
                .await
                .and_then(|r| r.success())
                .map(|_| ())
                .map_err(|e| format!("binding as {dn}: {e}"))?,
            Bind::Keytab(k) => {
                let host = url_host(url);
                let timeout = self.settings.query_timeout;
                super::keytab::bind(&ldap, k, k.service_host_for(host), timeout).await?
            }
        }
        let search = match self.settings.group_search {
            GroupSearch::Auto if is_active_directory(&mut ldap).await? => GroupSearch::TokenGroups,
            GroupSearch::Auto => GroupSearch::Walk,
            other => other,
        };
        tracing::info!(url, ?search, "directory connected");
        let id = self
            .connections
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(Session { ldap, search, id })
    }

    /// `user`'s entry (by `filter`) and their groups.
    async fn read_user(
        &self,
        session: Session,
        filter: &str,
    ) -> Result<DirectoryUser, DirectoryError> {
        let mut ldap = session.ldap;
        let base = &self.settings.base_dn;
        let entries = search(
            &mut ldap,
            base,
            filter,
            vec!["primaryGroupID", "objectSid"],
            2,
        )
        .await?;
        let entry = match entries.as_slice() {
            [] => {
                return Ok(DirectoryUser {
                    dn: None,
                    groups: Vec::new(),
                });
            }
            [one] => one,
            _ => {
                return Err(DirectoryError::Ambiguous(format!(
                    "the directory has more than one entry for {filter}: no groups are read"
                )));
            }
        };
        let mut groups: BTreeMap<String, String> = BTreeMap::new();
        if session.search == GroupSearch::TokenGroups {
            self.token_groups(&mut ldap, &entry.dn, &mut groups).await?;
        } else {
            // The groups by DN, with their names: the primary group's
            // (shared by most users, so read once a cache life), then the
            // user's own.
            let in_chain = session.search == GroupSearch::InChain;
            if let Some(primary) = primary_group_filter(entry) {
                let mut conn = ldap.clone();
                let held = self
                    .primary_groups
                    .try_get_with(primary.clone(), async move {
                        let mut found = BTreeMap::new();
                        let mut roots = Vec::new();
                        for g in search(&mut conn, base, &primary, group_attrs(), 1).await? {
                            roots.push(g.dn.clone());
                            found.insert(g.dn.clone(), group_name(&g));
                        }
                        nested(&mut conn, base, in_chain, roots, &mut found).await?;
                        Ok::<_, DirectoryError>(Arc::new(found))
                    })
                    .await
                    .map_err(|e: Arc<DirectoryError>| (*e).clone())?;
                groups.extend(held.iter().map(|(d, n)| (d.clone(), n.clone())));
            }
            nested(
                &mut ldap,
                base,
                in_chain,
                vec![entry.dn.clone()],
                &mut groups,
            )
            .await?;
        }
        let mut names: Vec<String> = groups.into_values().collect();
        names.sort_by_key(|n| n.to_ascii_lowercase());
        names.dedup_by(|a, b| a.eq_ignore_ascii_case(b));
        Ok(DirectoryUser {
            dn: Some(entry.dn.clone()),
            groups: names,
        })
    }

    /// The groups of `user_dn`'s logon token (its `tokenGroups`: nested,
    /// primary and built-in groups, as Active Directory computes them for
    /// a logon), by name. Names come from the cache of group SIDs, the
    /// ones not known yet from one search a hundred.
    async fn token_groups(
        &self,
        ldap: &mut Ldap,
        user_dn: &str,
        groups: &mut BTreeMap<String, String>,
    ) -> Result<(), DirectoryError> {
        let unavailable = |e: ldap3::LdapError| DirectoryError::Unavailable(e.to_string());
        let (entries, _) = ldap
            .search(user_dn, Scope::Base, "(objectClass=*)", vec!["tokenGroups"])
            .await
            .and_then(|r| r.success())
            .map_err(unavailable)?;
        let sids: Vec<Vec<u8>> = entries
            .into_iter()
            .next()
            .map(SearchEntry::construct)
            .and_then(|mut e| e.bin_attrs.remove("tokenGroups"))
            .unwrap_or_default();
        check_bound(sids.len())?;
        let mut unknown = Vec::new();
        for sid in sids {
            match self.group_names.get(&sid).await {
                Some(Some((dn, name))) => {
                    groups.insert(dn, name);
                }
                Some(None) => {}
                None => unknown.push(sid),
            }
        }
        for chunk in unknown.chunks(100) {
            let filter: String = chunk
                .iter()
                .map(|sid| format!("(objectSid={})", escape_binary(sid)))
                .collect();
            let found = search(
                ldap,
                &self.settings.base_dn,
                &format!("(|{filter})"),
                vec!["sAMAccountName", "cn", "objectSid"],
                chunk.len(),
            )
            .await?;
            for sid in chunk {
                let named = found
                    .iter()
                    .find(|g| {
                        g.bin_attrs
                            .get("objectSid")
                            .is_some_and(|v| v.iter().any(|s| s == sid))
                    })
                    .map(|g| (g.dn.clone(), group_name(g)));
                if let Some((dn, name)) = &named {
                    groups.insert(dn.clone(), name.clone());
                }
                // A SID outside the base DN (another domain's group) has no
                // name here: remembered as such.
                self.group_names.insert(sid.clone(), named).await;
            }
        }
        Ok(())
    }
}

/// The groups that hold any of `roots`, to any depth, into `groups`: by
/// Active Directory's in-chain rule (`in_chain`), else by [`walk`].
async fn nested(
    ldap: &mut Ldap,
    base: &str,
    in_chain: bool,
    roots: Vec<String>,
    groups: &mut BTreeMap<String, String>,
) -> Result<(), DirectoryError> {
    if !in_chain {
        return walk(ldap, base, roots, groups).await;
    }
    for root in &roots {
        let filter = format!("(member:{IN_CHAIN}:={})", ldap3::ldap_escape(root.as_str()));
        for g in search(ldap, base, &filter, group_attrs(), MAX_GROUPS).await? {
            groups.insert(g.dn.clone(), group_name(&g));
            check_bound(groups.len())?;
        }
    }
    Ok(())
}

/// The groups that hold any of `roots`, and those that hold them, one
/// search a level; each group searched once, so cycles end.
async fn walk(
    ldap: &mut Ldap,
    base: &str,
    roots: Vec<String>,
    groups: &mut BTreeMap<String, String>,
) -> Result<(), DirectoryError> {
    let mut seen: HashSet<String> = roots.iter().map(|d| d.to_ascii_lowercase()).collect();
    let mut queue: VecDeque<String> = roots.into();
    while let Some(dn) = queue.pop_front() {
        let filter = format!("(member={})", ldap3::ldap_escape(dn.as_str()));
        for g in search(ldap, base, &filter, group_attrs(), MAX_GROUPS).await? {
            if seen.insert(g.dn.to_ascii_lowercase()) {
                groups.insert(g.dn.clone(), group_name(&g));
                check_bound(groups.len())?;
                queue.push_back(g.dn);
            }
        }
    }
    Ok(())
}

fn check_bound(groups: usize) -> Result<(), DirectoryError> {
    if groups > MAX_GROUPS {
        return Err(DirectoryError::Ambiguous(format!(
            "the user is in more than {MAX_GROUPS} groups: no groups are read"
        )));
    }
    Ok(())
}

fn group_attrs() -> Vec<&'static str> {
    vec!["sAMAccountName", "cn"]
}

/// A group's name: its `sAMAccountName` (Active Directory's), else `cn`,
/// else its DN.
fn group_name(g: &SearchEntry) -> String {
    ["sAMAccountName", "cn"]
        .iter()
        .find_map(|a| g.attrs.get(*a).and_then(|v| v.first()).cloned())
        .unwrap_or_else(|| g.dn.clone())
}

/// The filter that finds an Active Directory user's primary group: the
/// group whose SID is the user's domain SID with the `primaryGroupID` as
/// its last part.
fn primary_group_filter(user: &SearchEntry) -> Option<String> {
    let rid: u32 = user.attrs.get("primaryGroupID")?.first()?.parse().ok()?;
    let sid = user.bin_attrs.get("objectSid")?.first()?;
    let group = sid_with_rid(sid, rid)?;
    Some(format!("(objectSid={})", escape_binary(&group)))
}

/// Bytes as an LDAP filter's value: every byte escaped (RFC 4515).
fn escape_binary(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("\\{b:02x}")).collect()
}

/// A binary SID with its last sub-authority replaced by `rid`.
fn sid_with_rid(sid: &[u8], rid: u32) -> Option<Vec<u8>> {
    let count = usize::from(*sid.get(1)?);
    if count == 0 || sid.len() != 8 + 4 * count {
        return None;
    }
    let mut group = sid.to_vec();
    let at = sid.len() - 4;
    group[at..].copy_from_slice(&rid.to_le_bytes());
    Some(group)
}

/// Every entry a subtree search of `base` finds (paged), at most `limit`.
async fn search(
    ldap: &mut Ldap,
    base: &str,
    filter: &str,
    attrs: Vec<&'static str>,
    limit: usize,
) -> Result<Vec<SearchEntry>, DirectoryError> {
    let unavailable = |e: ldap3::LdapError| DirectoryError::Unavailable(e.to_string());
    let adapters: Vec<Box<dyn Adapter<_, _>>> = vec![
        Box::new(EntriesOnly::new()),
        Box::new(PagedResults::new(PAGE_SIZE)),
    ];
    let mut stream = ldap
        .streaming_search_with(adapters, base, Scope::Subtree, filter, attrs)
        .await
        .map_err(unavailable)?;
    let mut found = Vec::new();
    while let Some(entry) = stream.next().await.map_err(unavailable)? {
        if found.len() == limit {
            let _ = stream.finish().await;
            return Err(DirectoryError::Ambiguous(format!(
                "the search {filter} finds more than {limit} entries"
            )));
        }
        found.push(SearchEntry::construct(entry));
    }
    stream.finish().await.success().map_err(unavailable)?;
    Ok(found)
}

/// Whether the server's root DSE says it is Active Directory.
async fn is_active_directory(ldap: &mut Ldap) -> Result<bool, String> {
    let (entries, _) = ldap
        .search(
            "",
            Scope::Base,
            "(objectClass=*)",
            vec!["supportedCapabilities"],
        )
        .await
        .and_then(|r| r.success())
        .map_err(|e| format!("reading the root DSE: {e}"))?;
    Ok(entries.into_iter().any(|e| {
        SearchEntry::construct(e)
            .attrs
            .get("supportedCapabilities")
            .is_some_and(|c| c.iter().any(|c| c == ACTIVE_DIRECTORY_CAPABILITY))
    }))
}

/// The host of a URL [`check_url`] passed, without its port or brackets.
fn url_host(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.trim_end_matches('/');
    if let Some(v6) = authority.strip_prefix('[') {
        return v6.split(']').next().unwrap_or(v6);
    }
    authority.rsplit_once(':').map_or(authority, |(h, _)| h)
}

/// Whether a URL's authority names an IP address rather than a DNS name.
fn url_host_is_address(authority: &str) -> bool {
    let host = url_host(authority);
    host.parse::<std::net::IpAddr>().is_ok()
}

/// Refuses a URL the directory is not reached over TLS with; answers its
/// authority (host and optional port).
fn check_url(url: &str) -> Result<&str, String> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(format!(
            "directory URL {url:?}: ldaps://host[:port] or ldap://host[:port]"
        ));
    };
    match scheme {
        "ldaps" | "ldap" => {}
        _ => {
            return Err(format!(
                "directory URL {url:?}: only ldaps:// or ldap:// (upgraded with StartTLS); the \
                 broker never sends a password over plain LDAP"
            ));
        }
    }
    let host = rest.trim_end_matches('/');
    if host.is_empty() || host.contains(['/', '?', '@', ' ']) {
        return Err(format!(
            "directory URL {url:?}: a host and an optional port, nothing else"
        ));
    }
    Ok(host)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> NameMap {
        NameMap {
            domains: vec!["CONTOSO".into()],
            account_attribute: "sAMAccountName".into(),
        }
    }

    #[test]
    fn names_map_to_escaped_filters() {
        let n = names();
        assert_eq!(n.filter("alice").unwrap(), "(sAMAccountName=alice)");
        assert_eq!(
            n.filter("contoso\\alice").unwrap(),
            "(sAMAccountName=alice)"
        );
        assert_eq!(
            n.filter("alice@contoso.com").unwrap(),
            "(userPrincipalName=alice@contoso.com)"
        );
        assert_eq!(n.filter("FABRIKAM\\alice"), None);
        assert_eq!(n.filter("CONTOSO\\"), None);
        // What could widen or change a search is escaped.
        assert_eq!(
            n.filter("*)(objectClass=*").unwrap(),
            "(sAMAccountName=\\2a\\29\\28objectClass=\\2a)"
        );
        assert_eq!(
            n.filter("bob@x)(cn=*").unwrap(),
            "(userPrincipalName=bob@x\\29\\28cn=\\2a)"
        );
        // A backslash names a domain: one this directory does not answer
        // for has no entry here, whatever follows it.
        assert_eq!(n.filter("x\\*"), None);
    }

    #[test]
    fn a_primary_group_sid_is_the_users_domain_and_its_rid() {
        // S-1-5-21-1-2-3-1105 → S-1-5-21-1-2-3-513.
        let mut sid = vec![1u8, 5, 0, 0, 0, 0, 0, 5];
        for sub in [21u32, 1, 2, 3, 1105] {
            sid.extend_from_slice(&sub.to_le_bytes());
        }
        let group = sid_with_rid(&sid, 513).unwrap();
        assert_eq!(&group[..sid.len() - 4], &sid[..sid.len() - 4]);
        assert_eq!(&group[sid.len() - 4..], &513u32.to_le_bytes());
        assert_eq!(sid_with_rid(&sid[..10], 513), None);
        assert_eq!(sid_with_rid(&[1, 0, 0, 0, 0, 0, 0, 5], 513), None);
    }

    #[test]
    fn only_tls_urls_are_taken() {
        check_url("ldaps://dc1.contoso.com").unwrap();
        check_url("ldap://dc1.contoso.com:389").unwrap();
        check_url("ldaps://127.0.0.1:6360/").unwrap();
        for bad in [
            "http://dc1",
            "ldapi:///var/run/slapd",
            "dc1.contoso.com",
            "ldaps://",
            "ldaps://dc1/dc=contoso?x",
            "ldaps://user@dc1",
        ] {
            assert!(check_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_urls_host_is_read_without_its_port() {
        assert_eq!(url_host("ldaps://dc1.contoso.com:636/"), "dc1.contoso.com");
        assert_eq!(url_host("ldap://dc1.contoso.com"), "dc1.contoso.com");
        assert_eq!(url_host("ldaps://[::1]:636"), "::1");
        assert!(url_host_is_address("127.0.0.1:636"));
        assert!(url_host_is_address("[::1]:636"));
        assert!(url_host_is_address("10.0.0.1"));
        assert!(!url_host_is_address("dc1.contoso.com:636"));
    }

    #[test]
    fn group_search_is_named() {
        assert_eq!("auto".parse::<GroupSearch>().unwrap(), GroupSearch::Auto);
        assert_eq!(
            "in-chain".parse::<GroupSearch>().unwrap(),
            GroupSearch::InChain
        );
        assert_eq!("walk".parse::<GroupSearch>().unwrap(), GroupSearch::Walk);
        assert!("deep".parse::<GroupSearch>().is_err());
    }
}
