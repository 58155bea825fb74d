//! Disk load from `/proc/diskstats`: queue length and read/write latency
//! over the window between two samples (rule H2's `diskQueueLength`,
//! `diskReadLatencyMs`, `diskWriteLatencyMs`).
//!
//! Lines are parsed by `procfs` ([`procfs::DiskStat::from_line`]); this file
//! chooses the devices and does the delta arithmetic.
//!
//! **Which devices count: whole physical disks.** A device counts when
//! `/sys/block/NAME/device` exists: `/sys/block` lists whole disks only (no
//! partitions, whose I/O is already in their disk's line), and only devices
//! backed by hardware (SCSI/SATA, NVMe, virtio, Xen, MMC) have a `device`
//! link. That leaves out loop and ram devices, zram, and the stacked
//! devices — device-mapper (`dm-*`: LVM, LUKS), md RAID, bcache — whose I/O
//! is also counted on the disks below them, so counting both would count it
//! twice. A machine without a readable `/sys/block` reports no disk metrics.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The counters of one device that the disk metrics use, in milliseconds
/// and completed requests since boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiskCounters {
    pub reads: u64,
    pub time_reading_ms: u64,
    pub writes: u64,
    pub time_writing_ms: u64,
    /// Field 14 of the line (11th statistic): weighted milliseconds spent
    /// doing I/O, the integral of the queue length over time.
    pub weighted_io_ms: u64,
}

/// The counters of every counted device at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DiskSnapshot {
    pub disks: HashMap<String, DiskCounters>,
}

/// Disk load over a window, summed over the counted disks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DiskLoad {
    /// Average number of requests in flight (queued or being served).
    pub queue_length: f64,
    /// Average time of a read completed in the window, 0 with no reads.
    pub read_latency_ms: f64,
    /// Average time of a write completed in the window, 0 with no writes.
    pub write_latency_ms: f64,
}

/// `/proc/diskstats` text could not be read as such.
#[derive(Debug, thiserror::Error)]
#[error("/proc/diskstats line {line}: {message}")]
pub struct ParseError {
    pub line: usize,
    pub message: String,
}

impl DiskSnapshot {
    /// Parses `/proc/diskstats` text, keeping the devices `counts` accepts.
    pub fn parse(text: &str, counts: impl Fn(&str) -> bool) -> Result<DiskSnapshot, ParseError> {
        let mut disks = HashMap::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let d = procfs::DiskStat::from_line(line).map_err(|e| ParseError {
                line: i + 1,
                message: e.to_string(),
            })?;
            if counts(&d.name) {
                disks.insert(
                    d.name,
                    DiskCounters {
                        reads: d.reads,
                        time_reading_ms: d.time_reading,
                        writes: d.writes,
                        time_writing_ms: d.time_writing,
                        weighted_io_ms: d.weighted_time_in_progress,
                    },
                );
            }
        }
        Ok(DiskSnapshot { disks })
    }
}

/// The load between two snapshots taken `wall_ms` milliseconds apart.
///
/// queue length = Σ Δweighted_io_ms / wall_ms; read latency =
/// Σ Δtime_reading_ms / Σ Δreads (0 with no reads); write latency likewise.
/// A disk missing from either snapshot, or whose counters went backwards
/// (replaced, or a 32-bit counter wrapped), is left out of this window.
pub fn disk_load(prev: &DiskSnapshot, cur: &DiskSnapshot, wall_ms: f64) -> DiskLoad {
    let (mut weighted, mut reads, mut read_ms, mut writes, mut write_ms) =
        (0u64, 0u64, 0u64, 0u64, 0u64);
    for (name, c) in &cur.disks {
        let Some(p) = prev.disks.get(name) else {
            continue;
        };
        let deltas = (
            c.weighted_io_ms.checked_sub(p.weighted_io_ms),
            c.reads.checked_sub(p.reads),
            c.time_reading_ms.checked_sub(p.time_reading_ms),
            c.writes.checked_sub(p.writes),
            c.time_writing_ms.checked_sub(p.time_writing_ms),
        );
        if let (Some(dw), Some(dr), Some(drm), Some(dwr), Some(dwm)) = deltas {
            weighted = weighted.saturating_add(dw);
            reads = reads.saturating_add(dr);
            read_ms = read_ms.saturating_add(drm);
            writes = writes.saturating_add(dwr);
            write_ms = write_ms.saturating_add(dwm);
        }
    }
    let ratio = |num: u64, den: u64| {
        if den == 0 {
            0.0
        } else {
            num as f64 / den as f64
        }
    };
    DiskLoad {
        queue_length: if wall_ms > 0.0 {
            weighted as f64 / wall_ms
        } else {
            0.0
        },
        read_latency_ms: ratio(read_ms, reads),
        write_latency_ms: ratio(write_ms, writes),
    }
}

/// Decides whether a `/proc/diskstats` device is a whole physical disk, by
/// looking at sysfs (see the file comment).
#[derive(Debug, Clone)]
pub struct PhysicalDisks {
    /// `/sys/block` in production; a directory of the test's making in tests.
    sys_block: PathBuf,
}

impl Default for PhysicalDisks {
    fn default() -> Self {
        PhysicalDisks::new("/sys/block")
    }
}

impl PhysicalDisks {
    pub fn new(sys_block: impl Into<PathBuf>) -> PhysicalDisks {
        PhysicalDisks {
            sys_block: sys_block.into(),
        }
    }

    /// Whether sysfs can tell at all (it is missing in some containers).
    pub fn available(&self) -> bool {
        self.sys_block.is_dir()
    }

