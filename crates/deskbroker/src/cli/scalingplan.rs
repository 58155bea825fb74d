//! `deskbroker scalingplan create|show|list|update|delete|status`: scaling
//! plans (rules A1–A7) through `/api/v1/scalingPlans`. A plan is written as
//! the contract's JSON in a file (`--file PLAN.json`, `-` for stdin);
//! `update` sends the file as a merge patch (only the fields it names).

use std::io::Read;

use anyhow::Context as _;

use super::output::Columns;
use super::{Context, GlobalArgs};

/// Columns of a plan in a table.
const PLAN_COLUMNS: Columns = &["name", "timeZone", "hostPools", "exclusionTag"];
/// Columns of a plan's status, one row per pool.
const STATUS_COLUMNS: Columns = &["hostPool", "phase", "figures", "waitingFor"];

/// Flags of `deskbroker scalingplan`.
#[derive(clap::Args)]
#[command(arg_required_else_help = true)]
pub struct ScalingPlanArgs {
    #[command(flatten)]
    global: GlobalArgs,
    #[command(subcommand)]
    command: ScalingPlanCommand,
}

#[derive(clap::Subcommand)]
enum ScalingPlanCommand {
    /// Create (or replace) a plan from a JSON file.
    Create(FileArgs),
    /// Show a plan.
    Show(NameArg),
    /// List the plans.
    List,
    /// Change the fields a JSON file names (a merge patch).
    Update(FileArgs),
    /// Delete a plan; its pools use their own algorithm again.
    Delete(NameArg),
    /// Each pool of a plan now: phase, used capacity, hosts, what it waits for.
    Status(NameArg),
}

#[derive(clap::Args)]
struct NameArg {
    /// Name of the plan.
    #[arg(long, value_name = "NAME")]
    name: String,
}

#[derive(clap::Args)]
struct FileArgs {
    /// Name of the plan.
    #[arg(long, value_name = "NAME")]
    name: String,
    /// The plan's JSON (`-`: standard input), at most 256 KiB.
    #[arg(long, value_name = "PLAN.json")]
    file: String,
}

/// The largest plan file read (the API's body limit).
const MAX_PLAN_FILE_BYTES: u64 = 256 * 1024;

fn read_plan(path: &str) -> anyhow::Result<serde_json::Value> {
    let mut text = String::new();
    if path == "-" {
        std::io::stdin()
            .take(MAX_PLAN_FILE_BYTES + 1)
            .read_to_string(&mut text)?;
    } else {
        std::fs::File::open(path)
            .with_context(|| format!("cannot open {path}"))?
            .take(MAX_PLAN_FILE_BYTES + 1)
            .read_to_string(&mut text)
            .with_context(|| format!("cannot read {path}"))?;
    }
    anyhow::ensure!(
        text.len() as u64 <= MAX_PLAN_FILE_BYTES,
        "{path} is larger than {MAX_PLAN_FILE_BYTES} bytes"
    );
    serde_json::from_str(&text).with_context(|| format!("{path} is not JSON"))
}

pub async fn run(args: ScalingPlanArgs) -> anyhow::Result<()> {
    let ctx = Context::new(&args.global)?;
    ctx.explain(execute(&ctx, args.command).await)
}

async fn execute(ctx: &Context, command: ScalingPlanCommand) -> anyhow::Result<()> {
    let client = &ctx.client;
    match command {
        ScalingPlanCommand::Create(f) => {
            let body = read_plan(&f.file)?;
            let plan = client.put(&["scalingPlans", &f.name], &body).await?;
            ctx.print(&plan, PLAN_COLUMNS)
        }
        ScalingPlanCommand::Update(f) => {
            let body = read_plan(&f.file)?;
            let plan = client.patch(&["scalingPlans", &f.name], &body).await?;
            ctx.print(&plan, PLAN_COLUMNS)
        }
        ScalingPlanCommand::Show(n) => {
            let plan = client.get(&["scalingPlans", &n.name], &[]).await?;
            ctx.print(&plan, PLAN_COLUMNS)
        }
        ScalingPlanCommand::List => {
            let list = client.list(&["scalingPlans"], &[]).await?;
            ctx.print(&list, PLAN_COLUMNS)
        }
        ScalingPlanCommand::Delete(n) => {
            let answer = client.delete(&["scalingPlans", &n.name], &[]).await?;
            ctx.print(&answer, PLAN_COLUMNS)
        }
        ScalingPlanCommand::Status(n) => {
            let status = client
                .get(&["scalingPlans", &n.name, "status"], &[])
                .await?;
            let rows = serde_json::json!({"value": status["hostPools"].clone()});
            ctx.print(&rows, STATUS_COLUMNS)
        }
    }
}
