//! The user portal with a directory (rule AD1), end to end: a real OpenID
//! Connect provider (`portal.rs`'s, on Node), a real Active Directory
//! domain controller (`support::domain`), the real `deskbroker serve` and
//! chromium. The pools a signed-in user is offered, and the `.rdp` files
//! they may download, follow the directory's groups, nested ones included,
//! whatever the ID token claims; while the directory cannot be reached,
//! the pools decided without a group are still offered.

use serde_json::json;

use crate::browser::browser;
use crate::directory::{directory_flags, domain, strs};
use crate::portal::{
    code, get, offered, pool, session_cookie, sign_in, spawn_broker, start_provider,
};
use crate::{PATIENCE, eventually, free_port};

#[tokio::test]
async fn the_portal_offers_what_the_directory_gives_not_what_the_token_claims() {
    // alice is in Sales, and Sales in RDS-Users; bob is in neither.
    let mut dc = domain();
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let broker_url = format!("http://127.0.0.1:{port}");
    // alice's ID token carries no groups at all; bob's claims RDS-Users.
    let provider = start_provider(
        &broker_url,
        "127.0.0.2",
        json!({
            "alice": {"preferred_username": "alice@deskbroker.test"},
            "bob": {"preferred_username": "bob@deskbroker.test", "groups": ["RDS-Users"]},
        }),
    );
    // Groups kept a second, so that the directory is asked again below.
    let flags = directory_flags(&dc, &dc.ldaps_url(), 1);
    let app = spawn_broker(&dir, port, &provider.issuer, &strs(&flags));
    pool(&app, "farm", json!({"entitledGroups": ["RDS-Users"]})).await;
    pool(&app, "open", json!({})).await;
    pool(
        &app,
        "by-name",
        json!({"entitledUsers": ["alice@deskbroker.test"], "entitledGroups": ["Nobody"]}),
    )
    .await;
    let file = |pool: &str| format!("{broker_url}/portal/pools/{pool}/rdpFile");

    let b = browser().await;
    let c = &b.client;
    // alice: farm through Sales in RDS-Users, though her token says nothing.
    sign_in(c, &app, "alice").await;
    assert_eq!(offered(c).await, ["by-name", "farm", "open"]);
    let alice = session_cookie(c).await.expect("alice's session cookie");
    let (status, _, body) = get(&file("farm"), Some(&alice)).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(":alice@deskbroker.test"), "{body}");

    // bob: his token claims RDS-Users, the directory does not give it.
    // (Forget both sites' cookies; alice's session stays on the server.)
    c.goto(&format!(
        "{}/.well-known/openid-configuration",
        provider.issuer
    ))
    .await
    .expect("the provider");
    c.delete_all_cookies().await.expect("cookies");
    c.goto(&format!("{broker_url}/portal/portal.css"))
        .await
        .expect("the broker");
    c.delete_all_cookies().await.expect("cookies");
    sign_in(c, &app, "bob").await;
    assert_eq!(offered(c).await, ["open"]);
    let bob = session_cookie(c).await.expect("bob's session cookie");
    let (status, _, body) = get(&file("farm"), Some(&bob)).await;
    assert_eq!(
        (status, code(&body).as_str()),
        (403, "NotEntitled"),
        "{body}"
    );

    // The directory out of reach: alice is still offered the pools decided
    // without a group, told why the others are missing, and farm's file is
    // refused with 503 until the directory is back.
    dc.cut_off();
    let page = eventually(PATIENCE, || async {
        let (status, _, page) = get(&format!("{broker_url}/portal"), Some(&alice)).await;
        (status == 200 && page.contains("id=\"unlisted\"")).then_some(page)
    })
    .await
    .expect("the portal says it cannot list the pools a group gives");
    assert!(page.contains("cannot be reached"), "{page}");
    for pool in ["by-name", "open"] {
        assert!(page.contains(&format!("data-pool=\"{pool}\"")), "{page}");
        let (status, _, body) = get(&file(pool), Some(&alice)).await;
        assert_eq!(status, 200, "{pool}: {body}");
    }
    assert!(!page.contains("data-pool=\"farm\""), "{page}");
    let (status, _, body) = get(&file("farm"), Some(&alice)).await;
    assert_eq!(
        (status, code(&body).as_str()),
        (503, "DirectoryUnavailable"),
        "{body}"
    );
    dc.restore();
    eventually(PATIENCE, || async {
        let (status, _, page) = get(&format!("{broker_url}/portal"), Some(&alice)).await;
        (status == 200 && page.contains("data-pool=\"farm\"") && !page.contains("unlisted"))
            .then_some(())
    })
    .await
    .expect("farm offered again once the directory is back");
}
