//! `deskbroker backup` and `deskbroker restore` on the embedded SQLite
//! store, and the data directory's lock; `pg_dump`/`pg_restore` of a
//! PostgreSQL store, as docs/operations.md tells operators to do it.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;

use crate::{App, TOKEN, exe, pool_with_hosts};

/// Runs `deskbroker ARGS`; answers (success, stdout, stderr).
pub fn run(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(exe())
        .args(args)
        .env("DESKBROKER_ADMIN_TOKEN", TOKEN)
        .env_remove("DESKBROKER_DATA_DIR")
        .output()
        .expect("run deskbroker");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `deskbroker backup --data-dir DATA --output OUTPUT`.
fn take_backup(data: &str, output: &str) -> (bool, String, String) {
    run(&["backup", "--data-dir", data, "--output", output])
}

fn path(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// SQLite's own integrity check of `file`, from outside deskbroker.
fn integrity(file: &Path) -> Vec<String> {
    let conn =
        rusqlite::Connection::open_with_flags(file, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .expect("open the backup");
    let mut stmt = conn.prepare("PRAGMA integrity_check").expect("prepare");
    stmt.query_map([], |r| r.get(0))
        .expect("integrity_check")
        .collect::<Result<_, _>>()
        .expect("rows")
}

/// An acknowledged connect: (user, session id, host).
type Placed = (String, serde_json::Value, serde_json::Value);

/// Connects users u{worker}-{n} from `workers` concurrent clients until
/// `stop` is set; answers every acknowledged connect, in `placed` as they
/// come.
async fn storm(app: &App, workers: usize, stop: Arc<AtomicBool>, placed: Arc<Mutex<Vec<Placed>>>) {
    let mut tasks = Vec::new();
    for w in 0..workers {
        let (http, url, stop, placed) = (
            app.http.clone(),
            app.url.clone(),
            stop.clone(),
            placed.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut n = 0;
            while !stop.load(Ordering::SeqCst) {
                let user = format!("u{w}-{n}");
                n += 1;
                let resp = http
                    .post(format!("{url}/api/v1/hostPools/p/connect"))
                    .bearer_auth(TOKEN)
                    .json(&json!({ "user": user }))
                    .send()
                    .await
                    .expect("connect");
                assert_eq!(resp.status().as_u16(), 200, "connect {user}");
                let v: serde_json::Value = resp.json().await.expect("json");
                placed.lock().unwrap().push((
                    user,
                    v["sessionId"].clone(),
                    v["sessionHost"].clone(),
                ));
            }
        }));
    }
    for t in tasks {
        t.await.expect("storm worker");
    }
}

/// A backup taken while many clients connect at once restores to a store
/// that passes SQLite's integrity check and holds every session the broker
/// had acknowledged when the backup began; a broker started on it serves
/// each of those users their own session again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_backup_during_a_connect_storm_restores_every_acknowledged_session() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    pool_with_hosts(&app, "p", "BreadthFirst", 1000, 10).await;
    let stop = Arc::new(AtomicBool::new(false));
    let placed = Arc::new(Mutex::new(Vec::new()));
    let storming = storm(&app, 8, stop.clone(), placed.clone());
    let backup = dir.path().join("backup.sqlite3");
    let backing_up = async {
        // Once the storm is under way: what was acknowledged by then must
        // be in the backup.
        let under_way = crate::eventually(Duration::from_secs(60), || async {
            placed.lock().unwrap().len() >= 200
        })
        .await;
        assert!(under_way, "the storm did not get going");
        let before: Vec<Placed> = placed.lock().unwrap().clone();
        let (data, out) = (app.data_dir.clone(), backup.clone());
        let (ok, stdout, stderr) =
            tokio::task::spawn_blocking(move || take_backup(path(&data), path(&out)))
                .await
                .unwrap();
        let during = placed.lock().unwrap().len();
        // Let the storm go on a little past the backup, then stop it.
        crate::eventually(Duration::from_secs(60), || async {
            placed.lock().unwrap().len() >= during + 100
        })
        .await;
        stop.store(true, Ordering::SeqCst);
        assert!(ok, "backup failed: {stderr}");
        assert!(stdout.contains("integrity check ok"), "{stdout}");
        (before, during)
    };
    let ((before, during), ()) = tokio::join!(backing_up, storming);
    let total = placed.lock().unwrap().len();
    assert!(
        during > before.len() && total > during,
        "connects went on during the backup: {} {during} {total}",
        before.len()
    );
    assert_eq!(integrity(&backup), ["ok"]);

    let restored = dir.path().join("restored");
    let (ok, stdout, stderr) = run(&[
        "restore",
        "--input",
        path(&backup),
        "--data-dir",
        path(&restored),
    ]);
    assert!(ok, "restore failed: {stderr}");
    assert!(stdout.contains("schema version"), "{stdout}");
    let app2 = App::spawn_on(&restored);
    for (user, id, host) in &before {
        let (id, host) = (
            id.as_str().unwrap_or_default(),
            host.as_str().unwrap_or_default(),
        );
        crate::assert_reconnects(&app2, "p", user, id, host).await;
    }
    // Nothing in the copy that the storm did not ask for.
    let asked: std::collections::HashSet<String> = placed
        .lock()
        .unwrap()
        .iter()
        .map(|(user, _, _)| user.clone())
        .collect();
    let listed = app2
        .ok("GET", "/api/v1/hostPools/p/userSessions", None, 200)
        .await;
    let listed = listed["value"].as_array().expect("sessions");
    assert!(listed.len() >= before.len(), "{} sessions", listed.len());
    for s in listed {
        let user = s["userPrincipalName"].as_str().unwrap_or_default();
        assert!(
            asked.contains(user),
            "a session the storm did not make: {s}"
        );
    }
}