    /// Whether `name` (as in `/proc/diskstats`) is a whole physical disk.
    /// sysfs writes the `/` of names like `cciss/c0d0` as `!`.
    pub fn counts(&self, name: &str) -> bool {
        let dir: &Path = &self.sys_block.join(name.replace('/', "!"));
        dir.join("device").exists()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two samples of a machine with two disks (one NVMe with partitions),
    /// LVM on top and a loop device, 10 s apart.
    const BEFORE: &str = "\
   7       0 loop0 100 0 800 50 0 0 0 0 0 40 50 0 0 0 0 0 0
 259       0 nvme0n1 1000 10 80000 2000 500 20 40000 3000 0 4000 9000 0 0 0 0 10 5
 259       1 nvme0n1p1 900 10 72000 1800 480 20 38400 2900 0 3800 8700 0 0 0 0 0 0
   8       0 sda 10 0 80 10 0 0 0 0 0 10 10
 253       0 dm-0 900 0 72000 1900 480 0 38400 3000 0 3800 9000 0 0 0 0 0 0
";
    const AFTER: &str = "\
   7       0 loop0 200 0 1600 150 0 0 0 0 0 80 150 0 0 0 0 0 0
 259       0 nvme0n1 1100 10 88000 2300 700 20 56000 4000 2 5000 14000 0 0 0 0 10 5
 259       1 nvme0n1p1 1000 10 80000 2100 680 20 54400 3900 2 4800 13700 0 0 0 0 0 0
   8       0 sda 10 0 80 10 100 0 800 600 0 200 3000
 253       0 dm-0 1000 0 80000 2200 680 0 54400 4000 2 4800 14000 0 0 0 0 0 0
";

    fn whole_disks(name: &str) -> bool {
        matches!(name, "nvme0n1" | "sda")
    }

    #[test]
    fn deltas_over_whole_disks() {
        let before = DiskSnapshot::parse(BEFORE, whole_disks).unwrap();
        let after = DiskSnapshot::parse(AFTER, whole_disks).unwrap();
        assert_eq!(before.disks.len(), 2);
        assert_eq!(
            before.disks["sda"],
            DiskCounters {
                reads: 10,
                time_reading_ms: 10,
                writes: 0,
                time_writing_ms: 0,
                weighted_io_ms: 10
            },
            "a line of a pre-4.18 kernel (no discard fields) parses"
        );
        let load = disk_load(&before, &after, 10_000.0);
        // weighted: nvme0n1 14000-9000 = 5000, sda 3000-10 = 2990;
        // 7990 ms over 10000 ms of wall time = 0.799 requests in flight.
        assert!((load.queue_length - 0.799).abs() < 1e-9, "{load:?}");
        // reads: nvme0n1 100 reads in 300 ms, sda none: 3 ms a read.
        assert!((load.read_latency_ms - 3.0).abs() < 1e-9, "{load:?}");
        // writes: nvme0n1 200 in 1000 ms, sda 100 in 600 ms: 1600/300.
        assert!(
            (load.write_latency_ms - 1600.0 / 300.0).abs() < 1e-9,
            "{load:?}"
        );
    }

    #[test]
    fn no_io_means_zero_not_nan() {
        let before = DiskSnapshot::parse(BEFORE, whole_disks).unwrap();
        let load = disk_load(&before, &before, 10_000.0);
        assert_eq!(
            load,
            DiskLoad {
                queue_length: 0.0,
                read_latency_ms: 0.0,
                write_latency_ms: 0.0
            }
        );
        let load = disk_load(&before, &before, 0.0);
        assert_eq!(load.queue_length, 0.0);
    }

    #[test]
    fn disks_that_appear_vanish_or_go_backwards_are_left_out() {
        let before = DiskSnapshot::parse(BEFORE, |n| n == "nvme0n1").unwrap();
        let after = DiskSnapshot::parse(AFTER, whole_disks).unwrap();
        // sda is new in `after`: only nvme0n1 counts (5000 ms weighted).
        let load = disk_load(&before, &after, 10_000.0);
        assert!((load.queue_length - 0.5).abs() < 1e-9, "{load:?}");
        // Counters going backwards (the disk was replaced): left out.
        let load = disk_load(&after, &before, 10_000.0);
        assert_eq!(load.queue_length, 0.0);
    }

    #[test]
    fn a_malformed_line_is_an_error_naming_it() {
        let err = DiskSnapshot::parse("   8 0 sda 1 2 3\n", |_| true).unwrap_err();
        assert_eq!(err.line, 1);
        assert!(
            err.to_string().starts_with("/proc/diskstats line 1:"),
            "{err}"
        );
    }

    #[test]
    fn physical_disks_are_whole_disks_with_a_device() {
        let sys = tempfile::tempdir().unwrap();
        for dir in [
            "sda/device",
            "sda/sda1",
            "nvme0n1/device",
            "cciss!c0d0/device",
            "dm-0",
            "loop0",
            "md0",
        ] {
            std::fs::create_dir_all(sys.path().join(dir)).unwrap();
        }
        let disks = PhysicalDisks::new(sys.path());
        assert!(disks.available());
        for name in ["sda", "nvme0n1", "cciss/c0d0"] {
            assert!(disks.counts(name), "{name}");
        }
        for name in ["sda1", "dm-0", "loop0", "md0", "zram0"] {
            assert!(!disks.counts(name), "{name}");
        }
        assert!(!PhysicalDisks::new(sys.path().join("missing")).available());
    }

    #[test]
    fn this_machine_has_a_parsable_diskstats() {
        let text = std::fs::read_to_string("/proc/diskstats").unwrap();
        DiskSnapshot::parse(&text, |_| true).unwrap();
    }
}
