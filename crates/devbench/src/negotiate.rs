//! `deskbroker-devbench negotiate`: what one Windows sign-in (rule AD2)
//! costs the gateway's CPU, against one connection ticket's check (rule
//! T3), the other way a client gets through the RD Gateway.
//!
//! It starts a real Samba AD domain controller (the `testdomain` crate;
//! needs root), adds a user and the gateway's service account with the
//! keytab of `HTTP/gateway.deskbroker.test`, and gets the user a ticket
//! with MIT `kinit`. MIT's GSSAPI reads the keytab, the credential cache
//! and krb5.conf from the environment, which this workspace never changes
//! while it runs, so the measuring half runs in a child process of its own
//! (`negotiate-worker`) started with them. The child:
//!
//! 1. makes every SPNEGO token the run needs before timing (libgssapi's
//!    client context from the user's cache: each a new Kerberos AP-REQ,
//!    since the acceptor's replay cache refuses repeats), the service
//!    ticket coming from the KDC once;
//! 2. accepts them one after the other with the gateway's own
//!    [`gateway::windows_sign_in::WindowsSignIn::accept`] (MIT's acceptor,
//!    the keytab, the replay cache), each checked to have signed the user
//!    in;
//! 3. checks one connection ticket as the gateway does (parse, then the
//!    HMAC with [`api::ticket::TicketKey::verify`]) many times;
//!
//! and reports the process's CPU time (user + system, `getrusage`) per
//! operation for both, and their ratio.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context as _;
use deskbroker::benchkit::round3;
use serde_json::{Value, json};
use testdomain::domain::Domain;

/// The gateway's host name, in its service principal.
const GATEWAY: &str = "gateway.deskbroker.test";
const USER: &str = "bench-user";
const SERVICE_ACCOUNT: &str = "bench-gateway";
const PASSWORD: &str = "Bench-Pass-5c1e";
/// Sign-ins accepted (and not timed) before the timed ones.
const WARM_UP: u64 = 20;

/// Flags of `deskbroker-devbench negotiate`.
#[derive(clap::Args)]
pub struct NegotiateArgs {
    /// Sign-ins timed (each a fresh token).
    #[arg(long, default_value_t = 2_000, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    sign_ins: u64,
    /// Ticket checks timed.
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    ticket_checks: u64,
    /// `table` or `json`.
    #[arg(long, short = 'o', default_value = "table", value_parser = ["table", "json"])]
    output: String,
}

/// Flags of the measuring child (`negotiate-worker`).
#[derive(clap::Args)]
pub struct WorkerArgs {
    #[arg(long)]
    keytab: PathBuf,
    #[arg(long)]
    sign_ins: u64,
    #[arg(long)]
    ticket_checks: u64,
}

pub async fn run(args: NegotiateArgs) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let root = dir.path().to_path_buf();
    let started = Instant::now();
    let (dc, krb5_conf, keytab, ccache) = tokio::task::spawn_blocking(move || {
        let dc = Domain::start();
        dc.add_user(USER, PASSWORD);
        dc.add_user(SERVICE_ACCOUNT, PASSWORD);
        let keytab = root.join("gateway.keytab");
        dc.add_service_keytab(SERVICE_ACCOUNT, &format!("HTTP/{GATEWAY}"), &keytab);
        let krb5_conf = dc.krb5_conf(&root);
        let ccache = root.join("ccache");
        dc.kinit(&krb5_conf, USER, PASSWORD, &ccache)
            .map_err(|e| anyhow::anyhow!("kinit {USER}: {e}"))?;
        Ok::<_, anyhow::Error>((dc, krb5_conf, keytab, ccache))
    })
    .await
    .context("the domain controller could not be set up")??;
    let setup_seconds = started.elapsed().as_secs_f64();

    let mut keytab_value = std::ffi::OsString::from("FILE:");
    keytab_value.push(&keytab);
    let mut ccache_value = std::ffi::OsString::from("FILE:");
    ccache_value.push(&ccache);
    let out = tokio::process::Command::new(std::env::current_exe()?)
        .arg("negotiate-worker")
        .arg("--keytab")
        .arg(&keytab)
        .arg("--sign-ins")
        .arg(args.sign_ins.to_string())
        .arg("--ticket-checks")
        .arg(args.ticket_checks.to_string())
        .env("KRB5_CONFIG", &krb5_conf)
        .env("KRB5CCNAME", ccache_value)
        .env(gateway::windows_sign_in::KEYTAB_VARIABLE, keytab_value)
        // The replay cache of this run's own, in its directory.
        .env("KRB5RCACHEDIR", dir.path())
        .stderr(std::process::Stdio::inherit())
        .output()
        .await?;
    tokio::task::spawn_blocking(move || drop(dc)).await?;
    anyhow::ensure!(out.status.success(), "the measuring child failed");
    let mut report: Value =
        serde_json::from_slice(&out.stdout).context("the measuring child's report")?;
    report["setup"] = json!({"domainControllerSeconds": round3(setup_seconds)});
    print(&report, &args.output);
    Ok(())
}

