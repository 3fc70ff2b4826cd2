//! API Priority and Fairness (flowcontrol.apiserver.k8s.io/v1), as
//! kube-apiserver's `WithPriorityAndFairness` filter: every authenticated
//! request is classified to a FlowSchema ([`matching`]) and held to that
//! schema's PriorityLevelConfiguration ([`queueing`]); the answer names
//! both by UID in `X-Kubernetes-PF-FlowSchema-UID` and
//! `X-Kubernetes-PF-PriorityLevel-UID`.
//!
//! - Seats: the server's total (`--max-requests-inflight` +
//!   `--max-mutating-requests-inflight`) is shared out among the levels by
//!   their `nominalConcurrencyShares`: `ceil(total * shares / sum of all
//!   shares)`. `Exempt` levels take no seat. No lending or borrowing
//!   between levels (upstream's `lendablePercent`/`borrowingLimitPercent`
//!   are kept but not acted on).
//! - A watch holds its seat only while it starts (until its answer's head
//!   is ready); the other long-running requests (exec, attach, logs,
//!   port-forward, proxy) are not held to a level, as upstream.
//! - Refused requests get 429 with `Retry-After: 1`; a queued request
//!   waits at most [`MAX_QUEUE_WAIT`].
//! - The configuration is followed from the store; [`ensure`] keeps the
//!   bootstrap objects and the FlowSchemas' `Dangling` condition.

pub mod ensure;
pub mod matching;
pub mod queueing;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use http::{HeaderMap, HeaderValue};
use k8s_openapi::api::flowcontrol::v1 as fc;

use self::matching::RequestDigest;
use self::queueing::{Level, LimitResponse, Refused, Seat};
use crate::store::Store;

pub use self::matching::Asked;

/// The response headers naming the request's schema and level.
pub const FLOW_SCHEMA_UID_HEADER: &str = "X-Kubernetes-PF-FlowSchema-UID";
pub const PRIORITY_LEVEL_UID_HEADER: &str = "X-Kubernetes-PF-PriorityLevel-UID";

/// The longest a request waits in a queue (upstream: a quarter of the
/// request timeout of 60s).
pub const MAX_QUEUE_WAIT: Duration = Duration::from_secs(15);

/// `--max-requests-inflight` and `--max-mutating-requests-inflight`
/// defaults: their sum is the seats shared out among the levels.
pub const DEFAULT_MAX_REQUESTS_INFLIGHT: usize = 400;
pub const DEFAULT_MAX_MUTATING_REQUESTS_INFLIGHT: usize = 200;

/// One FlowSchema as classification uses it.
struct Schema {
    name: String,
    uid: String,
    precedence: i32,
    level: String,
    distinguisher: Option<String>,
    spec: fc::FlowSchemaSpec,
}

/// One priority level: its UID and, unless exempt, its dispatch state.
struct PriorityLevel {
    uid: String,
    limited: Option<Arc<Level>>,
}

#[derive(Default)]
struct Config {
    /// In matching order: precedence, then name.
    schemas: Vec<Schema>,
    levels: HashMap<String, PriorityLevel>,
}

/// The API server's flow control: the configuration followed from the
/// store and each limited level's seats and queues.
pub struct FlowControl {
    store: Arc<dyn Store>,
    /// The seats shared out among the levels.
    server_seats: usize,
    config: RwLock<Arc<Config>>,
    /// Levels by name, kept across reloads so seats held and requests
    /// waiting survive a change of configuration.
    states: Mutex<HashMap<String, Arc<Level>>>,
    /// Counts by (priority level, flow schema), read by `/metrics`.
    stats: Mutex<HashMap<(String, String), FlowStats>>,
}

/// What happened to one flow schema's requests at one level.
#[derive(Debug, Clone, Default)]
pub struct FlowStats {
    pub dispatched: u64,
    /// By upstream's reason: `queue-full`, `time-out`, `cancelled`.
    pub rejected: HashMap<&'static str, u64>,
    /// Waiting for a seat now.
    pub waiting: i64,
}

