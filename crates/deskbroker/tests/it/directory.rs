//! Rule AD1 against a real Active Directory domain controller (Samba, in a
//! network namespace of its own, reached through forwarders on 127.0.0.1:
//! `support::domain`): a user's groups are the directory's, nested ones
//! included; they decide entitlements at the front door and the API; a
//! caller's claimed groups no longer count; a change in the directory
//! shows within the cache's bound; a directory that cannot be reached
//! refuses decisions by group and ends no session; the broker binds with a
//! password or with Kerberos (a keytab).

use serde_json::{Value, json};

use crate::support::domain::Domain;
use crate::support::wire::{echo_host, open};
use crate::*;

const PASSWORD: &str = "Sesame-0pen!";

/// A domain with alice in Sales, Sales in RDS-Users, carol in Sales too,
/// and bob, dave in no group of ours.
pub(crate) fn domain() -> Domain {
    let dc = Domain::start();
    people(&dc);
    dc
}

/// The users and groups of [`domain`]: alice and carol in Sales, which is
/// in RDS-Users; bob and dave in neither.
pub(crate) fn people(dc: &Domain) {
    for user in ["alice", "bob", "carol", "dave"] {
        dc.add_user(user, PASSWORD);
    }
    dc.add_group("RDS-Users");
    dc.add_group("Sales");
    dc.add_member("Sales", "alice");
    dc.add_member("Sales", "carol");
    dc.add_member("RDS-Users", "Sales");
}

/// `serve`'s flags for `dc`, over `url` (its LDAPS or its StartTLS URL),
/// groups kept `cache_seconds`.
pub(crate) fn directory_flags(dc: &Domain, url: &str, cache_seconds: u32) -> Vec<String> {
    dc.serve_flags(url, cache_seconds)
}

pub(crate) fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// The pool `farm`, entitled to the group RDS-Users (written in another
/// case, as names in a directory are matched) and to `users` by name, with
/// one echoing host.
async fn farm(app: &App, users: &[&str]) {
    let host = echo_host().await;
    app.ok(
        "PUT",
        "/api/v1/hostPools/farm",
        Some(
            json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst",
            "allowedAddressRanges": ["127.0.0.0/8"],
            "entitledGroups": ["rds-users"], "entitledUsers": users}),
        ),
        201,
    )
    .await;
    app.ok(
        "PUT",
        "/api/v1/hostPools/farm/sessionHosts/h1",
        Some(json!({"address": host})),
        201,
    )
    .await;
}

async fn connect(app: &App, user: &str, groups: &[&str]) -> (u16, Value) {
    app.call(
        "POST",
        "/api/v1/hostPools/farm/connect",
        Some(json!({"user": user, "groups": groups})),
    )
    .await
}