/// A restore over the data directory of a running broker is refused, even
/// with --force, and changes nothing: the store's bytes are the same and
/// the broker still serves what it had. A second broker on the same data
/// directory is refused too.
#[tokio::test]
async fn a_restore_over_a_running_broker_is_refused_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    // A backup of another broker's store, to restore.
    let other = App::spawn_on(&dir.path().join("other"));
    pool_with_hosts(&other, "q", "DepthFirst", 5, 1).await;
    let backup = dir.path().join("other.sqlite3");
    let (ok, _, stderr) = take_backup(path(&other.data_dir), path(&backup));
    assert!(ok, "{stderr}");
    drop(other);

    let app = App::spawn(&dir);
    pool_with_hosts(&app, "p", "DepthFirst", 5, 2).await;
    let v = app
        .ok(
            "POST",
            "/api/v1/hostPools/p/connect",
            Some(json!({"user": "alice"})),
            200,
        )
        .await;
    // The broker is paused (SIGSTOP) while the restores are tried, so
    // that its own checkpoints cannot change the files meanwhile; it keeps
    // its lock.
    let files = |dir: &Path| -> Vec<(String, Vec<u8>)> {
        let mut all: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_file())
            .map(|p| (p.display().to_string(), std::fs::read(&p).unwrap()))
            .collect();
        all.sort();
        all
    };
    let signal = |sig: &str| {
        let pid = app.child.id().to_string();
        let sent = Command::new("kill").args([sig, &pid]).status().unwrap();
        assert!(sent.success(), "kill {sig} {pid}");
    };
    signal("-STOP");
    let before = files(&app.data_dir);
    for force in [false, true] {
        let mut args = vec![
            "restore",
            "--input",
            path(&backup),
            "--data-dir",
            path(&app.data_dir),
        ];
        if force {
            args.push("--force");
        }
        let (ok, _, stderr) = run(&args);
        assert!(!ok, "restore over a running broker succeeded");
        assert!(
            stderr.contains("stop the broker") && stderr.contains("is using the data directory"),
            "{stderr}"
        );
    }
    let after = files(&app.data_dir);
    signal("-CONT");
    assert!(before == after, "the data directory changed");
    let again = app
        .ok(
            "POST",
            "/api/v1/hostPools/p/connect",
            Some(json!({"user": "alice"})),
            200,
        )
        .await;
    assert_eq!(again["sessionId"], v["sessionId"]);
    app.refused("GET", "/api/v1/hostPools/q", None, 404, "HostPoolNotFound")
        .await;

    // One broker per store.
    let out = Command::new(exe())
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
            path(&app.data_dir),
        ])
        .env("DESKBROKER_ADMIN_TOKEN", TOKEN)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("is using the data directory"), "{stderr}");

    // Once it is stopped, the restore goes through (with --force, as the
    // data dir holds a store), and the broker serves the backup's state.
    let data = app.data_dir.clone();
    app.kill9();
    let (ok, _, stderr) = run(&[
        "restore",
        "--input",
        path(&backup),
        "--data-dir",
        path(&data),
    ]);
    assert!(!ok && stderr.contains("--force"), "{stderr}");
    let (ok, _, stderr) = run(&[
        "restore",
        "--input",
        path(&backup),
        "--data-dir",
        path(&data),
        "--force",
    ]);
    assert!(ok, "{stderr}");
    let app = App::spawn_on(&data);
    app.ok("GET", "/api/v1/hostPools/q", None, 200).await;
    app.refused("GET", "/api/v1/hostPools/p", None, 404, "HostPoolNotFound")
        .await;
}

