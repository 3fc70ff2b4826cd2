//! Printing and JSON of the results.

use super::*;

pub(crate) fn fmt_ms(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

pub(crate) fn print_load_header() {
    println!(
        "{:<7} {:<6} {:>11} {:>9} {:>8} {:>8} {:>8} {:>8} {:>9} {:>11} {:>11}",
        "target",
        "phase",
        "ok/sent",
        "achieved",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "max ms",
        "svc p99",
        "server cpu",
        "bench cpu"
    );
}

pub(crate) fn print_load(r: &LoadResult) {
    // CPU time per successful operation.
    let per_op = |who: &str| {
        r.cpu
            .get(who)
            .map(|s| format!("{:.0} us/op", s * 1e6 / r.ok.max(1) as f64))
            .unwrap_or_else(|| "-".into())
    };
    println!(
        "{:<7} {:<6} {:>11} {:>7.0}/s {:>8} {:>8} {:>8} {:>8} {:>9} {:>11} {:>11}",
        r.target,
        r.name,
        format!("{}/{}", r.ok, r.attempted),
        r.achieved(),
        fmt_ms(r.latency.p50),
        fmt_ms(r.latency.p90),
        fmt_ms(r.latency.p99),
        fmt_ms(r.latency.max),
        fmt_ms(r.service.p99),
        per_op(r.target),
        per_op("bench"),
    );
    if let Some(e) = &r.first_error {
        println!("        {} errors; first: {e}", r.errors);
    }
    if let Some(other) = r.cpu.get("other") {
        let cores = other / r.elapsed.as_secs_f64().max(1e-9);
        if cores > 0.1 {
            println!("        other processes on the host used {cores:.2} cores meanwhile");
        }
    }
}

pub(crate) fn memory_json(pid: Option<u32>) -> Value {
    match pid {
        Some(p) => json!({"pid": p, "vm_hwm_kib": status_kib(p, "VmHWM"),
                          "vm_rss_kib": status_kib(p, "VmRSS")}),
        None => Value::Null,
    }
}

pub(crate) fn mib(kib: Option<u64>) -> String {
    kib.map(|k| format!("{:.1} MiB", k as f64 / 1024.0))
        .unwrap_or_else(|| "-".into())
}
