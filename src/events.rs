//! Recording Events the way client-go's `EventRecorder` does: one
//! background task per recorder posts them in order, and repeats are
//! aggregated instead of piling up.
//!
//! - The same event (involved object, type, reason, message, source) seen
//!   again bumps `count` and `lastTimestamp` of the Event already stored.
//! - More than [`SIMILAR_LIMIT`] events of one object with the same reason
//!   but different messages within [`SIMILAR_WINDOW`] collapse into one
//!   Event whose message reads `(combined from similar events): <latest>`.
//!
//! A lost event is logged, never an error for the caller: events are
//! informational.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use chrono::{SecondsFormat, Utc};
use k8s_openapi::api::core::v1::{Event, ObjectReference};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::json;
use tokio::sync::mpsc;

/// Distinct messages with one reason before they are combined.
pub const SIMILAR_LIMIT: usize = 10;
/// The window in which similar events are counted.
pub const SIMILAR_WINDOW: Duration = Duration::from_secs(600);
/// How many aggregation entries a recorder remembers.
const CACHE_LIMIT: usize = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    Normal,
    Warning,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// Who reports the events: `source.component` (and `source.host` for
/// node agents).
#[derive(Debug, Clone)]
pub struct EventSource {
    pub component: String,
    pub host: Option<String>,
}

struct Record {
    object: ObjectReference,
    type_: EventType,
    reason: String,
    message: String,
}

/// Posts events for one source. Cheap to clone; every clone feeds the
/// same background task.
#[derive(Clone)]
pub struct EventRecorder {
    queue: mpsc::Sender<Record>,
}

impl EventRecorder {
    /// Starts the recorder's task on the current tokio runtime.
    pub fn new(client: Client, source: EventSource) -> Self {
        let (queue, rx) = mpsc::channel(1024);
        tokio::spawn(post_events(client, source, rx));
        EventRecorder { queue }
    }

    /// Queues an event about `object`; never blocks.
    pub fn record(
        &self,
        object: &ObjectReference,
        type_: EventType,
        reason: &str,
        message: impl Into<String>,
    ) {
        let record = Record {
            object: object.clone(),
            type_,
            reason: reason.to_string(),
            message: message.into(),
        };
        if self.queue.try_send(record).is_err() {
            tracing::warn!(reason, "event queue full; dropping an event");
        }
    }
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct ObjectKey {
    kind: String,
    namespace: String,
    name: String,
    uid: String,
    field_path: String,
}

impl ObjectKey {
    fn of(o: &ObjectReference) -> Self {
        ObjectKey {
            kind: o.kind.clone().unwrap_or_default(),
            namespace: o.namespace.clone().unwrap_or_default(),
            name: o.name.clone().unwrap_or_default(),
            uid: o.uid.clone().unwrap_or_default(),
            field_path: o.field_path.clone().unwrap_or_default(),
        }
    }
}

/// Identifies one stored Event that repeats update.
#[derive(Clone, PartialEq, Eq, Hash)]
struct EventKey {
    object: ObjectKey,
    type_: EventType,
    reason: String,
    message: String,
}

struct Stored {
    name: String,
    count: i32,
    used: Instant,
}

/// Distinct messages seen recently for one (object, type, reason).
struct Similar {
    messages: Vec<String>,
    since: Instant,
}

/// The aggregation state: what client-go calls the EventCorrelator.
#[derive(Default)]
struct Correlator {
    stored: HashMap<EventKey, Stored>,
    similar: HashMap<(ObjectKey, EventType, String), Similar>,
}

const COMBINED: &str = "(combined from similar events): ";

impl Correlator {
    /// The key the event is stored under and the message it carries,
    /// after combining similar events.
    fn correlate(&mut self, r: &Record, now: Instant) -> (EventKey, String) {
        let object = ObjectKey::of(&r.object);
        let similar = self
            .similar
            .entry((object.clone(), r.type_, r.reason.clone()))
            .or_insert_with(|| Similar {
                messages: Vec::new(),
                since: now,
            });
        if now.duration_since(similar.since) > SIMILAR_WINDOW {
            similar.messages.clear();
            similar.since = now;
        }
        if !similar.messages.contains(&r.message) {
            similar.messages.push(r.message.clone());
        }
        let combined = similar.messages.len() > SIMILAR_LIMIT;
        let key = EventKey {
            object,
            type_: r.type_,
            reason: r.reason.clone(),
            message: if combined {
                COMBINED.to_string()
            } else {
                r.message.clone()
            },
        };
        let message = if combined {
            format!("{COMBINED}{}", r.message)
        } else {
            r.message.clone()
        };
        (key, message)
    }

