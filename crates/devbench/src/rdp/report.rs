//! The report of `deskbroker-devbench rdp`: the medians over rounds of every
//! run's figures (the JSON keeps every run as well), and the comparison
//! table of those medians, printed with the CLI's output formats: one row
//! per measure, one column per target, and deskbroker over HAProxy when
//! both ran. `tsv` prints the same rows without the header.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::Target;
use deskbroker::benchkit::round3;
use deskbroker::output::{self, OutputFormat};

/// Today's date (UTC), for the report: `YYYY-MM-DD`.
pub fn today() -> String {
    chrono::DateTime::<chrono::Utc>::from(std::time::SystemTime::now())
        .date_naive()
        .to_string()
}

/// The median over rounds of every number of every run, by measure
/// and target.
pub fn medians(runs: &[Value]) -> Value {
    let mut grouped = BTreeMap::<(String, String), Vec<&Value>>::new();
    for r in runs {
        let key = (
            r["measure"].as_str().unwrap_or("").to_string(),
            r["target"].as_str().unwrap_or("").to_string(),
        );
        grouped.entry(key).or_default().push(r);
    }
    let mut out = serde_json::Map::new();
    for ((measure, target), rs) in grouped {
        let mut fields = serde_json::Map::new();
        if let Some(Value::Object(first)) = rs.first().copied() {
            for (k, v) in first {
                if k == "round" || !v.is_number() {
                    continue;
                }
                let mut xs: Vec<f64> = rs.iter().filter_map(|r| r[k].as_f64()).collect();
                xs.sort_by(f64::total_cmp);
                let m = if xs.len() % 2 == 1 {
                    xs[xs.len() / 2]
                } else {
                    (xs[xs.len() / 2 - 1] + xs[xs.len() / 2]) / 2.0
                };
                fields.insert(k.clone(), json!(round3(m)));
            }
        }
        let errors: u64 = rs
            .iter()
            .filter_map(|r| r["errors"].as_object())
            .flat_map(|e| e.values().filter_map(Value::as_u64))
            .sum();
        fields.insert("errorsAllRounds".into(), json!(errors));
        let entry = out
            .entry(measure)
            .or_insert_with(|| Value::Object(serde_json::Map::new()));
        entry[target] = Value::Object(fields);
    }
    Value::Object(out)
}

/// The ratios the table shows, each when both of its targets ran: its
/// column, the target measured and the one it is divided by.
const RATIOS: [(&str, Target, Target); 3] = [
    ("deskbrokerPerHaproxy", Target::Deskbroker, Target::Haproxy),
    ("ceilingPerHaproxy", Target::Ceiling, Target::Haproxy),
    ("deskbrokerPerCeiling", Target::Deskbroker, Target::Ceiling),
];

/// The ratios of [`RATIOS`] whose two targets ran.
fn ratios(targets: &[Target]) -> impl Iterator<Item = (&'static str, Target, Target)> + '_ {
    RATIOS
        .into_iter()
        .filter(|(_, a, b)| targets.contains(a) && targets.contains(b))
}

/// The table's columns (keys of the [`rows`]): the measure, each target that
/// ran, and each ratio of [`RATIOS`] whose targets ran.
fn columns(targets: &[Target]) -> Vec<&'static str> {
    let mut c = vec!["measure"];
    c.extend(targets.iter().map(|t| t.name()));
    c.extend(ratios(targets).map(|(name, _, _)| name));
    c
}