/// The measuring child: its environment names the keytab, the user's
/// cache and krb5.conf. Prints its report as JSON.
pub async fn worker(args: WorkerArgs) -> anyhow::Result<()> {
    let sign_in = std::sync::Arc::new(
        gateway::windows_sign_in::WindowsSignIn::new(gateway::windows_sign_in::SignInSettings {
            kerberos: Some(gateway::windows_sign_in::KerberosSettings {
                keytab: args.keytab.clone(),
                service_host: GATEWAY.into(),
            }),
            ntlm: None,
        })
        .map_err(anyhow::Error::msg)?,
    );
    let count = args.sign_ins + WARM_UP;
    let made = Instant::now();
    let tokens = tokio::task::spawn_blocking(move || tokens(count)).await??;
    let making_seconds = made.elapsed().as_secs_f64();
    let source = std::net::IpAddr::from([127, 0, 0, 1]);
    let want = format!("{USER}@deskbroker.test");
    let mut tokens = tokens.into_iter();
    for token in tokens.by_ref().take(WARM_UP as usize) {
        accept_one(&sign_in, source, &token, &want).await?;
    }
    let (cpu0, wall0) = (cpu_seconds()?, Instant::now());
    for token in tokens {
        accept_one(&sign_in, source, &token, &want).await?;
    }
    let sign_in_cpu = (cpu_seconds()? - cpu0) / args.sign_ins as f64;
    let sign_in_wall = wall0.elapsed().as_secs_f64() / args.sign_ins as f64;

    let key = api::ticket::TicketKey::derive("devbench negotiate");
    let ticket = key
        .issue("bench-pool", &want, 4_000_000_000)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let now = 2_000_000_000;
    let (cpu0, wall0) = (cpu_seconds()?, Instant::now());
    for _ in 0..args.ticket_checks {
        let parsed = api::ticket::Ticket::parse(std::hint::black_box(&ticket))
            .map_err(|e| anyhow::anyhow!("{e:?}"))?;
        let user = key.verify(&parsed, "bench-pool", now);
        anyhow::ensure!(std::hint::black_box(user).is_ok(), "the ticket was refused");
    }
    let ticket_cpu = (cpu_seconds()? - cpu0) / args.ticket_checks as f64;
    let ticket_wall = wall0.elapsed().as_secs_f64() / args.ticket_checks as f64;

    let micros = |s: f64| round3(s * 1e6);
    let report = json!({
        "signIn": {"count": args.sign_ins, "cpuMicros": micros(sign_in_cpu),
                   "wallMicros": micros(sign_in_wall),
                   "tokensMadeSeconds": round3(making_seconds)},
        "ticketCheck": {"count": args.ticket_checks, "cpuMicros": micros(ticket_cpu),
                        "wallMicros": micros(ticket_wall)},
        "signInPerTicketCheckCpu": if ticket_cpu > 0.0 { round3(sign_in_cpu / ticket_cpu) } else { 0.0 },
    });
    println!("{report}");
    Ok(())
}

async fn accept_one(
    sign_in: &gateway::windows_sign_in::WindowsSignIn,
    source: std::net::IpAddr,
    token: &str,
    want: &str,
) -> anyhow::Result<()> {
    let signed_in = sign_in
        .accept(source, token)
        .await
        .map_err(|e| anyhow::anyhow!("a sign-in was refused: {e}"))?;
    anyhow::ensure!(signed_in.user == want, "signed in as {}", signed_in.user);
    Ok(())
}

/// `count` SPNEGO tokens for the gateway from the user's cache, base64 as
/// `Authorization: Negotiate` carries them; each a new AP-REQ.
fn tokens(count: u64) -> anyhow::Result<Vec<String>> {
    use base64::Engine as _;
    use libgssapi::context::{ClientCtx, CtxFlags};
    use libgssapi::name::Name;
    use libgssapi::oid::{GSS_MECH_SPNEGO, GSS_NT_KRB5_PRINCIPAL};
    let principal = format!("HTTP/{GATEWAY}");
    (0..count)
        .map(|_| {
            let target = Name::new(principal.as_bytes(), Some(GSS_NT_KRB5_PRINCIPAL))?;
            let mut ctx = ClientCtx::new(
                None,
                target,
                CtxFlags::GSS_C_MUTUAL_FLAG,
                Some(GSS_MECH_SPNEGO),
            );
            let token = ctx
                .step(None, None)?
                .context("the client context made no token")?;
            Ok(base64::engine::general_purpose::STANDARD.encode(&*token))
        })
        .collect()
}

/// This process's CPU time so far (user and system, every thread).
fn cpu_seconds() -> anyhow::Result<f64> {
    use nix::sys::resource::{UsageWho, getrusage};
    let usage = getrusage(UsageWho::RUSAGE_SELF)?;
    let seconds = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
    Ok(seconds(usage.user_time()) + seconds(usage.system_time()))
}

fn print(report: &Value, output: &str) {
    if output == "json" {
        println!(
            "{}",
            serde_json::to_string_pretty(report).unwrap_or_default()
        );
        return;
    }
    let f = |v: &Value| v.as_f64().unwrap_or(0.0);
    println!(
        "{:<44} {:>12} {:>12} {:>12}",
        "operation", "count", "CPU µs", "wall µs"
    );
    for (name, key) in [
        ("Negotiate sign-in (Kerberos AP-REQ)", "signIn"),
        ("connection ticket check (parse + HMAC)", "ticketCheck"),
    ] {
        let r = &report[key];
        println!(
            "{name:<44} {:>12} {:>12.3} {:>12.3}",
            r["count"].as_u64().unwrap_or(0),
            f(&r["cpuMicros"]),
            f(&r["wallMicros"])
        );
    }
    println!(
        "one sign-in costs {} ticket checks of CPU",
        report["signInPerTicketCheckCpu"]
    );
}
