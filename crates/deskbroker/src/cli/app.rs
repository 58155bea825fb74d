//! `deskbroker app …` and `deskbroker appgroup …`: published applications
//! (`/api/v1/hostPools/{pool}/applications`, rule F1), their launch files
//! (F2), and application groups (`/api/v1/applicationGroups`), which give
//! a pool's desktop or some of its applications to users and groups.

use std::io::Read as _;

use anyhow::Context as _;
use base64::Engine as _;

use super::output::Columns;
use super::{Body, Context, GlobalArgs};

/// Columns of an application in a table.
const APP_COLUMNS: Columns = &[
    "alias",
    "hostPool",
    "displayName",
    "program",
    "commandLinePolicy",
    "folder",
];
/// Columns of an application group in a table.
const GROUP_COLUMNS: Columns = &[
    "name",
    "hostPool",
    "kind",
    "applications",
    "assignedUsers",
    "assignedGroups",
];
/// The largest icon file read (the broker's bound on an icon).
const MAX_ICON_FILE_BYTES: u64 = 64 * 1024;

/// Flags of `deskbroker app`.
#[derive(clap::Args)]
#[command(arg_required_else_help = true)]
pub struct AppArgs {
    #[command(flatten)]
    global: GlobalArgs,
    #[command(subcommand)]
    command: AppCommand,
}

#[derive(clap::Subcommand)]
enum AppCommand {
    /// Publish an application of a host pool (or replace it: every field
    /// not given takes its default).
    Create(AppCreateArgs),
    /// Show an application, with its icons.
    Show(AppName),
    /// List a host pool's applications.
    List(PoolName),
    /// Stop publishing an application.
    Delete(AppName),
    /// Print (or save with --file) the .rdp file that opens the
    /// application: as a RemoteApp window, or as the session's only
    /// program on an AlternateShell pool.
    RdpFile(AppFileArgs),
}

#[derive(clap::Args)]
struct PoolName {
    /// Name of the host pool.
    #[arg(long, value_name = "NAME")]
    host_pool: String,
}

#[derive(clap::Args)]
struct AppName {
    /// Name of the host pool.
    #[arg(long, value_name = "NAME")]
    host_pool: String,
    /// The application's alias (letters, digits, '.', '-', '_').
    #[arg(long, value_name = "ALIAS")]
    alias: String,
}

#[derive(clap::Args)]
struct AppCreateArgs {
    #[command(flatten)]
    name: AppName,
    /// What users see.
    #[arg(long, value_name = "TEXT")]
    display_name: String,
    /// What the host runs: a path on the host, or ||alias for a program
    /// the host itself publishes (RDS's RemoteApp list).
    #[arg(long, value_name = "PATH|||ALIAS")]
    program: String,
    /// None (the default: no arguments), Any (a launch may give any), or
    /// Fixed (always --command-line).
    #[arg(long, value_name = "None|Any|Fixed")]
    command_line_policy: Option<String>,
    /// The arguments of a Fixed policy.
    #[arg(long, value_name = "ARGS")]
    command_line: Option<String>,
    /// The icon: a PNG or ICO file of at most 64 KiB (its kind read from
    /// its first bytes).
    #[arg(long, value_name = "FILE")]
    icon: Vec<std::path::PathBuf>,
    /// A file extension the application opens (.txt); repeatable.
    #[arg(long = "file-extension", value_name = ".EXT")]
    file_extensions: Vec<String>,
    /// The folder users see it in.
    #[arg(long, value_name = "NAME")]
    folder: Option<String>,
}

#[derive(clap::Args)]
struct AppFileArgs {
    #[command(flatten)]
    name: AppName,
    /// Write the file here instead of printing it.
    #[arg(long, value_name = "PATH")]
    file: Option<std::path::PathBuf>,
    /// Put a signed connection ticket for this user in the file (admin or
    /// portal credentials); the user must be given the application by an
    /// application group.
    #[arg(long, value_name = "USER")]
    user: Option<String>,
    /// The user's groups, comma-separated, when the broker has no directory.
    #[arg(long, value_name = "GROUP,…", value_delimiter = ',', requires = "user")]
    groups: Vec<String>,
    /// A file through the broker's RD Gateway (needs --user).
    #[arg(long, requires = "user")]
    gateway: bool,
    /// Arguments to open the application with (its policy must be Any).
    #[arg(long, value_name = "ARGS")]
    command_line: Option<String>,
}

/// Flags of `deskbroker appgroup`.
#[derive(clap::Args)]
#[command(arg_required_else_help = true)]
pub struct AppGroupArgs {
    #[command(flatten)]
    global: GlobalArgs,
    #[command(subcommand)]
    command: AppGroupCommand,
}

#[derive(clap::Subcommand)]
enum AppGroupCommand {
    /// Create an application group (or replace it: the lists given are
    /// the whole lists).
    Create(GroupCreateArgs),
    /// Show an application group.
    Show(GroupName),
    /// List the application groups.
    List,
    /// Delete an application group: its users lose what it gave them.
    Delete(GroupName),
}

#[derive(clap::Args)]
struct GroupName {
    /// Name of the application group.
    #[arg(long, value_name = "NAME")]
    name: String,
}

#[derive(clap::Args)]
struct GroupCreateArgs {
    #[command(flatten)]
    name: GroupName,
    /// The host pool it belongs to.
    #[arg(long, value_name = "NAME")]
    host_pool: String,
    /// Desktop (gives the pool's desktop) or RemoteApp (gives the
    /// applications listed).
    #[arg(long, value_name = "Desktop|RemoteApp")]
    kind: String,
    /// What users see as its name.
    #[arg(long, value_name = "TEXT")]
    friendly_name: Option<String>,
    /// An application alias of the pool it gives (RemoteApp); repeatable
    /// or comma-separated.
    #[arg(long = "application", value_name = "ALIAS", value_delimiter = ',')]
    applications: Vec<String>,
    /// A user it is given to; repeatable or comma-separated.
    #[arg(long = "user", value_name = "USER", value_delimiter = ',')]
    users: Vec<String>,
    /// A group whose members it is given to; repeatable (names may hold
    /// commas and spaces, so one a flag).
    #[arg(long = "group", value_name = "GROUP")]
    groups: Vec<String>,
}