/// What a request was classified to, and the seat it holds (none for an
/// exempt level; dropped to give it back).
pub struct Admitted {
    pub flow_schema_uid: String,
    pub priority_level_uid: String,
    pub seat: Option<Seat>,
}

impl Admitted {
    /// Names the schema and level in a response's headers.
    pub fn annotate(&self, headers: &mut HeaderMap) {
        annotate(headers, &self.flow_schema_uid, &self.priority_level_uid);
    }
}

fn annotate(headers: &mut HeaderMap, schema: &str, level: &str) {
    for (name, value) in [
        (FLOW_SCHEMA_UID_HEADER, schema),
        (PRIORITY_LEVEL_UID_HEADER, level),
    ] {
        if let Ok(v) = HeaderValue::from_str(value) {
            headers.insert(name, v);
        }
    }
}

/// A refused request: its classification, for the 429's headers.
pub struct Rejected {
    pub flow_schema_uid: String,
    pub priority_level_uid: String,
}

impl Rejected {
    pub fn annotate(&self, headers: &mut HeaderMap) {
        annotate(headers, &self.flow_schema_uid, &self.priority_level_uid);
    }
}

fn limit_response(l: &fc::LimitedPriorityLevelConfiguration) -> LimitResponse {
    let r = &l.limit_response;
    match r.queuing.as_ref().filter(|_| r.type_ == "Queue") {
        Some(q) => LimitResponse::Queue {
            queues: q.queues.unwrap_or(64).max(1) as usize,
            hand_size: q.hand_size.unwrap_or(8).max(1) as usize,
            queue_length_limit: q.queue_length_limit.unwrap_or(50).max(1) as usize,
        },
        None => LimitResponse::Reject,
    }
}

/// `ceil(total * shares / sum)`.
pub fn nominal_seats(total: usize, shares: i64, sum: i64) -> usize {
    if sum <= 0 || shares <= 0 {
        return 0;
    }
    let product = total as i64 * shares;
    ((product + sum - 1) / sum) as usize
}

fn shares(pl: &fc::PriorityLevelConfiguration) -> i64 {
    let limited = pl.spec.limited.as_ref();
    let exempt = pl.spec.exempt.as_ref();
    limited
        .and_then(|l| l.nominal_concurrency_shares)
        .or_else(|| exempt.and_then(|e| e.nominal_concurrency_shares))
        .unwrap_or(0) as i64
}

impl FlowControl {
    pub fn new(store: Arc<dyn Store>, server_seats: usize) -> Arc<FlowControl> {
        Arc::new(FlowControl {
            store,
            server_seats,
            config: RwLock::new(Arc::default()),
            states: Mutex::new(HashMap::new()),
            stats: Mutex::new(HashMap::new()),
        })
    }

    /// Takes in the stored configuration: the levels' seats and the
    /// schemas in matching order (schemas of missing levels left out).
    fn apply(&self, schemas: &[fc::FlowSchema], levels: &[fc::PriorityLevelConfiguration]) {
        let sum: i64 = levels.iter().map(shares).sum();
        let mut states = self.states.lock().expect("flowcontrol states");
        let mut config = Config::default();
        for pl in levels {
            let name = pl.metadata.name.clone().unwrap_or_default();
            let uid = pl.metadata.uid.clone().unwrap_or_default();
            let spec = &pl.spec;
            let limited = match (spec.type_.as_str(), spec.limited.as_ref()) {
                ("Limited", Some(l)) => {
                    let seats = nominal_seats(self.server_seats, shares(pl), sum);
                    let response = limit_response(l);
                    let level = states
                        .entry(name.clone())
                        .or_insert_with(|| Level::new(seats, response))
                        .clone();
                    level.configure(seats, response);
                    Some(level)
                }
                _ => None,
            };
            config.levels.insert(name, PriorityLevel { uid, limited });
        }
        states.retain(|name, _| config.levels.get(name).is_some_and(|l| l.limited.is_some()));
        for fs in schemas {
            let spec = fs.spec.clone();
            let level = spec.priority_level_configuration.name.clone();
            if !config.levels.contains_key(&level) {
                continue;
            }
            config.schemas.push(Schema {
                name: fs.metadata.name.clone().unwrap_or_default(),
                uid: fs.metadata.uid.clone().unwrap_or_default(),
                precedence: spec.matching_precedence.unwrap_or(1000),
                level,
                distinguisher: spec.distinguisher_method.as_ref().map(|m| m.type_.clone()),
                spec,
            });
        }
        config
            .schemas
            .sort_by(|a, b| (a.precedence, &a.name).cmp(&(b.precedence, &b.name)));
        *self.config.write().expect("flowcontrol config") = Arc::new(config);
    }