fn groups_of(user: &Value) -> Vec<String> {
    user["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .map(|g| g.as_str().expect("a name").to_string())
        .collect()
}

#[tokio::test]
async fn a_nested_group_entitles_at_the_front_door_and_the_api_and_claims_do_not() {
    let dc = domain();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut flags = directory_flags(&dc, &dc.ldaps_url(), 300);
    flags.extend(["--gateway-listen".to_string(), "127.0.0.1:0".to_string()]);
    let (app, front_door) = App::spawn_with_front_door(dir.path(), "farm", &strs(&flags));
    farm(&app, &[]).await;

    // alice is in RDS-Users only through Sales: the front door lets her in
    // on her name alone, which the directory resolves.
    assert!(
        open(&front_door, "Cookie: mstshash=alice").await.is_some(),
        "alice, in RDS-Users through Sales, is let in at the front door"
    );
    assert!(
        open(&front_door, "Cookie: mstshash=bob").await.is_none(),
        "bob, in no group of the pool, is refused at the front door"
    );
    // Through the API, by UPN and by DOMAIN\name.
    let (status, placed) = connect(&app, "carol@deskbroker.test", &[]).await;
    assert_eq!(status, 200, "{placed}");
    let (status, placed) = connect(&app, "DESKBROKER\\carol", &[]).await;
    assert_eq!(status, 200, "{placed}");
    // The tickets of the RD Gateway's and the browser's files are issued
    // on the same groups.
    for door in ["rdpFile?gateway=true&", "webUrl?"] {
        let path = format!("/api/v1/hostPools/farm/{door}user=alice");
        app.ok("GET", &path, None, 200).await;
        let path = format!("/api/v1/hostPools/farm/{door}user=bob&groups=RDS-Users");
        app.refused("GET", &path, None, 403, "NotEntitled").await;
    }
    // What bob claims counts for nothing: the directory decides.
    app.refused(
        "POST",
        "/api/v1/hostPools/farm/connect",
        Some(json!({"user": "bob", "groups": ["RDS-Users"]})),
        403,
        "NotEntitled",
    )
    .await;
    // A name from another domain belongs to no group here.
    let (status, refused) = connect(&app, "ELSEWHERE\\alice", &[]).await;
    assert_eq!(
        (status, refused["error"]["code"].as_str()),
        (403, Some("NotEntitled"))
    );

    // The groups the broker uses, nested and primary ones included.
    let alice = app.ok("GET", "/api/v1/users/alice", None, 200).await;
    assert_eq!(alice["found"], true, "{alice}");
    assert_eq!(alice["distinguishedName"], dc.dn("alice"));
    let groups = groups_of(&alice);
    for g in ["Domain Users", "RDS-Users", "Sales"] {
        assert!(groups.iter().any(|x| x == g), "{g} not in {groups:?}");
    }
    let bob = app.ok("GET", "/api/v1/users/bob", None, 200).await;
    // bob's primary group only (his logon token's groups: Samba leaves the
    // built-in Users group that holds Domain Users out of them).
    assert_eq!(groups_of(&bob), ["Domain Users"], "{bob}");
    // A name that would widen a search is only a name nobody has.
    for name in ["*", "alice)(cn=*", "*%29%28objectClass=*"] {
        let nobody = app
            .ok("GET", &format!("/api/v1/users/{name}"), None, 200)
            .await;
        assert_eq!(
            (&nobody["found"], groups_of(&nobody).len()),
            (&json!(false), 0),
            "{name}: {nobody}"
        );
    }
    // The CLI shows the same.
    let (ok, out, err) = app.cli(&["user", "show", "alice", "--output", "json", "--refresh"]);
    assert!(ok, "{err}");
    let shown: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(groups_of(&shown), groups, "{out}");
    // A reader may look; a portal credential may not.
    let portal = credential(&app, "portal-1", "portal", &[]).await;
    let (status, _) = app
        .call_with("GET", "/api/v1/users/alice", None, Some(portal.as_str()))
        .await;
    assert_eq!(status, 403);

    // Another broker on the same domain over StartTLS, walking the nesting
    // one level a search as on a directory that is not Active Directory,
    // finds the same groups.
    let walk_dir = tempfile::tempdir().expect("tempdir");
    let mut flags = directory_flags(&dc, &dc.ldap_url(), 300);
    flags.extend(["--directory-group-search".to_string(), "walk".to_string()]);
    let (walker, _) = App::spawn_with(walk_dir.path(), "127.0.0.1:0", &strs(&flags));
    let walked = walker.ok("GET", "/api/v1/users/alice", None, 200).await;
    // The walk follows Domain Users into the built-in Users group too.
    let walked: Vec<String> = groups_of(&walked)
        .into_iter()
        .filter(|g| g != "Users")
        .collect();
    assert_eq!(walked, groups);
}

/// A broker binding with Kerberos (the bind account's keytab, the DC's
/// KDC through its forwarder) reads the same nested groups; a principal
/// the keytab does not hold binds nobody.
#[tokio::test]
async fn a_keytab_bind_reads_nested_groups() {
    let dc = domain();
    let dir = tempfile::tempdir().expect("tempdir");
    let krb5_conf = dc.krb5_conf(dir.path());
    let keytab = dir.path().join("directory.keytab");
    let principal = dc.export_bind_keytab(&keytab);
    let spawn = |data: &str, url: &str, principal: Option<&str>| {
        let mut flags = dc.serve_flags_with_keytab(url, 300, &keytab);
        if let Some(p) = principal {
            flags.extend(["--directory-principal".to_string(), p.to_string()]);
        }
        let mut command = std::process::Command::new(crate::support::exe());
        command
            .env("DESKBROKER_ADMIN_TOKEN", TOKEN)
            .env("KRB5_CONFIG", &krb5_conf);
        App::spawn_command(
            command,
            &dir.path().join(data),
            "127.0.0.1:0",
            &strs(&flags),
        )
        .0
    };
    // The keytab's first principal, over LDAPS.
    let app = spawn("first", &dc.ldaps_url(), None);
    let alice = app.ok("GET", "/api/v1/users/alice", None, 200).await;
    let groups = groups_of(&alice);
    for g in ["Domain Users", "RDS-Users", "Sales"] {
        assert!(groups.iter().any(|x| x == g), "{g} not in {groups:?}");
    }
    // Named, over StartTLS.
    let named = spawn("named", &dc.ldap_url(), Some(&principal));
    let carol = named.ok("GET", "/api/v1/users/carol", None, 200).await;
    assert!(
        groups_of(&carol).iter().any(|g| g == "RDS-Users"),
        "{carol}"
    );
    // Another principal: no bind, so no groups, and the refusal says why.
    let other = spawn("other", &dc.ldaps_url(), Some("alice@DESKBROKER.TEST"));
    let (status, body) = other.call("GET", "/api/v1/users/alice", None).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "DirectoryUnavailable", "{body}");
    assert!(body.to_string().contains("Kerberos"), "{body}");
}

