//! The host's metrics, sampled from `/proc` (through `procfs`) at every
//! interval: CPU and memory use in percent, and disk load ([`diskstats`]).
//!
//! CPU and disk figures are averages over the window since the previous
//! sample, so the sampler keeps the previous counters. CPU % is the busy
//! share of all CPUs' time: (user + nice + system + irq + softirq + steal) /
//! (that + idle + iowait) from the `cpu` line of `/proc/stat` (guest time is
//! already inside user). Memory % is (MemTotal − MemAvailable) / MemTotal
//! from `/proc/meminfo`: memory the kernel could not hand to a new program
//! without swapping, so page cache does not count as used.
//!
//! A metric that cannot be read is left out of the heartbeat (rule H2: a
//! factor whose metric the heartbeat lacks is left out) and logged once.
//!
//! [`diskstats`]: crate::diskstats

use std::time::{Duration, Instant};

use procfs::{Current as _, CurrentSI as _};

use crate::diskstats::{self, DiskLoad, DiskSnapshot, PhysicalDisks};

/// What one sample found; `None` for what could not be read.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SystemSample {
    pub cpu_percent: Option<f64>,
    pub memory_percent: Option<f64>,
    pub disk: Option<DiskLoad>,
}

/// CPU time counters of `/proc/stat`'s `cpu` line, in clock ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuTicks {
    pub busy: u64,
    pub idle: u64,
}

impl CpuTicks {
    fn from_procfs(t: &procfs::CpuTime) -> CpuTicks {
        let busy = t.user
            + t.nice
            + t.system
            + t.irq.unwrap_or(0)
            + t.softirq.unwrap_or(0)
            + t.steal.unwrap_or(0);
        CpuTicks {
            busy,
            idle: t.idle + t.iowait.unwrap_or(0),
        }
    }

    /// The busy share of the time between `prev` and `self`, in percent;
    /// `None` when no tick passed (a window too short to say anything).
    pub fn percent_since(&self, prev: &CpuTicks) -> Option<f64> {
        let busy = self.busy.checked_sub(prev.busy)?;
        let idle = self.idle.checked_sub(prev.idle)?;
        let total = busy + idle;
        (total > 0).then(|| 100.0 * busy as f64 / total as f64)
    }
}

/// Reads the `cpu` line of `/proc/stat`.
pub fn read_cpu_ticks() -> Result<CpuTicks, procfs::ProcError> {
    Ok(CpuTicks::from_procfs(
        &procfs::KernelStats::current()?.total,
    ))
}

/// Memory in use, in percent, from `/proc/meminfo`.
pub fn read_memory_percent() -> Result<f64, String> {
    let m = procfs::Meminfo::current().map_err(|e| e.to_string())?;
    let available = m
        .mem_available
        .ok_or("/proc/meminfo has no MemAvailable (Linux before 3.14)")?;
    if m.mem_total == 0 {
        return Err("/proc/meminfo says MemTotal is 0".into());
    }
    Ok(100.0 * m.mem_total.saturating_sub(available) as f64 / m.mem_total as f64)
}

/// Keeps the previous counters between samples.
#[derive(Debug)]
pub struct SystemSampler {
    prev_cpu: Option<CpuTicks>,
    prev_disk: Option<(DiskSnapshot, Instant)>,
    disks: PhysicalDisks,
    /// Metrics whose failure was already logged, so a machine that lacks
    /// one (no `/sys/block` in a container) says so once.
    warned: Vec<&'static str>,
}

impl Default for SystemSampler {
    fn default() -> Self {
        SystemSampler::new()
    }
}

impl SystemSampler {
    /// Reads the first counters: the first [`sample`](Self::sample) covers
    /// the time from here.
    pub fn new() -> SystemSampler {
        let mut s = SystemSampler {
            prev_cpu: None,
            prev_disk: None,
            disks: PhysicalDisks::default(),
            warned: Vec::new(),
        };
        s.prev_cpu = s.cpu_ticks();
        s.prev_disk = s.disk_snapshot().map(|d| (d, Instant::now()));
        s
    }

    /// The metrics over the window since the previous sample (or since
    /// [`new`](Self::new)).
    pub fn sample(&mut self) -> SystemSample {
        let cpu = self.cpu_ticks();
        let cpu_percent = match (&self.prev_cpu, &cpu) {
            (Some(prev), Some(cur)) => cur.percent_since(prev),
            _ => None,
        };
        if cpu.is_some() {
            self.prev_cpu = cpu;
        }

        let memory_percent = match read_memory_percent() {
            Ok(p) => Some(p),
            Err(e) => {
                self.warn_once("memory", format_args!("cannot read memory use: {e}"));
                None
            }
        };

        let now = Instant::now();
        let disk = self.disk_snapshot();
        let disk_load = match (&self.prev_disk, &disk) {
            (Some((prev, then)), Some(cur)) => {
                let wall_ms = now.duration_since(*then).as_secs_f64() * 1000.0;
                Some(diskstats::disk_load(prev, cur, wall_ms))
            }
            _ => None,
        };
        if let Some(d) = disk {
            self.prev_disk = Some((d, now));
        }

        SystemSample {
            cpu_percent,
            memory_percent,
            disk: disk_load,
        }
    }

    fn cpu_ticks(&mut self) -> Option<CpuTicks> {
        match read_cpu_ticks() {
            Ok(t) => Some(t),
            Err(e) => {
                self.warn_once(
                    "cpu",
                    format_args!("cannot read CPU use from /proc/stat: {e}"),
                );
                None
            }
        }
    }