    /// Classifies a request and waits for its seat. `Ok(None)`: nothing
    /// matched (no configuration yet), the request goes on unlimited.
    pub async fn admit(&self, d: &RequestDigest) -> Result<Option<Admitted>, Rejected> {
        let config = self.config.read().expect("flowcontrol config").clone();
        let Some(schema) = config
            .schemas
            .iter()
            .find(|s| matching::schema_matches(&s.spec, d))
        else {
            return Ok(None);
        };
        let level = &config.levels[&schema.level];
        let mut admitted = Admitted {
            flow_schema_uid: schema.uid.clone(),
            priority_level_uid: level.uid.clone(),
            seat: None,
        };
        let labels = (schema.level.as_str(), schema.name.as_str());
        let Some(limited) = &level.limited else {
            self.record(labels, |s| s.dispatched += 1);
            return Ok(Some(admitted));
        };
        let flow = queueing::flow_hash(
            &schema.name,
            d.distinguisher(schema.distinguisher.as_deref()),
        );
        self.record(labels, |s| s.waiting += 1);
        let got = limited.acquire(flow, MAX_QUEUE_WAIT).await;
        self.record(labels, |s| s.waiting -= 1);
        match got {
            Ok(seat) => {
                self.record(labels, |s| s.dispatched += 1);
                admitted.seat = Some(seat);
                Ok(Some(admitted))
            }
            Err(why) => {
                self.record(labels, |s| {
                    *s.rejected.entry(why.reason()).or_default() += 1
                });
                if why != Refused::QueueFull {
                    tracing::debug!(schema = %schema.name, reason = why.reason(), "flowcontrol: refused");
                }
                Err(Rejected {
                    flow_schema_uid: admitted.flow_schema_uid,
                    priority_level_uid: admitted.priority_level_uid,
                })
            }
        }
    }

    fn record(&self, (level, schema): (&str, &str), change: impl FnOnce(&mut FlowStats)) {
        let mut stats = self.stats.lock().expect("flowcontrol stats");
        change(
            stats
                .entry((level.to_string(), schema.to_string()))
                .or_default(),
        );
    }

    /// The counts by (priority level, flow schema), for `/metrics`.
    pub fn stats(&self) -> Vec<((String, String), FlowStats)> {
        let stats = self.stats.lock().expect("flowcontrol stats");
        stats.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }

    /// Each limited level's seats, for `/metrics`.
    pub fn seats(&self) -> Vec<(String, usize)> {
        let states = self.states.lock().expect("flowcontrol states");
        states
            .iter()
            .map(|(name, l)| (name.clone(), l.counts().0))
            .collect()
    }

    /// Reads both kinds, keeps the bootstrap objects and the schemas'
    /// conditions ([`ensure`]), and takes in what is stored.
    async fn reload(&self) -> Result<u64, crate::store::StoreError> {
        let (schemas, levels, rev) = ensure::ensure(self.store.as_ref()).await?;
        self.apply(&schemas, &levels);
        Ok(rev)
    }

    /// Loads the configuration (creating the bootstrap objects) before
    /// the server answers.
    pub async fn start(&self) -> Result<(), crate::store::StoreError> {
        self.reload().await.map(|_| ())
    }

    /// Follows the store's changes to both kinds until the store closes.
    pub async fn follow(self: Arc<Self>) {
        let prefixes = [
            ensure::prefix("flowschemas"),
            ensure::prefix("prioritylevelconfigurations"),
        ];
        crate::store::reload_on_change(self.store.as_ref(), &prefixes, "flowcontrol", || {
            self.reload()
        })
        .await
    }
}

#[cfg(test)]
mod tests;