#[tokio::test]
async fn a_user_taken_out_of_a_group_is_refused_within_the_cache_bound() {
    let dc = domain();
    let dir = tempfile::tempdir().expect("tempdir");
    let flags = directory_flags(&dc, &dc.ldaps_url(), 1);
    let (app, _front_door) = App::spawn_with_front_door(dir.path(), "farm", &strs(&flags));
    farm(&app, &[]).await;
    let file = "/api/v1/hostPools/farm/rdpFile?user=alice";
    let (status, _) = app.call("GET", file, None).await;
    assert_eq!(status, 200, "alice's file, through Sales in RDS-Users");

    dc.remove_member("RDS-Users", "Sales");
    // Within the cache's bound (1 s here), the directory's word holds.
    eventually(PATIENCE, || async {
        let (status, body) = app.call("GET", file, None).await;
        (status == 403 && body["error"]["code"] == "NotEntitled").then_some(())
    })
    .await
    .expect("alice refused once the cache's second has passed");
    let alice = app.ok("GET", "/api/v1/users/alice", None, 200).await;
    assert!(
        !groups_of(&alice).iter().any(|g| g == "RDS-Users"),
        "{alice}"
    );
}

#[tokio::test]
async fn a_directory_that_cannot_be_reached_refuses_decisions_by_group_and_ends_no_session() {
    let mut dc = domain();
    let dir = tempfile::tempdir().expect("tempdir");
    let flags = directory_flags(&dc, &dc.ldaps_url(), 1);
    let (app, _front_door) = App::spawn_with_front_door(dir.path(), "farm", &strs(&flags));
    farm(&app, &["dave"]).await;
    let (status, alice) = connect(&app, "alice", &[]).await;
    assert_eq!(status, 200, "{alice}");

    dc.cut_off();
    // carol's decision needs her groups: 503, and nothing is written.
    let refused = eventually(PATIENCE, || async {
        let (status, body) = connect(&app, "carol", &[]).await;
        (status == 503).then_some(body)
    })
    .await
    .expect("carol refused while the directory is away");
    assert_eq!(
        refused["error"]["code"], "DirectoryUnavailable",
        "{refused}"
    );
    app.refused(
        "GET",
        "/api/v1/users/carol",
        None,
        503,
        "DirectoryUnavailable",
    )
    .await;
    // alice goes back to her session (S1), dave is entitled by name: neither
    // needs the directory.
    let (status, again) = connect(&app, "alice", &[]).await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["sessionId"], alice["sessionId"], "{again}");
    let (status, dave) = connect(&app, "dave", &[]).await;
    assert_eq!(status, 200, "{dave}");
    let mut users: Vec<String> = sessions(&app, "farm")
        .await
        .iter()
        .map(|s| s["userPrincipalName"].as_str().expect("user").to_string())
        .collect();
    users.sort();
    assert_eq!(
        users,
        ["alice", "dave"],
        "no session ended, none added for carol"
    );
    let metrics = app.text("/metrics").await;
    assert!(
        metrics.contains("deskbroker_directory_lookups_total{outcome=\"unavailable\"}"),
        "{metrics}"
    );

    // Back: carol is let in again.
    dc.restore();
    eventually(PATIENCE, || async {
        let (status, _) = connect(&app, "carol", &[]).await;
        (status == 200).then_some(())
    })
    .await
    .expect("carol let in once the directory is back");
}

