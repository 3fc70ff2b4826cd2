//! The phases against bosun: create, update, list, watch.

use super::*;

pub(crate) async fn bosun_create(args: &Args, ws: &[Arc<Worker>], ns: &str) -> LoadResult {
    let cpu = CpuMeter::start(args);
    let ns = ns.to_string();
    let (runs, start) = open_loop(
        ws,
        args.rate,
        Duration::from_secs_f64(args.duration),
        Duration::from_secs_f64(args.op_timeout),
        move |w: Arc<Worker>, wi, k| {
            let name = pod_name(wi, k);
            let body = serde_json::to_vec(&pod(&ns, &name, k, 0)).expect("json");
            let uri = format!("/api/v1/namespaces/{ns}/pods");
            async move {
                call(
                    &w.client,
                    Method::POST,
                    &uri,
                    JSON,
                    body,
                    StatusCode::CREATED,
                )
                .await?;
                w.created.lock().expect("lock").push((name, 0));
                Ok(())
            }
        },
    )
    .await;
    summarize("create", "bosun", args.rate, runs, start, cpu.stop())
}

pub(crate) async fn bosun_update(args: &Args, ws: &[Arc<Worker>], ns: &str) -> LoadResult {
    let cpu = CpuMeter::start(args);
    let ns = ns.to_string();
    let (runs, start) = open_loop(
        ws,
        args.rate,
        Duration::from_secs_f64(args.duration),
        Duration::from_secs_f64(args.op_timeout),
        move |w: Arc<Worker>, _wi, k| {
            let name = {
                let created = w.created.lock().expect("lock");
                (!created.is_empty()).then(|| created[k % created.len()].0.clone())
            };
            let body =
                serde_json::to_vec(&json!({"metadata": {"labels": {"rev": (k + 1).to_string()}}}))
                    .expect("json");
            let ns = ns.clone();
            async move {
                let name = name.ok_or("this client created no pod to update")?;
                let uri = format!("/api/v1/namespaces/{ns}/pods/{name}");
                call(
                    &w.client,
                    Method::PATCH,
                    &uri,
                    "application/merge-patch+json",
                    body,
                    StatusCode::OK,
                )
                .await
                .map(drop)
            }
        },
    )
    .await;
    summarize("update", "bosun", args.rate, runs, start, cpu.stop())
}

pub(crate) struct ListResult {
    pub(crate) name: String,
    pub(crate) clients: usize,
    pub(crate) lists: usize,
    pub(crate) errors: usize,
    pub(crate) items: usize,
    pub(crate) bytes: usize,
    pub(crate) elapsed: Duration,
    pub(crate) latency: Stats,
    pub(crate) cpu: HashMap<&'static str, f64>,
}

impl ListResult {
    pub(crate) fn to_json(&self) -> Value {
        json!({
            "variant": self.name, "clients": self.clients, "lists": self.lists,
            "errors": self.errors, "items_per_list": self.items / self.lists.max(1),
            "bytes_per_list": self.bytes / self.lists.max(1),
            "elapsed_s": self.elapsed.as_secs_f64(),
            "objects_per_s": self.items as f64 / self.elapsed.as_secs_f64().max(1e-9),
            "latency": self.latency.to_json(),
            "cpu_seconds": self.cpu,
        })
    }
}

#[derive(serde::Deserialize)]
pub(crate) struct ListBody {
    pub(crate) items: Vec<serde::de::IgnoredAny>,
}

