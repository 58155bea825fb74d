//! The test domain controller itself (support's `domain`): a real Samba AD
//! DC answers stock clients through its forwarders on 127.0.0.1 — OpenLDAP's
//! `ldapsearch` over LDAPS and StartTLS, checking the DC's certificate
//! against the test's CA, with AD's in-chain rule for nested groups; MIT
//! `kinit` and `kvno` for a TGT and a service ticket that the exported
//! keytab decrypts — and a cut-off makes it unreachable until restored.

use std::path::Path;
use std::process::Command;

use crate::support::domain::{Domain, output};

/// `ldapsearch` as the bind account at `url` (LDAPS, or plain LDAP with
/// StartTLS required), trusting only the DC's CA; answers the DNs found.
fn ldapsearch(domain: &Domain, url: &str, filter: &str) -> Result<Vec<String>, String> {
    let (bind_dn, password_file) = domain.bind_account();
    let mut cmd = Command::new("ldapsearch");
    cmd.args(["-LLL", "-x", "-o", "nettimeout=10", "-l", "10", "-H", url])
        .args(["-D", &bind_dn])
        .arg("-y")
        .arg(&password_file)
        .args(["-b", domain.base_dn(), filter, "dn"])
        .env("LDAPTLS_CACERT", domain.ca_file())
        .env("LDAPTLS_REQCERT", "demand");
    if url.starts_with("ldap://") {
        cmd.arg("-ZZ");
    }
    let text = output(&mut cmd, "")?;
    Ok(text
        .lines()
        .filter_map(|l| l.strip_prefix("dn: "))
        .map(str::to_string)
        .collect())
}

/// The DNs whose in-chain (nested) membership includes `group`'s DN.
fn in_chain(domain: &Domain, group: &str) -> Vec<String> {
    let filter = format!("(memberOf:1.2.840.113556.1.4.1941:={})", domain.dn(group));
    let mut found = ldapsearch(domain, &domain.ldaps_url(), &filter).expect("in-chain search");
    found.sort();
    found
}

/// The principals in the credential cache `ccache`, as `klist` lists them.
fn klist(krb5_conf: &Path, ccache: &Path) -> String {
    let mut cmd = Command::new("klist");
    cmd.env("KRB5_CONFIG", krb5_conf)
        .env("KRB5CCNAME", format!("FILE:{}", ccache.display()));
    output(&mut cmd, "").expect("klist")
}

#[test]
fn users_nested_groups_and_tickets_come_from_a_real_domain() {
    let domain = Domain::start();
    assert_eq!(domain.realm(), "DESKBROKER.TEST");
    assert_eq!(domain.netbios(), "DESKBROKER");
    let (_, password_file) = domain.bind_account();
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(&password_file)
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "the bind password file's mode");

    domain.add_user("alice", "Alice-Pass-1234");
    domain.add_user("bob", "Bob-Pass-12345");
    let alice = ldapsearch(&domain, &domain.ldaps_url(), "(sAMAccountName=alice)").unwrap();
    assert_eq!(alice, vec![domain.dn("alice")]);
    let nobody = ldapsearch(&domain, &domain.ldaps_url(), "(sAMAccountName=carol)").unwrap();
    assert!(nobody.is_empty(), "{nobody:?}");
    // StartTLS on the plain LDAP port.
    let bob = ldapsearch(&domain, &domain.ldap_url(), "(sAMAccountName=bob)").unwrap();
    assert_eq!(bob, vec![domain.dn("bob")]);

    // bob is in Sales, Sales in RDS-Users: bob is in RDS-Users through
    // Sales; alice in neither.
    domain.add_group("RDS-Users");
    domain.add_group("Sales");
    domain.add_member("RDS-Users", "Sales");
    domain.add_member("Sales", "bob");
    let mut want = vec![domain.dn("Sales"), domain.dn("bob")];
    want.sort();
    assert_eq!(in_chain(&domain, "RDS-Users"), want);
    domain.remove_member("Sales", "bob");
    assert_eq!(in_chain(&domain, "RDS-Users"), vec![domain.dn("Sales")]);

    // MIT kinit through the KDC forwarder, TCP only.
    let dir = tempfile::tempdir().unwrap();
    let krb5_conf = domain.krb5_conf(dir.path());
    let ccache = dir.path().join("alice.cc");
    domain
        .kinit(&krb5_conf, "alice", "Alice-Pass-1234", &ccache)
        .expect("kinit alice");
    let tickets = klist(&krb5_conf, &ccache);
    assert!(
        tickets.contains("krbtgt/DESKBROKER.TEST@DESKBROKER.TEST"),
        "{tickets}"
    );
    let wrong = dir.path().join("wrong.cc");
    let refused = domain.kinit(&krb5_conf, "alice", "Not-Her-Pass-1", &wrong);
    assert!(refused.is_err(), "a wrong password got a ticket");

    // A new password counts at once; the old one no longer does.
    domain.set_password("alice", "Alice-Pass-5678");
    assert!(
        domain
            .kinit(&krb5_conf, "alice", "Alice-Pass-1234", &wrong)
            .is_err()
    );
    domain
        .kinit(&krb5_conf, "alice", "Alice-Pass-5678", &ccache)
        .expect("kinit with the new password");

    // A service's keytab decrypts the service ticket a user gets for it.
    domain.add_user("gateway", "Gateway-Pass-1");
    let keytab = dir.path().join("gateway.keytab");
    domain.add_service_keytab("gateway", "HTTP/gateway.deskbroker.test", &keytab);
    let mode = std::fs::metadata(&keytab).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "the keytab's mode");
    let mut kvno = Command::new("kvno");
    kvno.args(["-k"])
        .arg(&keytab)
        .arg("HTTP/gateway.deskbroker.test")
        .env("KRB5_CONFIG", &krb5_conf)
        .env("KRB5CCNAME", format!("FILE:{}", ccache.display()));
    let checked = output(&mut kvno, "").expect("kvno with the keytab");
    assert!(checked.contains("keytab entry valid"), "{checked}");
}

#[test]
fn a_cut_off_domain_is_unreachable_until_restored() {
    let mut domain = Domain::start();
    domain.add_user("alice", "Alice-Pass-1234");
    let dir = tempfile::tempdir().unwrap();
    let krb5_conf = domain.krb5_conf(dir.path());
    let ccache = dir.path().join("alice.cc");
    let find = |domain: &Domain| ldapsearch(domain, &domain.ldaps_url(), "(sAMAccountName=alice)");
    assert_eq!(find(&domain).unwrap(), vec![domain.dn("alice")]);

    domain.cut_off();
    assert!(find(&domain).is_err(), "LDAPS answered while cut off");
    let starttls = ldapsearch(&domain, &domain.ldap_url(), "(sAMAccountName=alice)");
    assert!(starttls.is_err(), "LDAP answered while cut off");
    let kinit = domain.kinit(&krb5_conf, "alice", "Alice-Pass-1234", &ccache);
    assert!(kinit.is_err(), "the KDC answered while cut off");

    domain.restore();
    assert_eq!(find(&domain).unwrap(), vec![domain.dn("alice")]);
    domain
        .kinit(&krb5_conf, "alice", "Alice-Pass-1234", &ccache)
        .expect("kinit after restore");
}