/// The comparison of the medians, one row per measure: the figure of each
/// target that ran, formatted to the measure's precision (null where a
/// target has no such figure, e.g. `direct` has no reconnects and no proxy
/// CPU), and the [`RATIOS`] (`0.79x`) whose targets ran.
pub fn rows(r: &Value, targets: &[Target]) -> Value {
    let m = &r["median"];
    let get = |measure: &str, t: Target, field: &str| m[measure][t.name()][field].as_f64();
    // A row without ratios (differences, counts) leaves their cells empty.
    let no_ratios = |line: &mut serde_json::Map<String, Value>| {
        for (name, _, _) in ratios(targets) {
            line.insert(name.into(), Value::Null);
        }
    };
    let mut rows = Vec::new();
    let row = |label: String, measure: &str, field: &str, decimals: usize| {
        let mut line = serde_json::Map::new();
        line.insert("measure".into(), json!(label));
        for &t in targets {
            let cell = get(measure, t, field).map(|x| format!("{x:.decimals$}"));
            line.insert(t.name().into(), json!(cell));
        }
        for (name, a, b) in ratios(targets) {
            let ratio = match (get(measure, a, field), get(measure, b, field)) {
                (Some(x), Some(y)) if y > 0.0 => Some(format!("{:.2}x", x / y)),
                _ => None,
            };
            line.insert(name.into(), json!(ratio));
        }
        Value::Object(line)
    };
    let c = &r["concurrency"];
    rows.push(row(
        format!("new connections/s, new users ({c} clients)"),
        "newUsers",
        "perSecond",
        0,
    ));
    rows.push(row(
        format!("new connections/s, reconnects ({c} clients)"),
        "reconnects",
        "perSecond",
        0,
    ));
    rows.push(row(
        "  first byte p50 ms under load, new users".into(),
        "newUsers",
        "firstByteP50Ms",
        2,
    ));
    rows.push(row(
        "  first byte p99 ms under load, new users".into(),
        "newUsers",
        "firstByteP99Ms",
        2,
    ));
    rows.push(row(
        "  first byte p99 ms under load, reconnects".into(),
        "reconnects",
        "firstByteP99Ms",
        2,
    ));
    rows.push(row(
        "first byte p50 ms, 1 client, new users".into(),
        "latency",
        "firstByteP50Ms",
        3,
    ));
    rows.push(row(
        "first byte p99 ms, 1 client, new users".into(),
        "latency",
        "firstByteP99Ms",
        3,
    ));
    if targets.contains(&Target::Direct) {
        for (q, field) in [("p50", "firstByteP50Ms"), ("p99", "firstByteP99Ms")] {
            let mut line = serde_json::Map::new();
            line.insert(
                "measure".into(),
                json!(format!("  added to direct, {q} ms")),
            );
            let base = get("latency", Target::Direct, field);
            for &t in targets {
                let cell = match (get("latency", t, field), base) {
                    (Some(x), Some(b)) if t != Target::Direct => Some(format!("{:+.3}", x - b)),
                    _ => None,
                };
                line.insert(t.name().into(), json!(cell));
            }
            no_ratios(&mut line);
            rows.push(Value::Object(line));
        }
    }
    rows.push(row(
        format!(
            "relayed MB/s ({} streams, {} MiB)",
            r["streams"], r["streamMib"]
        ),
        "throughput",
        "megabytesPerSecond",
        0,
    ));
    rows.push(row(
        "proxy CPU ms per 1,000 new users".into(),
        "newUsers",
        "proxyCpuMsPer1kConnections",
        1,
    ));
    rows.push(row(
        "proxy CPU ms per 1,000 reconnects".into(),
        "reconnects",
        "proxyCpuMsPer1kConnections",
        1,
    ));
    rows.push(row(
        "proxy CPU s per GB relayed".into(),
        "throughput",
        "proxyCpuSecondsPerGB",
        3,
    ));
    let mut line = serde_json::Map::new();
    line.insert("measure".into(), json!("errors (all runs)"));
    for &t in targets {
        let n: u64 = ["newUsers", "reconnects", "latency", "throughput"]
            .iter()
            .filter_map(|ms| m[*ms][t.name()]["errorsAllRounds"].as_u64())
            .sum();
        line.insert(t.name().into(), json!(n.to_string()));
    }
    no_ratios(&mut line);
    rows.push(Value::Object(line));
    if let Some(p) = r["deskbrokerPool"].as_object() {
        let field = |k: &str| p.get(k).unwrap_or(&Value::Null).to_string();
        for (label, cell) in [
            (
                "deskbroker pool after the run: sessions",
                format!(
                    "{} ({} expected)",
                    field("sessions"),
                    field("expectedSessions")
                ),
            ),
            (
                "  sessions per host",
                format!(
                    "{}..{}",
                    field("minSessionsPerHost"),
                    field("maxSessionsPerHost")
                ),
            ),
        ] {
            let mut line = serde_json::Map::new();
            line.insert("measure".into(), json!(label));
            for &t in targets {
                let cell = (t == Target::Deskbroker).then(|| cell.clone());
                line.insert(t.name().into(), json!(cell));
            }
            no_ratios(&mut line);
            rows.push(Value::Object(line));
        }
    }
    Value::Array(rows)
}

