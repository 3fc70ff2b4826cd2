//! The open-loop driver: each client on a fixed schedule, latency from the scheduled time.

use super::*;

#[derive(Default)]
pub(crate) struct WorkerRun {
    /// From the scheduled send time to the response (queueing included).
    pub(crate) latency: Vec<Duration>,
    /// From the actual send time to the response.
    pub(crate) service: Vec<Duration>,
    pub(crate) errors: usize,
    pub(crate) first_error: Option<String>,
    pub(crate) last_done: Option<Instant>,
}

pub(crate) struct LoadResult {
    pub(crate) name: String,
    pub(crate) target: &'static str,
    pub(crate) rate: f64,
    pub(crate) attempted: usize,
    pub(crate) ok: usize,
    pub(crate) errors: usize,
    pub(crate) first_error: Option<String>,
    /// From the first scheduled send to the last response.
    pub(crate) elapsed: Duration,
    pub(crate) latency: Stats,
    pub(crate) service: Stats,
    pub(crate) cpu: HashMap<&'static str, f64>,
}

impl LoadResult {
    pub(crate) fn achieved(&self) -> f64 {
        self.ok as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    pub(crate) fn to_json(&self) -> Value {
        let cpu: serde_json::Map<String, Value> = self
            .cpu
            .iter()
            .map(|(k, v)| (k.to_string(), json!((v * 1000.0).round() / 1000.0)))
            .collect();
        json!({
            "phase": self.name, "target": self.target, "target_rate": self.rate,
            "attempted": self.attempted, "ok": self.ok, "errors": self.errors,
            "first_error": self.first_error,
            "elapsed_s": self.elapsed.as_secs_f64(), "achieved_per_s": self.achieved(),
            "latency": self.latency.to_json(), "service_time": self.service.to_json(),
            "cpu_seconds": cpu,
        })
    }
}

/// Runs `op(state, worker, k)` on every worker's open-loop schedule: worker
/// w sends its k-th request at `start + (w + k * workers) / rate`, until
/// `duration` has passed; requests still scheduled after the hard deadline
/// are not sent.
pub(crate) async fn open_loop<S, F, Fut>(
    states: &[Arc<S>],
    rate: f64,
    duration: Duration,
    op_timeout: Duration,
    op: F,
) -> (Vec<WorkerRun>, Instant)
where
    S: Send + Sync + 'static,
    F: Fn(Arc<S>, usize, usize) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = Result<(), String>> + Send + 'static,
{
    let workers = states.len();
    let start = Instant::now() + Duration::from_millis(20);
    let end = start + duration;
    let hard_deadline = end + op_timeout + Duration::from_secs(5);
    let mut tasks = Vec::new();
    for (w, state) in states.iter().enumerate() {
        let state = state.clone();
        let op = op.clone();
        tasks.push(tokio::spawn(async move {
            let mut run = WorkerRun::default();
            for k in 0.. {
                let intended = start + Duration::from_secs_f64((w + k * workers) as f64 / rate);
                if intended >= end || Instant::now() >= hard_deadline {
                    break;
                }
                tokio::time::sleep_until(intended.into()).await;
                let sent = Instant::now();
                let outcome = tokio::time::timeout(op_timeout, op(state.clone(), w, k)).await;
                let done = Instant::now();
                run.last_done = Some(done);
                let error = match outcome {
                    Ok(Ok(())) => {
                        run.latency.push(done - intended);
                        run.service.push(done - sent);
                        continue;
                    }
                    Ok(Err(e)) => e,
                    Err(_) => format!("timed out after {op_timeout:?}"),
                };
                run.errors += 1;
                run.first_error.get_or_insert(error);
            }
            run
        }));
    }
    let mut runs = Vec::new();
    for t in tasks {
        runs.push(t.await.expect("worker task"));
    }
    (runs, start)
}

pub(crate) fn summarize(
    name: &str,
    target: &'static str,
    rate: f64,
    runs: Vec<WorkerRun>,
    start: Instant,
    cpu: HashMap<&'static str, f64>,
) -> LoadResult {
    let mut latency = Vec::new();
    let mut service = Vec::new();
    let mut errors = 0;
    let mut first_error = None;
    let mut last = start;
    for run in runs {
        latency.extend(run.latency);
        service.extend(run.service);
        errors += run.errors;
        first_error = first_error.or(run.first_error);
        last = last.max(run.last_done.unwrap_or(start));
    }
    LoadResult {
        name: name.to_string(),
        target,
        rate,
        attempted: latency.len() + errors,
        ok: latency.len(),
        errors,
        first_error,
        elapsed: last - start,
        latency: Stats::of(&latency),
        service: Stats::of(&service),
        cpu,
    }
}
