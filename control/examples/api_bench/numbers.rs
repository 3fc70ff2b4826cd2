//! Latency statistics and CPU/memory readings of processes and the host.

use super::*;

/// Latency percentiles of one set of samples, in milliseconds.
#[derive(Debug, Clone, Default)]
pub(crate) struct Stats {
    pub(crate) count: usize,
    pub(crate) p50: f64,
    pub(crate) p90: f64,
    pub(crate) p99: f64,
    pub(crate) max: f64,
    pub(crate) mean: f64,
}

impl Stats {
    pub(crate) fn of(samples: &[Duration]) -> Stats {
        if samples.is_empty() {
            return Stats::default();
        }
        let mut ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1e3).collect();
        ms.sort_by(f64::total_cmp);
        // Nearest rank: the smallest sample with at least q of them at or below it.
        let rank = |q: f64| ms[((q * ms.len() as f64).ceil() as usize).clamp(1, ms.len()) - 1];
        Stats {
            count: ms.len(),
            p50: rank(0.50),
            p90: rank(0.90),
            p99: rank(0.99),
            max: ms[ms.len() - 1],
            mean: ms.iter().sum::<f64>() / ms.len() as f64,
        }
    }

    pub(crate) fn to_json(&self) -> Value {
        let r = |x: f64| (x * 1000.0).round() / 1000.0;
        json!({"count": self.count, "p50_ms": r(self.p50), "p90_ms": r(self.p90),
               "p99_ms": r(self.p99), "max_ms": r(self.max), "mean_ms": r(self.mean)})
    }
}

/// CPU time (user + system) a process has used so far, from /proc.
pub(crate) fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold spaces: skip past it.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // Fields 14 and 15 of stat(5) (utime, stime) are 11 and 12 after the name.
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / 100.0) // USER_HZ is 100 on Linux
}

/// A `Vm*` line of /proc/PID/status, in KiB.
pub(crate) fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// CPU time all processes of the host have used so far (busy time of every core).
pub(crate) fn host_busy_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let ticks: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|t| t.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal: all but idle and iowait.
    let busy: u64 = ticks
        .iter()
        .take(8)
        .enumerate()
        .filter(|(i, _)| *i != 3 && *i != 4)
        .map(|(_, t)| t)
        .sum();
    Some(busy as f64 / 100.0)
}

/// CPU used by the processes we watch over one phase, and by everything
/// else on the host ("other": a phase it is large for was disturbed).
pub(crate) struct CpuMeter {
    pub(crate) pids: Vec<(&'static str, u32)>,
    pub(crate) start: Vec<Option<f64>>,
    pub(crate) host: Option<f64>,
}

impl CpuMeter {
    pub(crate) fn start(args: &Args) -> CpuMeter {
        let mut pids = vec![("bench", std::process::id())];
        if let Some(p) = args.server_pid {
            pids.push(("bosun", p));
        }
        if let Some(p) = args.etcd_pid {
            pids.push(("etcd", p));
        }
        let start = pids.iter().map(|(_, p)| cpu_seconds(*p)).collect();
        CpuMeter {
            pids,
            start,
            host: host_busy_seconds(),
        }
    }

    /// CPU seconds each process used since `start`.
    pub(crate) fn stop(self) -> HashMap<&'static str, f64> {
        let mut used: HashMap<&'static str, f64> = self
            .pids
            .iter()
            .zip(self.start)
            .filter_map(|((name, pid), start)| Some((*name, cpu_seconds(*pid)? - start?)))
            .collect();
        if let (Some(before), Some(after)) = (self.host, host_busy_seconds()) {
            let ours: f64 = used.values().sum();
            used.insert("other", (after - before - ours).max(0.0));
        }
        used
    }
}
