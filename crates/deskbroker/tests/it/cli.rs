//! The CLI through the real binary: the README's worked example, errors,
//! what each command prints when there is nothing to show or nothing to
//! answer, and where the admin token comes from.

use std::path::Path;
use std::process::Command;

use serde_json::json;

use crate::{App, TOKEN};

/// Runs the CLI against `app` in `cwd`, with no token given and no data dir
/// set unless `env` says so; answers (exit success, stdout, stderr).
fn cli_in(app: &App, cwd: &Path, env: &[(&str, &str)], args: &[&str]) -> (bool, String, String) {
    let out = Command::new(crate::exe())
        .args(args)
        .current_dir(cwd)
        .env("DESKBROKER_URL", &app.url)
        .env_remove("DESKBROKER_TOKEN")
        .env_remove("DESKBROKER_DATA_DIR")
        // Not the machine's packaged broker's configuration, if it has one.
        .env("DESKBROKER_CONFIG", cwd.join("no-such-config.toml"))
        .envs(env.iter().copied())
        .output()
        .expect("run the CLI");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn readme_worked_example() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    let (ok, _, err) = app.cli(&[
        "hostpool",
        "create",
        "--name",
        "contosohp01",
        "--host-pool-type",
        "Pooled",
        "--load-balancer-type",
        "DepthFirst",
        "--max-session-limit",
        "10",
    ]);
    assert!(ok, "{err}");
    let (ok, out, err) = app.cli(&["hostpool", "show", "--name", "contosohp01"]);
    assert!(ok, "{err}");
    assert_eq!(
        out,
        "Name         HostPoolType    LoadBalancerType    MaxSessionLimit\n\
         -----------  --------------  ------------------  -----------------\n\
         contosohp01  Pooled          DepthFirst          10\n"
    );
    for (h, a) in [("sh1", "10.0.0.5:3389"), ("sh2", "10.0.0.6:3389")] {
        let (ok, _, err) = app.cli(&[
            "sessionhost",
            "add",
            "--host-pool",
            "contosohp01",
            "--name",
            h,
            "--address",
            a,
        ]);
        assert!(ok, "{err}");
    }
    // DepthFirst fills sh1 (first in query order) before sh2.
    for u in ["alice@contoso.com", "bob@contoso.com"] {
        let (ok, out, err) = app.cli(&[
            "connect",
            "--host-pool",
            "contosohp01",
            "--user",
            u,
            "--output",
            "json",
        ]);
        assert!(ok, "{err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["sessionHost"], "sh1", "{v}");
        assert_eq!(v["reconnect"], false);
    }
    // Alice again: her session, not a new one (S1).
    let (ok, out, _) = app.cli(&[
        "connect",
        "--host-pool",
        "contosohp01",
        "--user",
        "alice@contoso.com",
        "-o",
        "json",
    ]);
    assert!(ok);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["reconnect"], true);
    // Drain sh1: the next new user goes to sh2.
    let (ok, _, err) = app.cli(&[
        "sessionhost",
        "update",
        "--host-pool",
        "contosohp01",
        "--name",
        "sh1",
        "--allow-new-session",
        "false",
    ]);
    assert!(ok, "{err}");
    let (ok, out, _) = app.cli(&[
        "connect",
        "--host-pool",
        "contosohp01",
        "--user",
        "carol@contoso.com",
        "-o",
        "tsv",
    ]);
    assert!(ok);
    assert!(out.contains("sh2"), "{out}");
    let (ok, out, _) = app.cli(&[
        "session",
        "list",
        "--host-pool",
        "contosohp01",
        "-o",
        "json",
    ]);
    assert!(ok);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 3);
    let (ok, out, _) = app.cli(&["sessionhost", "list", "--host-pool", "contosohp01"]);
    assert!(ok);
    assert!(out.lines().count() == 4, "{out}");
}

#[tokio::test]
async fn cli_errors_are_one_line_and_fail() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    let (ok, out, err) = app.cli(&["hostpool", "show", "--name", "nope"]);
    assert!(!ok);
    assert!(out.is_empty());
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("HostPoolNotFound"), "{err}");
    let (ok, _, err) = app.cli(&[
        "hostpool",
        "create",
        "--name",
        "p",
        "--host-pool-type",
        "Pooled",
        "--load-balancer-type",
        "DepthFirst",
    ]);
    assert!(ok);
    assert!(err.contains("warning:"), "P5 warning expected: {err}");
}