/// The icon file at `path` as the body's field it goes in (`iconPng` or
/// `iconIco`, from its first bytes) and its base64.
fn read_icon(path: &std::path::Path) -> anyhow::Result<(&'static str, String)> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .with_context(|| format!("cannot open {}", path.display()))?
        .take(MAX_ICON_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read {}", path.display()))?;
    anyhow::ensure!(
        bytes.len() as u64 <= MAX_ICON_FILE_BYTES,
        "{} is larger than {MAX_ICON_FILE_BYTES} bytes, the most an icon may be",
        path.display()
    );
    let field = if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        "iconPng"
    } else if bytes.starts_with(&[0, 0, 1, 0]) {
        "iconIco"
    } else {
        anyhow::bail!("{} is neither a PNG nor an ICO file", path.display());
    };
    Ok((
        field,
        base64::engine::general_purpose::STANDARD.encode(&bytes),
    ))
}

pub async fn run(args: AppArgs) -> anyhow::Result<()> {
    let ctx = Context::new(&args.global)?;
    ctx.explain(execute(&ctx, args.command).await)
}

pub async fn run_groups(args: AppGroupArgs) -> anyhow::Result<()> {
    let ctx = Context::new(&args.global)?;
    ctx.explain(execute_groups(&ctx, args.command).await)
}

async fn execute(ctx: &Context, command: AppCommand) -> anyhow::Result<()> {
    let client = &ctx.client;
    match command {
        AppCommand::Create(a) => {
            let mut body = Body::default();
            body.set("displayName", Some(a.display_name))
                .set("program", Some(a.program))
                .set("commandLinePolicy", a.command_line_policy)
                .set("commandLine", a.command_line)
                .set("folder", a.folder);
            if !a.file_extensions.is_empty() {
                body.set("fileExtensions", Some(a.file_extensions));
            }
            for path in &a.icon {
                let (field, icon) = read_icon(path)?;
                body.set(field, Some(icon));
            }
            let segments = [
                "hostPools",
                &a.name.host_pool,
                "applications",
                &a.name.alias,
            ];
            let app = client.put(&segments, &body.into_value()).await?;
            ctx.print(&app, APP_COLUMNS)
        }
        AppCommand::Show(n) => {
            let segments = ["hostPools", &n.host_pool, "applications", &n.alias];
            let app = client.get(&segments, &[]).await?;
            ctx.print(&app, APP_COLUMNS)
        }
        AppCommand::List(p) => {
            let list = client
                .list(&["hostPools", &p.host_pool, "applications"], &[])
                .await?;
            ctx.print(&list, APP_COLUMNS)
        }
        AppCommand::Delete(n) => {
            let segments = ["hostPools", &n.host_pool, "applications", &n.alias];
            let answer = client.delete(&segments, &[]).await?;
            ctx.print(&answer, APP_COLUMNS)
        }
        AppCommand::RdpFile(f) => {
            let mut query = Vec::new();
            if let Some(user) = &f.user {
                query.push(("user", user.as_str()));
            }
            let groups = f.groups.join(",");
            if !groups.is_empty() {
                query.push(("groups", groups.as_str()));
            }
            if f.gateway {
                query.push(("gateway", "true"));
            }
            if let Some(args) = &f.command_line {
                query.push(("commandLine", args.as_str()));
            }
            let segments = [
                "hostPools",
                &f.name.host_pool,
                "applications",
                &f.name.alias,
                "rdpFile",
            ];
            let text = client.get_text(&segments, &query).await?;
            match f.file {
                Some(path) => {
                    std::fs::write(&path, &text)
                        .with_context(|| format!("cannot write {}", path.display()))?;
                    eprintln!(
                        "wrote the .rdp file of application {} of host pool {} to {} ({} bytes)",
                        f.name.alias,
                        f.name.host_pool,
                        path.display(),
                        text.len()
                    );
                    Ok(())
                }
                None => {
                    print!("{text}");
                    Ok(())
                }
            }
        }
    }
}

async fn execute_groups(ctx: &Context, command: AppGroupCommand) -> anyhow::Result<()> {
    let client = &ctx.client;
    match command {
        AppGroupCommand::Create(g) => {
            let mut body = Body::default();
            body.set("hostPool", Some(g.host_pool))
                .set("kind", Some(g.kind))
                .set("friendlyName", g.friendly_name)
                .set("applications", Some(g.applications))
                .set("assignedUsers", Some(g.users))
                .set("assignedGroups", Some(g.groups));
            let group = client
                .put(&["applicationGroups", &g.name.name], &body.into_value())
                .await?;
            ctx.print(&group, GROUP_COLUMNS)
        }
        AppGroupCommand::Show(n) => {
            let group = client.get(&["applicationGroups", &n.name], &[]).await?;
            ctx.print(&group, GROUP_COLUMNS)
        }
        AppGroupCommand::List => {
            let list = client.list(&["applicationGroups"], &[]).await?;
            ctx.print(&list, GROUP_COLUMNS)
        }
        AppGroupCommand::Delete(n) => {
            let answer = client.delete(&["applicationGroups", &n.name], &[]).await?;
            ctx.print(&answer, GROUP_COLUMNS)
        }
    }
}