    fn remember(&mut self, key: EventKey, name: String, count: i32, now: Instant) {
        if self.stored.len() >= CACHE_LIMIT {
            // Forget the least recently used half; their next repeat starts
            // a fresh Event, which is what client-go's LRU does too.
            let mut used: Vec<Instant> = self.stored.values().map(|s| s.used).collect();
            used.sort();
            let cutoff = used[used.len() / 2];
            self.stored.retain(|_, s| s.used > cutoff);
            self.similar
                .retain(|_, s| now.duration_since(s.since) <= SIMILAR_WINDOW);
        }
        self.stored.insert(
            key,
            Stored {
                name,
                count,
                used: now,
            },
        );
    }
}

async fn post_events(client: Client, source: EventSource, mut rx: mpsc::Receiver<Record>) {
    let mut correlator = Correlator::default();
    while let Some(record) = rx.recv().await {
        let now = Instant::now();
        let (key, message) = correlator.correlate(&record, now);
        let namespace = record
            .object
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let api: Api<Event> = Api::namespaced(client.clone(), &namespace);
        let stamp = Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true);
        if let Some(stored) = correlator.stored.get(&key) {
            let count = stored.count + 1;
            let patch = json!({"count": count, "lastTimestamp": stamp, "message": message});
            match api
                .patch(&stored.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {
                    let name = stored.name.clone();
                    correlator.remember(key, name, count, now);
                    continue;
                }
                Err(kube::Error::Api(e)) if e.code == 404 => {} // expired: start anew
                Err(e) => {
                    tracing::debug!(error = %e, reason = record.reason, "updating an event");
                    continue;
                }
            }
        }
        let object_name = record.object.name.clone().unwrap_or_default();
        let name = format!(
            "{object_name}.{:x}",
            Utc::now().timestamp_nanos_opt().unwrap_or_default()
        );
        let mut source_json = json!({"component": source.component});
        if let Some(host) = &source.host {
            source_json["host"] = json!(host);
        }
        let event = json!({
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": record.object,
            "reason": record.reason,
            "message": message,
            "type": record.type_.as_str(),
            "source": source_json,
            "reportingComponent": source.component,
            "reportingInstance": source.host.clone().unwrap_or_else(|| source.component.clone()),
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        });
        let event: Event = match serde_json::from_value(event) {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!(error = %e, "building an event");
                continue;
            }
        };
        match api.create(&PostParams::default(), &event).await {
            Ok(_) => correlator.remember(key, name, 1, now),
            Err(e) => tracing::debug!(error = %e, reason = record.reason, "recording an event"),
        }
    }
}

/// A reference to `obj` for [`EventRecorder::record`].
pub fn reference_to<K>(obj: &K) -> ObjectReference
where
    K: kube::Resource<DynamicType = ()>,
{
    obj.object_ref(&())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(message: &str) -> Record {
        Record {
            object: ObjectReference {
                kind: Some("Pod".into()),
                namespace: Some("default".into()),
                name: Some("web".into()),
                uid: Some("u1".into()),
                ..Default::default()
            },
            type_: EventType::Warning,
            reason: "Unhealthy".into(),
            message: message.into(),
        }
    }

    #[test]
    fn repeats_share_one_key() {
        let mut c = Correlator::default();
        let now = Instant::now();
        let (a, _) = c.correlate(&record("probe failed"), now);
        let (b, m) = c.correlate(&record("probe failed"), now);
        assert!(a == b);
        assert_eq!(m, "probe failed");
    }

    #[test]
    fn many_distinct_messages_are_combined() {
        let mut c = Correlator::default();
        let now = Instant::now();
        let mut keys = Vec::new();
        for i in 0..=SIMILAR_LIMIT {
            keys.push(c.correlate(&record(&format!("failed {i}")), now));
        }
        let (first, m0) = &keys[0];
        assert_eq!(m0, "failed 0");
        let (last, m) = keys.last().unwrap();
        assert!(first != last);
        assert_eq!(m, &format!("{COMBINED}failed {SIMILAR_LIMIT}"));
        // The next one lands on the same combined Event.
        let (next, _) = c.correlate(&record("failed again"), now);
        assert!(&next == last);
        // After the window, messages stand alone again.
        let later = now + SIMILAR_WINDOW + Duration::from_secs(1);
        let (_, m) = c.correlate(&record("failed late"), later);
        assert_eq!(m, "failed late");
    }
}