/// Files that are not a deskbroker store this binary knows are refused
/// with a reason, before the data directory is touched; a backup does not
/// overwrite a file unless told to, nor copy a directory with no store.
#[tokio::test]
async fn bad_backups_are_refused_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    pool_with_hosts(&app, "p", "DepthFirst", 5, 1).await;
    let good = dir.path().join("good.sqlite3");
    let (ok, _, stderr) = take_backup(path(&app.data_dir), path(&good));
    assert!(ok, "{stderr}");
    let (ok, _, stderr) = take_backup(path(&app.data_dir), path(&good));
    assert!(
        !ok && stderr.contains("already exists") && stderr.contains("--force"),
        "{stderr}"
    );
    let (ok, _, stderr) = run(&[
        "backup",
        "--data-dir",
        path(&app.data_dir),
        "--output",
        path(&good),
        "--force",
    ]);
    assert!(ok, "{stderr}");
    let (ok, _, stderr) = take_backup(path(&dir.path().join("none")), path(&dir.path().join("x")));
    assert!(
        !ok && stderr.contains("holds no deskbroker store"),
        "{stderr}"
    );
    assert!(!dir.path().join("x").exists() && !dir.path().join("none").exists());

    let text = dir.path().join("notes.txt");
    std::fs::write(
        &text,
        "not a database at all, just some words\n".repeat(100),
    )
    .unwrap();
    let bytes = std::fs::read(&good).unwrap();
    let truncated = dir.path().join("truncated.sqlite3");
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    let foreign = dir.path().join("foreign.sqlite3");
    rusqlite::Connection::open(&foreign)
        .unwrap()
        .execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1);")
        .unwrap();
    let future = dir.path().join("future.sqlite3");
    std::fs::copy(&good, &future).unwrap();
    rusqlite::Connection::open(&future)
        .unwrap()
        .pragma_update(None, "user_version", 99)
        .unwrap();
    let lacking = dir.path().join("lacking.sqlite3");
    std::fs::copy(&good, &lacking).unwrap();
    rusqlite::Connection::open(&lacking)
        .unwrap()
        .execute_batch("DROP TABLE broker_secrets")
        .unwrap();
    let newest = store::sqlite_backup::schema_version().to_string();
    let cases: [(&Path, &[&str]); 6] = [
        (&text, &["is not a deskbroker store", "not a database"]),
        (&truncated, &["is not a deskbroker store"]),
        (
            &foreign,
            &["is not a deskbroker store", "no deskbroker schema"],
        ),
        (&future, &["schema version 99", &newest]),
        (
            &lacking,
            &["is not a deskbroker store", "lacks: broker_secrets"],
        ),
        (&dir.path().join("missing.sqlite3"), &["cannot read"]),
    ];
    for (input, says) in cases {
        let target = dir.path().join("target");
        let (ok, _, stderr) = run(&[
            "restore",
            "--input",
            path(input),
            "--data-dir",
            path(&target),
        ]);
        assert!(!ok, "{} was restored", input.display());
        for s in says {
            assert!(stderr.contains(s), "{}: {stderr}", input.display());
        }
        assert!(
            !target.exists(),
            "{}: the data dir was touched",
            input.display()
        );
    }
}

