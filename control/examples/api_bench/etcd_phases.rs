//! The same create and update workload written straight into etcd.

use super::*;

pub(crate) fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// One transaction that writes `value` at `key` if its create revision
/// (`expected_mod` None) or mod revision (Some) is what the caller knows,
/// as kube-apiserver's etcd3 storage does for create and update.
pub(crate) fn etcd_txn(key: &str, value: &[u8], expected_mod: Option<i64>) -> Vec<u8> {
    let compare = match expected_mod {
        None => {
            json!({"key": b64(key.as_bytes()), "target": "CREATE", "result": "EQUAL", "create_revision": "0"})
        }
        Some(rev) => {
            json!({"key": b64(key.as_bytes()), "target": "MOD", "result": "EQUAL", "mod_revision": rev.to_string()})
        }
    };
    serde_json::to_vec(&json!({
        "compare": [compare],
        "success": [{"request_put": {"key": b64(key.as_bytes()), "value": b64(value)}}],
    }))
    .expect("json")
}

/// The revision a successful transaction wrote at, or why it did not.
pub(crate) fn etcd_txn_revision(body: &[u8]) -> Result<i64, String> {
    let v: Value = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    if v["succeeded"] != json!(true) {
        return Err(format!(
            "transaction did not succeed: {}",
            String::from_utf8_lossy(body)
        ));
    }
    let rev = &v["header"]["revision"];
    rev.as_str()
        .and_then(|s| s.parse().ok())
        .or_else(|| rev.as_i64())
        .ok_or_else(|| format!("no revision in {}", String::from_utf8_lossy(body)))
}

pub(crate) fn etcd_key(ns: &str, name: &str) -> String {
    format!("/registry/pods/{ns}/{name}")
}

pub(crate) async fn etcd_create(args: &Args, ws: &[Arc<Worker>], ns: &str) -> LoadResult {
    let cpu = CpuMeter::start(args);
    let ns = ns.to_string();
    let (runs, start) = open_loop(
        ws,
        args.rate,
        Duration::from_secs_f64(args.duration),
        Duration::from_secs_f64(args.op_timeout),
        move |w: Arc<Worker>, wi, k| {
            let name = pod_name(wi, k);
            let key = etcd_key(&ns, &name);
            let value = serde_json::to_vec(&pod(&ns, &name, k, 0)).expect("json");
            let body = etcd_txn(&key, &value, None);
            async move {
                let resp = call(
                    &w.client,
                    Method::POST,
                    "/v3/kv/txn",
                    JSON,
                    body,
                    StatusCode::OK,
                )
                .await?;
                let rev = etcd_txn_revision(&resp)?;
                w.created.lock().expect("lock").push((key, rev));
                Ok(())
            }
        },
    )
    .await;
    summarize("create", "etcd", args.rate, runs, start, cpu.stop())
}

pub(crate) async fn etcd_update(args: &Args, ws: &[Arc<Worker>], ns: &str) -> LoadResult {
    let cpu = CpuMeter::start(args);
    let ns = ns.to_string();
    let (runs, start) = open_loop(
        ws,
        args.rate,
        Duration::from_secs_f64(args.duration),
        Duration::from_secs_f64(args.op_timeout),
        move |w: Arc<Worker>, _wi, k| {
            let slot = {
                let created = w.created.lock().expect("lock");
                (!created.is_empty()).then(|| {
                    let i = k % created.len();
                    (i, created[i].clone())
                })
            };
            let ns = ns.clone();
            async move {
                let (i, (key, rev)) = slot.ok_or("this client created no key to update")?;
                let name = key.rsplit('/').next().unwrap_or_default().to_string();
                // The whole object, its label changed: what an update stores.
                let value = serde_json::to_vec(&pod(&ns, &name, k, k + 1)).expect("json");
                let body = etcd_txn(&key, &value, Some(rev));
                let resp = call(
                    &w.client,
                    Method::POST,
                    "/v3/kv/txn",
                    JSON,
                    body,
                    StatusCode::OK,
                )
                .await?;
                let new_rev = etcd_txn_revision(&resp)?;
                w.created.lock().expect("lock")[i].1 = new_rev;
                Ok(())
            }
        },
    )
    .await;
    summarize("update", "etcd", args.rate, runs, start, cpu.stop())
}
