//! The node's own CPU and memory, read from `/proc/stat` and
//! `/proc/meminfo` (what the kubelet's root cgroup figures amount to on a
//! host that runs nothing but containers and their engine).

/// Busy CPU time of the whole host since boot, in nanoseconds: every
/// column of the `cpu` line of `/proc/stat` but `idle` and `iowait`
/// (`guest` time is already inside `user`), in clock ticks.
pub fn busy_cpu_nanos(proc_stat: &str, ticks_per_second: u64) -> Option<u64> {
    let line = proc_stat.lines().find(|l| l.starts_with("cpu "))?;
    let fields: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    if fields.len() < 4 || ticks_per_second == 0 {
        return None;
    }
    // user nice system idle iowait irq softirq steal [guest guest_nice]
    let busy: u64 = fields
        .iter()
        .take(8)
        .enumerate()
        .filter(|(i, _)| *i != 3 && *i != 4)
        .map(|(_, v)| v)
        .sum();
    Some(busy.saturating_mul(1_000_000_000) / ticks_per_second)
}

/// Memory in use, in bytes: `MemTotal - MemAvailable` of `/proc/meminfo`
/// (what is neither free nor reclaimable cache).
pub fn memory_in_use_bytes(meminfo: &str) -> Option<u64> {
    let field = |name: &str| -> Option<u64> {
        let line = meminfo.lines().find(|l| l.starts_with(name))?;
        let kib: u64 = line[name.len()..]
            .trim_start_matches(':')
            .split_whitespace()
            .next()?
            .parse()
            .ok()?;
        Some(kib * 1024)
    };
    let total = field("MemTotal")?;
    let available = field("MemAvailable")?;
    Some(total.saturating_sub(available))
}

/// Clock ticks per second (`USER_HZ`) as `/proc/stat` counts them.
pub fn ticks_per_second() -> u64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .and_then(|t| u64::try_from(t).ok())
        .filter(|t| *t > 0)
        .unwrap_or(100)
}

/// One reading of the host: busy CPU nanoseconds and memory in use.
pub fn read_host() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    Some((
        busy_cpu_nanos(&stat, ticks_per_second())?,
        memory_in_use_bytes(&meminfo)?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_time_leaves_out_idle_and_iowait() {
        let stat = "cpu  100 20 30 5000 70 1 2 3 40 0\ncpu0 50 10 15 2500 35 0 1 1 20 0\nintr 1\n";
        // 100+20+30+1+2+3 = 156 ticks at 100 Hz = 1.56 s.
        assert_eq!(busy_cpu_nanos(stat, 100), Some(1_560_000_000));
        assert_eq!(busy_cpu_nanos("intr 1\n", 100), None);
        assert_eq!(busy_cpu_nanos("cpu  x y\n", 100), None);
    }

    #[test]
    fn memory_in_use_is_total_minus_available() {
        let meminfo = "MemTotal:        8000000 kB\nMemFree:          100000 kB\nMemAvailable:    6000000 kB\n";
        assert_eq!(memory_in_use_bytes(meminfo), Some(2_000_000 * 1024));
        assert_eq!(memory_in_use_bytes("MemTotal: 1 kB\n"), None);
    }

    #[test]
    fn this_host_can_be_read() {
        let (cpu, mem) = read_host().expect("/proc is readable");
        assert!(cpu > 0 && mem > 0);
    }
}