    fn disk_snapshot(&mut self) -> Option<DiskSnapshot> {
        if !self.disks.available() {
            self.warn_once(
                "disk",
                format_args!("no /sys/block: cannot tell physical disks, no disk metrics sent"),
            );
            return None;
        }
        let text = match std::fs::read_to_string("/proc/diskstats") {
            Ok(t) => t,
            Err(e) => {
                self.warn_once("disk", format_args!("cannot read /proc/diskstats: {e}"));
                return None;
            }
        };
        let disks = self.disks.clone();
        match DiskSnapshot::parse(&text, |name| disks.counts(name)) {
            Ok(s) => Some(s),
            Err(e) => {
                self.warn_once("disk", format_args!("{e}"));
                None
            }
        }
    }

    fn warn_once(&mut self, metric: &'static str, message: std::fmt::Arguments<'_>) {
        if self.warned.contains(&metric) {
            tracing::debug!("{message}");
        } else {
            tracing::warn!("{message}; this metric is left out of heartbeats");
            self.warned.push(metric);
        }
    }
}

/// Samples the machine over `window` (blocking the thread meanwhile): the
/// figures one heartbeat would carry after that interval.
pub fn sample_once(window: Duration) -> SystemSample {
    let mut sampler = SystemSampler::new();
    std::thread::sleep(window);
    sampler.sample()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// The `cpu` line of /proc/stat read the plain way: (busy, total) ticks.
    fn proc_stat_cpu() -> (u64, u64) {
        let text = std::fs::read_to_string("/proc/stat").unwrap();
        let line = text.lines().find(|l| l.starts_with("cpu ")).unwrap();
        let v: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .map(|f| f.parse().unwrap())
            .collect();
        // user nice system idle iowait irq softirq steal guest guest_nice
        let idle = v[3] + v[4];
        let busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
        (busy, busy + idle)
    }

    fn proc_meminfo_percent() -> f64 {
        let text = std::fs::read_to_string("/proc/meminfo").unwrap();
        let kb = |key: &str| -> f64 {
            let line = text.lines().find(|l| l.starts_with(key)).unwrap();
            line.split_whitespace().nth(1).unwrap().parse().unwrap()
        };
        let (total, available) = (kb("MemTotal:"), kb("MemAvailable:"));
        100.0 * (total - available) / total
    }

    /// One comparison over a one-second window: the agent's CPU and memory
    /// figures and the ones read directly around them.
    fn compare_once() -> ((f64, f64), (f64, f64)) {
        let (busy0, total0) = proc_stat_cpu();
        let mut sampler = SystemSampler::new();
        std::thread::sleep(Duration::from_secs(1));
        let sample = sampler.sample();
        let (busy1, total1) = proc_stat_cpu();
        let memory_direct = proc_meminfo_percent();
        let cpu_direct = 100.0 * (busy1 - busy0) as f64 / (total1 - total0) as f64;
        let cpu = sample.cpu_percent.expect("CPU sampled");
        let memory = sample.memory_percent.expect("memory sampled");
        assert!(cpu > 0.0 && cpu <= 100.0, "{cpu}");
        assert!(memory > 0.0 && memory < 100.0, "{memory}");
        ((cpu, cpu_direct), (memory, memory_direct))
    }

    #[test]
    fn cpu_and_memory_agree_with_proc_read_directly() {
        // Keep one CPU busy so the figure is not a trivial 0.
        let stop = Arc::new(AtomicBool::new(false));
        let spinner = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut x = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                }
            })
        };
        // The direct reads bracket the agent's by microseconds, so the two
        // windows differ by a tick or two (1 % of 2 CPUs' 200 ticks a
        // second). On a busy machine a thread may be descheduled between
        // reads for longer; a second or third window then agrees.
        let mut seen = Vec::new();
        let mut agreed = false;
        for _ in 0..3 {
            let ((cpu, cpu_direct), (memory, memory_direct)) = compare_once();
            seen.push(format!(
                "CPU agent {cpu:.1} % vs /proc/stat {cpu_direct:.1} %; \
                 memory agent {memory:.1} % vs /proc/meminfo {memory_direct:.1} %"
            ));
            if (cpu - cpu_direct).abs() < 5.0 && (memory - memory_direct).abs() < 2.0 {
                agreed = true;
                break;
            }
        }
        stop.store(true, Ordering::Relaxed);
        spinner.join().unwrap();
        assert!(agreed, "{seen:#?}");
    }

    #[test]
    fn sample_once_reports_disk_load_on_a_machine_with_sysfs() {
        let sample = sample_once(Duration::from_millis(200));
        assert!(sample.cpu_percent.is_some() || sample.memory_percent.is_some());
        if PhysicalDisks::default().available() {
            let disk = sample.disk.expect("disk sampled");
            assert!(disk.queue_length >= 0.0 && disk.queue_length.is_finite());
            assert!(disk.read_latency_ms >= 0.0 && disk.write_latency_ms >= 0.0);
        }
    }

    #[test]
    fn cpu_percent_arithmetic() {
        let a = CpuTicks {
            busy: 100,
            idle: 300,
        };
        let b = CpuTicks {
            busy: 130,
            idle: 370,
        };
        // 30 busy ticks out of 100.
        assert_eq!(b.percent_since(&a), Some(30.0));
        assert_eq!(a.percent_since(&a), None, "no tick passed");
        assert_eq!(a.percent_since(&b), None, "counters went backwards");
    }
}