/// Prints the report in `format`: the JSON as it is; or the [`rows`] as a
/// table, under a line saying what ran and above a note of malformed first
/// PDUs, if any; or the rows as tsv.
pub fn print(r: &Value, targets: &[Target], format: OutputFormat) {
    let columns = columns(targets);
    if format == OutputFormat::Json {
        print!("{}", output::render(r, format, &columns));
        return;
    }
    let table = format == OutputFormat::Table;
    if table {
        println!(
            "devbench rdp, {}: {} loopback session hosts, {} CPUs shared by clients, hosts and proxies; \
             median of {} rounds",
            r["date"].as_str().unwrap_or(""),
            r["backends"],
            r["cpus"],
            r["rounds"]
        );
        if let Some(v) = r["haproxyVersion"].as_str() {
            println!("haproxy: {v}");
        }
        println!();
    }
    print!("{}", output::render(&rows(r, targets), format, &columns));
    let bad = r["hostBadRequests"].as_u64().unwrap_or(0);
    if bad > 0 {
        if table {
            println!("\nsession hosts refused {bad} malformed first PDUs");
        } else {
            eprintln!("warning: session hosts refused {bad} malformed first PDUs");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_take_the_middle_round() {
        let runs: Vec<Value> = [3.0, 1.0, 2.0]
            .iter()
            .enumerate()
            .map(|(i, x)| json!({"round": i + 1, "measure": "m", "target": "t", "perSecond": x}))
            .collect();
        assert_eq!(medians(&runs)["m"]["t"]["perSecond"], json!(2.0));
    }

    #[test]
    fn today_is_a_calendar_date() {
        let d = today();
        let parts: Vec<&str> = d.split('-').collect();
        assert_eq!(parts.len(), 3, "{d}");
        assert!(parts[0].parse::<u32>().is_ok_and(|y| y >= 2024), "{d}");
        assert!(
            (1..=12).contains(&parts[1].parse::<u32>().unwrap_or(0)),
            "{d}"
        );
        assert!(
            (1..=31).contains(&parts[2].parse::<u32>().unwrap_or(0)),
            "{d}"
        );
    }

    #[test]
    fn rows_compare_the_targets_that_ran_and_their_ratio() {
        let report = json!({
            "concurrency": 4, "streams": 2, "streamMib": 8,
            "median": {
                "newUsers": {
                    "haproxy": {"perSecond": 200.0, "errorsAllRounds": 0},
                    "deskbroker": {"perSecond": 150.0, "errorsAllRounds": 1},
                },
            },
            "deskbrokerPool": {"sessions": 5, "expectedSessions": 5,
                               "minSessionsPerHost": 2, "maxSessionsPerHost": 3},
        });
        let targets = [Target::Haproxy, Target::Deskbroker];
        let rows = rows(&report, &targets);
        // 11 measures (no direct: nothing added to it), errors, 2 of the pool.
        assert_eq!(rows.as_array().map(Vec::len), Some(14), "{rows}");
        assert_eq!(
            rows[0],
            json!({"measure": "new connections/s, new users (4 clients)",
                   "haproxy": "200", "deskbroker": "150", "deskbrokerPerHaproxy": "0.75x"})
        );
        let table = output::render(&rows, OutputFormat::Table, &columns(&targets));
        assert!(
            table.starts_with("Measure  ")
                && table
                    .lines()
                    .next()
                    .unwrap()
                    .ends_with("DeskbrokerPerHaproxy"),
            "{table}"
        );
        let errors = rows
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["measure"] == "errors (all runs)");
        assert_eq!(errors.unwrap()["deskbroker"], "1");
        let last = rows.as_array().unwrap().last().unwrap().clone();
        assert_eq!(last["deskbroker"], "2..3");
        assert_eq!(last["haproxy"], Value::Null);
    }
}