/// On PostgreSQL the server's tools do it: a `pg_dump` of a running
/// broker's database, restored with `pg_restore` into a fresh database, is
/// served by a broker with every acknowledged session.
#[tokio::test]
async fn a_pg_dump_restores_into_a_fresh_database_that_serves_its_sessions() {
    let source = crate::pg::scratch("pgdump_source").await;
    let target = crate::pg::scratch("pgdump_target").await;
    let dir = tempfile::tempdir().unwrap();
    let app = crate::pg::spawn_with(&dir.path().join("a"), &["--database-url", source.url()])
        .expect("serve on postgres");
    let placed = crate::acknowledge_before_crash(&app).await;
    let dump = dir.path().join("deskbroker.dump");
    let out = Command::new("pg_dump")
        .args([
            "--format=custom",
            "--no-owner",
            "--file",
            path(&dump),
            "--dbname",
            source.url(),
        ])
        .output()
        .expect("run pg_dump");
    assert!(
        out.status.success(),
        "pg_dump: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new("pg_restore")
        .args([
            "--no-owner",
            "--exit-on-error",
            "--dbname",
            target.url(),
            path(&dump),
        ])
        .output()
        .expect("run pg_restore");
    assert!(
        out.status.success(),
        "pg_restore: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    app.kill9();
    let app = crate::pg::spawn_with(&dir.path().join("b"), &["--database-url", target.url()])
        .expect("serve the restored database");
    let leads = crate::eventually(Duration::from_secs(30), || async { app.leads().await }).await;
    assert!(leads, "the broker on the restored database does not lead");
    crate::check_after_crash(&app, placed).await;
}

/// The numeric id `id FLAG [USER]` prints.
fn id(args: &[&str]) -> u32 {
    let out = Command::new("id").args(args).output().expect("run id");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("id {args:?}: {out:?}"))
}

/// As docs/operations.md has an administrator do it: `deskbroker restore
/// … --force` run as root into the data directory of a broker that runs
/// as a user of its own (the package's runs as `deskbroker`; here
/// `nobody`). The restored store is that user's, and the broker starts on
/// it with the backed-up pool. A store left to root is refused with a
/// sentence that names the file, its owner and mode, and what to do.
#[tokio::test]
async fn a_restore_as_root_leaves_a_store_the_brokers_own_user_can_open() {
    use std::os::unix::fs::PermissionsExt as _;
    use std::os::unix::process::CommandExt as _;
    assert_eq!(
        id(&["-u"]),
        0,
        "this test restores as root and serves as `nobody`, as the package does: run it as root"
    );
    let (uid, gid) = (id(&["-u", "nobody"]), id(&["-g", "nobody"]));
    let dir = tempfile::tempdir().unwrap();
    let open = std::fs::Permissions::from_mode(0o755);
    std::fs::set_permissions(dir.path(), open.clone()).unwrap();
    // The binary where `nobody` may run it, whatever the checkout's modes.
    let bin = dir.path().join("deskbroker");
    std::fs::copy(exe(), &bin).unwrap();
    std::fs::set_permissions(&bin, open).unwrap();

    let app = App::spawn(&dir);
    pool_with_hosts(&app, "p", "BreadthFirst", 2, 10).await;
    let backup = dir.path().join("backup.sqlite3");
    let (ok, _, stderr) = take_backup(path(&app.data_dir), path(&backup));
    assert!(ok, "backup failed: {stderr}");
    app.kill9();

    // The broker's own data directory, and a restore into it as root.
    let served = dir.path().join("served");
    std::fs::create_dir(&served).unwrap();
    std::os::unix::fs::chown(&served, Some(uid), Some(gid)).unwrap();
    std::fs::set_permissions(&served, std::fs::Permissions::from_mode(0o700)).unwrap();
    let (ok, _, stderr) = run(&[
        "restore",
        "--input",
        path(&backup),
        "--data-dir",
        path(&served),
        "--force",
    ]);
    assert!(ok, "restore failed: {stderr}");
    for entry in std::fs::read_dir(&served).unwrap() {
        use std::os::unix::fs::MetadataExt as _;
        let entry = entry.unwrap();
        let meta = entry.metadata().unwrap();
        assert_eq!(
            (meta.uid(), meta.gid()),
            (uid, gid),
            "{} is not the broker's user's",
            entry.path().display()
        );
    }
    let as_nobody = || {
        let mut command = Command::new(&bin);
        command
            .uid(uid)
            .gid(gid)
            .env("DESKBROKER_ADMIN_TOKEN", TOKEN)
            .env_remove("DESKBROKER_DATA_DIR");
        command
    };
    let (broker, _) = App::spawn_command(as_nobody(), &served, "127.0.0.1:0", &[]);
    let pool = broker.ok("GET", "/api/v1/hostPools/p", None, 200).await;
    assert_eq!(pool["name"], "p", "{pool}");
    broker.kill9();

    // A store root made (a restore before this one, or `serve` as root):
    // the broker says whose it is and what to do, not SQLite's code 14.
    let store_file = served.join(store::sqlite_backup::DATABASE_FILE);
    std::os::unix::fs::chown(&store_file, Some(0), Some(0)).unwrap();
    let out = as_nobody()
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(&served)
        .output()
        .expect("run serve");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "served a store it cannot open: {stderr}"
    );
    let says = format!(
        "{} belongs to root (uid 0) with mode 600",
        store_file.display()
    );
    assert!(stderr.contains(&says), "{stderr:?} lacks {says:?}");
    assert!(stderr.contains("runs as nobody"), "{stderr}");
    assert!(
        stderr.contains(&format!("chown -R USER: {}", served.display())),
        "{stderr}"
    );
}

/// A first start on a new data directory warns about nothing it made
/// itself: the store and its journal are made private from the start,
/// not made readable and then restricted.
#[test]
fn a_first_start_makes_its_files_private_without_a_warning() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let log = dir.path().join("serve.log");
    let mut child = Command::new(exe())
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(&data)
        .env("DESKBROKER_ADMIN_TOKEN", TOKEN)
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("start serve");
    let started = crate::ready_line(&mut child, Duration::from_secs(120));
    let _ = child.kill();
    let _ = child.wait();
    started.expect("serve started");
    let said = std::fs::read_to_string(&log).unwrap();
    assert!(
        !said.contains("looser"),
        "warned about its own new files: {said}"
    );
    for entry in std::fs::read_dir(&data).unwrap() {
        let entry = entry.unwrap();
        let mode = entry.metadata().unwrap().permissions().mode() & 0o777;
        assert_eq!(mode & 0o077, 0, "{} is {mode:o}", entry.path().display());
    }
}