/// An empty list prints its table's header (not nothing, which looks like a
/// command that did nothing), `[]` in json and nothing in tsv; `hostpool
/// show` names the pool's type.
#[tokio::test]
async fn empty_lists_print_their_header_and_show_names_the_pool_type() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    let (ok, out, err) = app.cli(&["hostpool", "list"]);
    assert!(ok, "{err}");
    assert_eq!(
        out,
        "Name    HostPoolType    LoadBalancerType    MaxSessionLimit\n\
         ------  --------------  ------------------  -----------------\n"
    );
    let (ok, out, err) = app.cli(&["hostpool", "list", "-o", "json"]);
    assert!(ok, "{err}");
    assert_eq!(out, "[]\n");
    let (ok, out, err) = app.cli(&["hostpool", "list", "-o", "tsv"]);
    assert!(ok, "{err}");
    assert_eq!(out, "");

    let (ok, _, err) = app.cli(&[
        "hostpool",
        "create",
        "--name",
        "desks",
        "--host-pool-type",
        "Personal",
        "--load-balancer-type",
        "Persistent",
    ]);
    assert!(ok, "{err}");
    let (ok, out, err) = app.cli(&["hostpool", "show", "--name", "desks"]);
    assert!(ok, "{err}");
    assert_eq!(
        out.lines().nth(2),
        Some("desks   Personal        Persistent          999999"),
        "{out}"
    );
    for (args, header) in [
        (&["sessionhost", "list", "--host-pool", "desks"][..], "Name"),
        (&["session", "list", "--host-pool", "desks"][..], "Id"),
    ] {
        let (ok, out, err) = app.cli(args);
        assert!(ok, "{args:?}: {err}");
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 2, "{args:?}: a header and its dashes: {out}");
        assert!(lines[0].starts_with(header), "{args:?}: {out}");
        assert!(lines[1].starts_with("----"), "{args:?}: {out}");
        let (ok, out, err) = app.cli(&[args, &["-o", "json"][..]].concat());
        assert!(ok, "{args:?}: {err}");
        assert_eq!(out, "[]\n", "{args:?}");
    }
}

/// Commands whose answer has no body say what they did, on stderr (stdout
/// stays for data): revoking registration tokens, saving an .rdp file.
#[tokio::test]
async fn revoke_and_rdp_file_say_what_they_did() {
    let dir = tempfile::tempdir().unwrap();
    let (app, _) = App::spawn_with(
        &dir.path().join("data"),
        "127.0.0.1:0",
        &["--rdp-listen", "127.0.0.1:0"],
    );
    crate::pool_with_hosts(&app, "farm", "BreadthFirst", 10, 0).await;
    let (ok, out, err) = app.cli(&[
        "hostpool",
        "registration-token",
        "--name",
        "farm",
        "-o",
        "json",
    ]);
    assert!(ok, "{err}");
    let token = serde_json::from_str::<serde_json::Value>(&out).unwrap()["token"]
        .as_str()
        .expect("a token")
        .to_string();

    let (ok, out, err) = app.cli(&[
        "hostpool",
        "registration-token",
        "--name",
        "farm",
        "--revoke",
    ]);
    assert!(ok, "{err}");
    assert_eq!(out, "");
    assert_eq!(
        err,
        "revoked every registration token of host pool farm (hosts already registered keep working)\n"
    );
    // And it was done: the token registers nothing any more.
    let (status, v) = app
        .call_with(
            "POST",
            "/api/v1/register",
            Some(json!({"token": token, "name": "h1", "address": "10.0.0.1:3389"})),
            None,
        )
        .await;
    assert_eq!(status, 401, "{v}");

    let file = dir.path().join("farm.rdp");
    let path = file.display().to_string();
    let (ok, out, err) = app.cli(&["hostpool", "rdp-file", "--name", "farm", "--file", &path]);
    assert!(ok, "{err}");
    assert_eq!(out, "");
    let written = std::fs::read_to_string(&file).expect("the .rdp file");
    let served = app.text("/api/v1/hostPools/farm/rdpFile").await;
    assert_eq!(written, served);
    assert_eq!(
        err,
        format!(
            "wrote the .rdp file of host pool farm to {path} ({} bytes)\n",
            served.len()
        )
    );
    // --gateway: a file through the RD Gateway, for a user only; this
    // broker knows of no gateway, and says how to give it one.
    let (ok, _, err) = app.cli(&["hostpool", "rdp-file", "--name", "farm", "--gateway"]);
    assert!(!ok && err.contains("--user"), "{err}");
    let (ok, out, err) = app.cli(&[
        "hostpool",
        "rdp-file",
        "--name",
        "farm",
        "--user",
        "alice",
        "--gateway",
    ]);
    assert!(!ok, "{out}");
    assert!(
        err.contains("InvalidParameter") || err.contains("--gateway-listen"),
        "{err}"
    );
}