/// `rounds` lists of `query` from each of `clients`, all at once.
pub(crate) async fn bosun_list(
    args: &Args,
    ws: &[Arc<Worker>],
    ns: &str,
    name: &str,
    selector: Option<&str>,
    rounds: usize,
) -> ListResult {
    let uri = match selector {
        Some(s) => format!("/api/v1/namespaces/{ns}/pods?labelSelector={s}"),
        None => format!("/api/v1/namespaces/{ns}/pods"),
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let timeout = Duration::from_secs_f64(args.op_timeout);
    let cpu = CpuMeter::start(args);
    let start = Instant::now();
    let tasks = ws.iter().map(|w| {
        let uri = uri.clone();
        async move {
            let mut out = Vec::new();
            for _ in 0..rounds {
                if Instant::now() > deadline {
                    break;
                }
                let sent = Instant::now();
                let res = tokio::time::timeout(timeout, get(&w.client, &uri)).await;
                out.push((sent.elapsed(), res.ok().and_then(Result::ok)));
            }
            out
        }
    });
    let all: Vec<_> = futures::future::join_all(tasks)
        .await
        .into_iter()
        .flatten()
        .collect();
    let elapsed = start.elapsed();
    let cpu = cpu.stop();
    let mut latency = Vec::new();
    let (mut items, mut bytes, mut errors) = (0, 0, 0);
    for (took, body) in all {
        match body.and_then(|b| Some((b.len(), serde_json::from_slice::<ListBody>(&b).ok()?))) {
            Some((len, list)) => {
                latency.push(took);
                items += list.items.len();
                bytes += len;
            }
            None => errors += 1,
        }
    }
    ListResult {
        name: name.to_string(),
        clients: ws.len(),
        lists: latency.len(),
        errors,
        items,
        bytes,
        elapsed,
        latency: Stats::of(&latency),
        cpu,
    }
}

/// When one create was sent and when it was acknowledged.
pub(crate) type SentAcked = Option<(Instant, Instant)>;

pub(crate) struct WatchResult {
    pub(crate) watchers: usize,
    pub(crate) events: usize,
    pub(crate) open_time: Duration,
    pub(crate) create: LoadResult,
    /// Receipt at a watcher minus the create's acknowledgement.
    pub(crate) after_ack: Stats,
    /// Receipt at a watcher minus the create's send time.
    pub(crate) after_send: Stats,
    /// Pairs where the event reached the watcher before the creator heard back.
    pub(crate) before_ack: usize,
    pub(crate) expected_pairs: usize,
    pub(crate) received_pairs: usize,
    pub(crate) complete_watchers: usize,
    pub(crate) duplicates: usize,
    pub(crate) cpu: HashMap<&'static str, f64>,
}

impl WatchResult {
    pub(crate) fn to_json(&self) -> Value {
        json!({
            "watchers": self.watchers, "events": self.events,
            "open_all_watches_s": self.open_time.as_secs_f64(),
            "create": self.create.to_json(),
            "delivery_after_ack": self.after_ack.to_json(),
            "delivery_after_send": self.after_send.to_json(),
            "pairs_delivered_before_ack": self.before_ack,
            "expected_pairs": self.expected_pairs, "received_pairs": self.received_pairs,
            "watchers_with_every_event": self.complete_watchers,
            "duplicate_events": self.duplicates,
            "every_watcher_got_every_event": self.complete_watchers == self.watchers
                && self.received_pairs == self.expected_pairs,
            "cpu_seconds": self.cpu,
        })
    }
}

pub(crate) async fn bosun_watch(
    args: &Args,
    config: &Config,
    ns: &str,
) -> anyhow::Result<WatchResult> {
    let m = args.watch_events;
    let ar = ApiResource {
        group: String::new(),
        version: "v1".into(),
        api_version: "v1".into(),
        kind: "Pod".into(),
        plural: "pods".into(),
    };
    // Start every watch at the namespace's current revision, so nothing is missed.
    let lister = new_client(config)?;
    let list = get(&lister, &format!("/api/v1/namespaces/{ns}/pods?limit=1"))
        .await
        .map_err(anyhow::Error::msg)?;
    let list: Value = serde_json::from_slice(&list)?;
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .context("the list has no resourceVersion")?
        .to_string();

    let cpu = CpuMeter::start(args);
    let watch_client = new_client(config)?;
    let api: Api<DynamicObject> = Api::namespaced_with(watch_client, ns, &ar);
    let wp = WatchParams::default().timeout(290);
    let open_start = Instant::now();
    let streams = futures::future::join_all((0..args.watchers).map(|_| api.watch(&wp, &rv))).await;
    let open_time = open_start.elapsed();
    let deadline = Instant::now()
        + Duration::from_secs_f64(m as f64 / args.watch_rate + args.op_timeout + 20.0);
    let mut watchers = Vec::new();
    for s in streams {
        let stream = s.context("opening a watch")?;
        watchers.push(tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            let mut got: Vec<(usize, Instant)> = Vec::new();
            let mut seen = vec![false; m];
            let mut distinct = 0;
            while distinct < m {
                let next = tokio::time::timeout_at(deadline.into(), stream.next()).await;
                let Ok(Some(event)) = next else { break };
                let now = Instant::now();
                let Ok(WatchEvent::Added(obj)) = event else {
                    continue;
                };
                let idx = obj
                    .metadata
                    .name
                    .as_deref()
                    .and_then(|n| n.strip_prefix("watch-"))
                    .and_then(|i| i.parse::<usize>().ok())
                    .filter(|i| *i < m);
                if let Some(i) = idx {
                    if !seen[i] {
                        seen[i] = true;
                        distinct += 1;
                    }
                    got.push((i, now));
                }
            }
            got
        }));
    }

    // Creator: a few clients at the modest rate; event i is sent at start + i/rate.
    let creators = workers(config, args.concurrency.clamp(1, 4))?;
    warm_up(&creators, &format!("/api/v1/namespaces/{ns}")).await?;
    let times: Arc<Mutex<Vec<SentAcked>>> = Arc::new(Mutex::new(vec![None; m]));
    let n = creators.len();
    let ns_owned = ns.to_string();
    let times_w = times.clone();
    let (runs, start) = open_loop(
        &creators,
        args.watch_rate,
        Duration::from_secs_f64((m as f64 - 0.5) / args.watch_rate),
        Duration::from_secs_f64(args.op_timeout),
        move |w: Arc<Worker>, wi, k| {
            let i = wi + k * n;
            let name = format!("watch-{i}");
            let body = serde_json::to_vec(&pod(&ns_owned, &name, i, 0)).expect("json");
            let uri = format!("/api/v1/namespaces/{ns_owned}/pods");
            let times = times_w.clone();
            async move {
                let sent = Instant::now();
                call(
                    &w.client,
                    Method::POST,
                    &uri,
                    JSON,
                    body,
                    StatusCode::CREATED,
                )
                .await?;
                let acked = Instant::now();
                if let Some(slot) = times.lock().expect("lock").get_mut(i) {
                    *slot = Some((sent, acked));
                }
                Ok(())
            }
        },
    )
    .await;
    let create = summarize(
        "watch-create",
        "bosun",
        args.watch_rate,
        runs,
        start,
        HashMap::new(),
    );

    let mut after_ack = Vec::new();
    let mut after_send = Vec::new();
    let (mut before_ack, mut received, mut complete, mut duplicates) = (0, 0, 0, 0);
    let times = times.lock().expect("lock").clone();
    let expected: usize = times.iter().filter(|t| t.is_some()).count();
    for w in watchers {
        let got = w.await.context("watcher task")?;
        let mut seen = vec![false; m];
        let mut distinct = 0;
        for (i, at) in got {
            if seen[i] {
                duplicates += 1;
                continue;
            }
            seen[i] = true;
            let Some((sent, acked)) = times[i] else {
                continue;
            };
            distinct += 1;
            after_send.push(at.saturating_duration_since(sent));
            if at < acked {
                before_ack += 1;
            }
            after_ack.push(at.saturating_duration_since(acked));
        }
        received += distinct;
        if distinct == expected {
            complete += 1;
        }
    }
    Ok(WatchResult {
        watchers: args.watchers,
        events: expected,
        open_time,
        create,
        after_ack: Stats::of(&after_ack),
        after_send: Stats::of(&after_send),
        before_ack,
        expected_pairs: expected * args.watchers,
        received_pairs: received,
        complete_watchers: complete,
        duplicates,
        cpu: cpu.stop(),
    })
}
