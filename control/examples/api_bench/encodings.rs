//! JSON against protobuf (`--encodings N`): the same N pods created and
//! then listed once in each encoding, each in a namespace of its own, as
//! kubectl's typed commands and client-go speak protobuf and kube-rs and
//! `kubectl apply` speak JSON. Reported per encoding and step: wall time,
//! request and response bytes, and the server's CPU seconds.
//!
//! Closed loop: C clients take the next pod from a shared counter until
//! all N are created; bodies are encoded before the clock starts.

use std::sync::atomic::{AtomicUsize, Ordering};

use bosun_control::api::protobuf;

use super::*;

pub(crate) const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

pub(crate) struct EncodingStep {
    pub(crate) encoding: &'static str,
    pub(crate) step: &'static str,
    pub(crate) objects: usize,
    pub(crate) errors: usize,
    pub(crate) sent_bytes: usize,
    pub(crate) received_bytes: usize,
    pub(crate) elapsed: Duration,
    pub(crate) latency: Stats,
    pub(crate) cpu: HashMap<&'static str, f64>,
}

impl EncodingStep {
    pub(crate) fn to_json(&self) -> Value {
        json!({
            "encoding": self.encoding, "step": self.step, "objects": self.objects,
            "errors": self.errors, "sent_bytes": self.sent_bytes,
            "received_bytes": self.received_bytes, "elapsed_s": self.elapsed.as_secs_f64(),
            "latency": self.latency.to_json(), "cpu_s": self.cpu,
        })
    }
}

fn encode(media_type: &str, obj: &Value) -> anyhow::Result<Vec<u8>> {
    Ok(if media_type == PROTOBUF {
        protobuf::encode_object(obj)?
    } else {
        serde_json::to_vec(obj)?
    })
}

/// Creates `n` pods in a fresh namespace and lists them back, all in `media_type`.
pub(crate) async fn encoding_steps(
    args: &Args,
    admin: &Client,
    ws: &[Arc<Worker>],
    ns: &str,
    encoding: &'static str,
    media_type: &'static str,
    n: usize,
) -> anyhow::Result<Vec<EncodingStep>> {
    create_namespace(admin, ns).await?;
    let bodies: Vec<Vec<u8>> = (0..n)
        .map(|k| encode(media_type, &pod(ns, &format!("enc-{k}"), k, 0)))
        .collect::<anyhow::Result<_>>()?;
    let uri = format!("/api/v1/namespaces/{ns}/pods");
    let timeout = Duration::from_secs_f64(args.op_timeout);

    let next = AtomicUsize::new(0);
    let cpu = CpuMeter::start(args);
    let start = Instant::now();
    let tasks = ws.iter().map(|w| {
        let (next, bodies, uri) = (&next, &bodies, &uri);
        async move {
            let mut out = Vec::new();
            loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                let Some(body) = bodies.get(k) else {
                    return out;
                };
                let sent = Instant::now();
                let call = call_as(
                    &w.client,
                    Method::POST,
                    uri,
                    media_type,
                    media_type,
                    body.clone(),
                    StatusCode::CREATED,
                );
                let res = tokio::time::timeout(timeout, call).await;
                out.push((sent.elapsed(), body.len(), res.ok().and_then(Result::ok)));
            }
        }
    });
    let created: Vec<_> = futures::future::join_all(tasks)
        .await
        .into_iter()
        .flatten()
        .collect();
    let create = summarize_step(encoding, "create", start.elapsed(), cpu.stop(), created);

    let cpu = CpuMeter::start(args);
    let start = Instant::now();
    let listed = call_as(
        &ws[0].client,
        Method::GET,
        &uri,
        JSON,
        media_type,
        Vec::new(),
        StatusCode::OK,
    )
    .await;
    let elapsed = start.elapsed();
    let cpu = cpu.stop();
    let mut list = summarize_step(encoding, "list", elapsed, cpu, vec![(elapsed, 0, None)]);
    match listed {
        Ok(body) => {
            let items = if media_type == PROTOBUF {
                protobuf::decode_object(&body)?["items"]
                    .as_array()
                    .map_or(0, Vec::len)
            } else {
                serde_json::from_slice::<ListBody>(&body)?.items.len()
            };
            (list.objects, list.errors, list.received_bytes) = (items, 0, body.len());
        }
        Err(e) => eprintln!("listing {uri} as {media_type}: {e}"),
    }
    Ok(vec![create, list])
}

fn summarize_step(
    encoding: &'static str,
    step: &'static str,
    elapsed: Duration,
    cpu: HashMap<&'static str, f64>,
    calls: Vec<(Duration, usize, Option<Bytes>)>,
) -> EncodingStep {
    let mut latency = Vec::new();
    let (mut objects, mut errors, mut sent_bytes, mut received_bytes) = (0, 0, 0, 0);
    for (took, sent, answer) in calls {
        sent_bytes += sent;
        match answer {
            Some(body) => {
                objects += 1;
                received_bytes += body.len();
                latency.push(took);
            }
            None => errors += 1,
        }
    }
    EncodingStep {
        encoding,
        step,
        objects,
        errors,
        sent_bytes,
        received_bytes,
        elapsed,
        latency: Stats::of(&latency),
        cpu,
    }
}

pub(crate) fn print_encoding_steps(steps: &[EncodingStep]) {
    println!(
        "{:<9} {:<6} {:>7} {:>6} {:>11} {:>11} {:>8} {:>10} {:>8} {:>8} {:>9}",
        "encoding",
        "step",
        "objects",
        "errors",
        "sent B",
        "received B",
        "wall s",
        "objects/s",
        "p50 ms",
        "p99 ms",
        "server s"
    );
    for s in steps {
        println!(
            "{:<9} {:<6} {:>7} {:>6} {:>11} {:>11} {:>8.2} {:>10.0} {:>8} {:>8} {:>9}",
            s.encoding,
            s.step,
            s.objects,
            s.errors,
            s.sent_bytes,
            s.received_bytes,
            s.elapsed.as_secs_f64(),
            s.objects as f64 / s.elapsed.as_secs_f64().max(1e-9),
            fmt_ms(s.latency.p50),
            fmt_ms(s.latency.p99),
            s.cpu
                .get("bosun")
                .map_or("-".to_string(), |c| format!("{c:.2}")),
        );
    }
}