/// (environment of the CLI, its flags, what its error must say)
type RefusalCase<'a> = (&'a [(&'a str, &'a str)], &'a [&'a str], String);

/// A broker first run without a token writes `admin.token`, which the CLI
/// reads; restarted with `DESKBROKER_ADMIN_TOKEN`, it makes that file hold
/// the new token, so the CLI keeps working. A token the broker refuses is
/// reported with where it came from.
#[tokio::test]
async fn a_token_given_after_a_first_run_is_the_one_the_cli_reads() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let data_env = data.display().to_string();
    let with_data = [("DESKBROKER_DATA_DIR", data_env.as_str())];
    let file = data.join("admin.token");

    // First run: a generated token, in the file, which the CLI finds.
    let app = App::spawn_without_token(&data);
    let generated = std::fs::read_to_string(&file).expect("admin.token written");
    assert_eq!(generated.trim().len(), 64, "{generated:?}");
    let (ok, _, err) = cli_in(&app, cwd.path(), &with_data, &["hostpool", "list"]);
    assert!(ok, "the CLI reads the generated token: {err}");
    app.kill9();

    // Second run with DESKBROKER_ADMIN_TOKEN: the file follows.
    let app = App::spawn_on(&data);
    assert_eq!(
        std::fs::read_to_string(&file).expect("admin.token").trim(),
        TOKEN
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "admin.token readable by others");
    }
    let (ok, _, err) = cli_in(&app, cwd.path(), &with_data, &["hostpool", "list"]);
    assert!(ok, "the CLI reads the token in use: {err}");
    let (status, _) = app
        .call_with("GET", "/api/v1/hostPools", None, Some(generated.trim()))
        .await;
    assert_eq!(status, 401, "the old token is refused");

    // A token given from outside is not written where there was no file.
    let fresh = dir.path().join("fresh");
    let other = App::spawn_on(&fresh);
    assert!(!fresh.join("admin.token").exists());
    drop(other);

    // Refusals say where the refused token came from.
    let stale = dir.path().join("stale");
    std::fs::create_dir_all(&stale).unwrap();
    std::fs::write(stale.join("admin.token"), "stale-token-0123456789\n").unwrap();
    let stale_env = stale.display().to_string();
    let cases: [RefusalCase; 4] = [
        (
            &[("DESKBROKER_DATA_DIR", stale_env.as_str())],
            &[],
            format!(
                "the token came from {}",
                stale.join("admin.token").display()
            ),
        ),
        (
            &[("DESKBROKER_TOKEN", "wrong-token-0123456789")],
            &[],
            "the token came from DESKBROKER_TOKEN".to_string(),
        ),
        (
            &[],
            &["--token", "wrong-token-0123456789"],
            "the token came from --token".to_string(),
        ),
        (
            &[("DESKBROKER_DATA_DIR", fresh.to_str().unwrap())],
            &[],
            format!(
                "no token was given and there is no {}",
                fresh.join("admin.token").display()
            ),
        ),
    ];
    for (env, flags, says) in cases {
        let args = [&["hostpool", "list"][..], flags].concat();
        let (ok, out, err) = cli_in(&app, cwd.path(), env, &args);
        assert!(!ok, "{env:?} {flags:?}: {out}");
        assert_eq!(err.lines().count(), 1, "one line: {err}");
        assert!(err.starts_with("error: Unauthorized: "), "{err}");
        assert!(
            err.contains(&says),
            "{env:?} {flags:?}: {err:?} lacks {says:?}"
        );
        assert!(err.contains("DESKBROKER_TOKEN"), "says what to do: {err}");
    }
}

