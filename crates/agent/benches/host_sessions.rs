//! What reading xrdp's desktops adds to each sample of the agent, against
//! the reading every sample already makes, in one run
//! (`cargo bench -p agent --bench host_sessions`):
//!
//! - `host_sessions/metrics`: the sample's CPU and memory reading
//!   (`/proc/stat`, `/proc/meminfo`), the baseline;
//! - `host_sessions/xrdp`: [`agent::xrdp::read`]: every process's `stat`
//!   and `status` in `/proc`, and, where xrdp's session manager runs, the
//!   arguments of display servers and the kernel's Unix and TCP socket
//!   tables.
//!
//! The figures depend on how many processes (and, on an xrdp host, how
//! many sockets) the machine has: the bench prints both counts.

use criterion::{Criterion, criterion_group, criterion_main};

fn bench(c: &mut Criterion) {
    let processes = procfs::process::all_processes()
        .map(|all| all.count())
        .unwrap_or(0);
    let sockets = procfs::net::unix().map(|u| u.len()).unwrap_or(0);
    let xrdp = agent::xrdp::read().expect("read xrdp's sessions");
    eprintln!(
        "host_sessions: {processes} processes, {sockets} Unix sockets, xrdp: {}",
        match &xrdp {
            None => "no session manager".to_string(),
            Some(list) => format!("{} desktop(s)", list.len()),
        }
    );
    let mut g = c.benchmark_group("host_sessions");
    g.bench_function("metrics", |b| {
        b.iter(|| {
            (
                agent::metrics::read_cpu_ticks().expect("cpu ticks"),
                agent::metrics::read_memory_percent().expect("memory"),
            )
        })
    });
    g.bench_function("xrdp", |b| b.iter(|| agent::xrdp::read().expect("xrdp")));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