/// What serve refuses to start with: a directory it would reach without
/// TLS, a bind password or keytab others may read, both or neither,
/// missing settings.
#[cfg(unix)]
#[test]
fn serve_refuses_a_directory_it_cannot_bind_to_safely() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().expect("tempdir");
    let password = dir.path().join("bind-password");
    write_secret(&password, "secret");
    let data = dir.path().join("data");
    let data = data.to_str().expect("utf-8");
    let password_path = password.to_str().expect("utf-8");
    let base = |url: &str| {
        vec![
            "serve".to_string(),
            "--data-dir".into(),
            data.into(),
            "--directory-url".into(),
            url.into(),
            "--directory-bind-dn".into(),
            "CN=broker,DC=example,DC=com".into(),
            "--directory-bind-password-file".into(),
            password_path.into(),
            "--directory-base-dn".into(),
            "DC=example,DC=com".into(),
        ]
    };
    let err = crate::config::refused(
        &strs(&base("http://dc1.example.com")),
        &[("DESKBROKER_ADMIN_TOKEN", TOKEN)],
    );
    assert!(err.contains("only ldaps:// or ldap://"), "{err}");
    let mut no_base = base("ldaps://dc1.example.com");
    no_base.truncate(no_base.len() - 2);
    let err = crate::config::refused(&strs(&no_base), &[("DESKBROKER_ADMIN_TOKEN", TOKEN)]);
    assert!(err.contains("--directory-base-dn"), "{err}");
    std::fs::set_permissions(&password, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let err = crate::config::refused(
        &strs(&base("ldaps://dc1.example.com")),
        &[("DESKBROKER_ADMIN_TOKEN", TOKEN)],
    );
    assert!(
        err.contains("has mode 644") && err.contains("--directory-bind-password-file"),
        "{err}"
    );
    std::fs::set_permissions(&password, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    // A keytab: alone, readable by its owner only; never beside a password.
    let keytab = dir.path().join("directory.keytab");
    write_secret(&keytab, "keys");
    std::fs::set_permissions(&keytab, std::fs::Permissions::from_mode(0o640)).expect("chmod");
    let mut both = base("ldaps://dc1.example.com");
    both.extend(["--directory-keytab".into(), keytab.display().to_string()]);
    let refused =
        |args: &[String]| crate::config::refused(&strs(args), &[("DESKBROKER_ADMIN_TOKEN", TOKEN)]);
    let err = refused(&both);
    assert!(err.contains("give one"), "{err}");
    let by_keytab: Vec<String> = both
        .iter()
        .enumerate()
        .filter(|(i, _)| !(5..=8).contains(i))
        .map(|(_, a)| a.clone())
        .collect();
    let err = refused(&by_keytab);
    assert!(
        err.contains("has mode 640") && err.contains("--directory-keytab"),
        "{err}"
    );
    let mut no_bind = by_keytab.clone();
    no_bind.truncate(no_bind.len() - 2);
    let err = refused(&no_bind);
    assert!(err.contains("--directory-keytab"), "{err}");
    // An address names no service principal: the DNS name is asked for.
    std::fs::set_permissions(&keytab, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let mut by_address = by_keytab.clone();
    by_address[4] = "ldaps://10.0.0.1".into();
    let err = refused(&by_address);
    assert!(err.contains("names an address"), "{err}");
    by_address.extend(["--directory-service-host".into(), "dc1/x@EVIL".into()]);
    let err = refused(&by_address);
    assert!(err.contains("is not a DNS name"), "{err}");
    // The same settings from the config file's [directory] table.
    let config = dir.path().join("deskbroker.toml");
    std::fs::write(
        &config,
        format!(
            "[directory]\nurl = [\"ldaps://dc1.example.com\", \"ftp://dc2\"]\nbind_dn = \"CN=b\"\n\
             bind_password_file = \"{password_path}\"\nbase_dn = \"DC=x\"\n"
        ),
    )
    .expect("config");
    let err = crate::config::refused(
        &[
            "serve",
            "--data-dir",
            data,
            "--config",
            config.to_str().expect("utf-8"),
        ],
        &[("DESKBROKER_ADMIN_TOKEN", TOKEN)],
    );
    assert!(
        err.contains("\"ftp://dc2\"") && err.contains("only ldaps://"),
        "{err}"
    );
    // The keytab's settings sit in the same table.
    std::fs::write(
        &config,
        format!(
            "[directory]\nurl = [\"ldaps://10.0.0.1\"]\nkeytab = \"{}\"\n\
             service_host = \"dc1 x\"\nbase_dn = \"DC=x\"\n",
            keytab.display()
        ),
    )
    .expect("config");
    let err = crate::config::refused(
        &[
            "serve",
            "--data-dir",
            data,
            "--config",
            config.to_str().expect("utf-8"),
        ],
        &[("DESKBROKER_ADMIN_TOKEN", TOKEN)],
    );
    assert!(err.contains("\"dc1 x\" is not a DNS name"), "{err}");
}