/// On a machine where the package runs the broker, the CLI run by root (or
/// the broker's user) finds that broker's token through its configuration
/// file (`/etc/deskbroker/deskbroker.toml`, here named by
/// `DESKBROKER_CONFIG`): `admin.token` in its `data_dir`, or its
/// `admin_token_file`. A broker's data directory in the current directory
/// still comes first.
#[tokio::test]
async fn the_cli_finds_the_packaged_brokers_token_through_its_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let data = dir.path().join("var-lib-deskbroker");
    let app = App::spawn_without_token(&data);
    let config = dir.path().join("deskbroker.toml");
    std::fs::write(
        &config,
        format!("listen = \"127.0.0.1:8080\"\ndata_dir = {:?}\n", data),
    )
    .unwrap();
    let config_env = config.display().to_string();
    let with_config = [("DESKBROKER_CONFIG", config_env.as_str())];
    let (ok, _, err) = cli_in(&app, cwd.path(), &with_config, &["hostpool", "list"]);
    assert!(ok, "the CLI finds the data_dir's admin.token: {err}");

    // The configuration's admin_token_file wins over its data_dir.
    let chosen = dir.path().join("admin.token");
    std::fs::write(&chosen, "not-this-brokers-token-0123456789\n").unwrap();
    std::fs::write(
        &config,
        format!("data_dir = {data:?}\nadmin_token_file = {chosen:?}\n"),
    )
    .unwrap();
    let (ok, _, err) = cli_in(&app, cwd.path(), &with_config, &["hostpool", "list"]);
    assert!(!ok, "the admin_token_file's token was not the one sent");
    assert!(
        err.contains(&format!("the token came from {}", chosen.display())),
        "{err}"
    );

    // A local broker's data directory comes first.
    let local = cwd.path().join("deskbroker-data");
    std::fs::create_dir_all(&local).unwrap();
    std::fs::copy(data.join("admin.token"), local.join("admin.token")).unwrap();
    let (ok, _, err) = cli_in(&app, cwd.path(), &with_config, &["hostpool", "list"]);
    assert!(ok, "./deskbroker-data/admin.token comes first: {err}");
}

/// The hardening settings of a pool through the CLI: set, shown by the API,
/// cleared; a range that is not CIDR is refused in one line, changing nothing.
#[tokio::test]
async fn pool_hardening_settings_are_set_and_cleared_from_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    let create = [
        "hostpool",
        "create",
        "--name",
        "farm",
        "--host-pool-type",
        "Pooled",
        "--load-balancer-type",
        "BreadthFirst",
    ];
    let (ok, _, err) = app.cli(&create);
    assert!(ok, "{err}");
    let (ok, _, err) = app.cli(&[
        "hostpool",
        "update",
        "--name",
        "farm",
        "--allowed-address-ranges",
        "10.0.0.0/8,192.168.1.0/24",
        "--allow-front-door",
        "true",
        "--disconnected-timeout-seconds",
        "3600",
        "--max-session-lifetime-seconds",
        "86400",
    ]);
    assert!(ok, "{err}");
    let pool = app.ok("GET", "/api/v1/hostPools/farm", None, 200).await;
    assert_eq!(
        pool["allowedAddressRanges"],
        json!(["10.0.0.0/8", "192.168.1.0/24"])
    );
    assert_eq!(pool["allowFrontDoor"], json!(true));
    assert_eq!(pool["disconnectedTimeoutSeconds"], json!(3600));
    assert_eq!(pool["maxSessionLifetimeSeconds"], json!(86400));

    let (ok, _, err) = app.cli(&[
        "hostpool",
        "update",
        "--name",
        "farm",
        "--allowed-address-ranges",
        "10.0.0.0/33",
    ]);
    assert!(!ok);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("InvalidParameter"), "{err}");
    let pool = app.ok("GET", "/api/v1/hostPools/farm", None, 200).await;
    assert_eq!(
        pool["allowedAddressRanges"].as_array().map(Vec::len),
        Some(2)
    );

    let (ok, _, err) = app.cli(&[
        "hostpool",
        "update",
        "--name",
        "farm",
        "--allowed-address-ranges",
        "",
    ]);
    assert!(ok, "{err}");
    let pool = app.ok("GET", "/api/v1/hostPools/farm", None, 200).await;
    assert_eq!(pool["allowedAddressRanges"], json!([]));
}
