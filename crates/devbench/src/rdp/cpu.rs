//! CPU accounting of the proxies under test in `deskbroker-devbench rdp`: the
//! user and system time a whole process (every thread) has used, from
//! `/proc/PID/stat` through `procfs`, so a run can report the proxy's CPU
//! per connection and per GB relayed.

/// User and system CPU seconds process `pid` has used so far; None where
/// there is no such process (or no `/proc`).
pub fn process_cpu_seconds(pid: u32) -> Option<f64> {
    let pid = i32::try_from(pid).ok()?;
    let stat = procfs::process::Process::new(pid).ok()?.stat().ok()?;
    // utime and stime are in clock ticks (`getconf CLK_TCK`).
    Some((stat.utime + stat.stime) as f64 / procfs::ticks_per_second() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_process_has_used_cpu_and_a_missing_one_has_none() {
        let before = process_cpu_seconds(std::process::id()).expect("this process");
        // Burn CPU until the kernel's counters (in ticks) move.
        let mut x = 0u64;
        while process_cpu_seconds(std::process::id()).expect("this process") <= before {
            for i in 0..1_000_000u64 {
                x = x.wrapping_mul(31).wrapping_add(i);
            }
            std::hint::black_box(x);
        }
        // The kernel's largest pid is below 2^22: this one cannot exist.
        assert_eq!(process_cpu_seconds(u32::MAX >> 1), None);
    }
}
