//! The Deployment controller against the in-memory API with a fake
//! clock. There is no ReplicaSet controller here, so [`FakeReplicaSets`]
//! plays it: it keeps each set's pods at `spec.replicas` (deleting before
//! creating), makes a pod available one tick after it appears (never, for
//! images named `*:stuck`), writes the sets' status, and records after
//! every tick how many pods exist and how many are available. With
//! `terminating`, a pod it removes lingers one tick after the set's
//! status stopped counting it, as a terminating pod does.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, ReplicaSetStatus};
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use bosun::well_known::{CHANGE_CAUSE, DESIRED_REPLICAS, MAX_REPLICAS, REVISION, REVISION_HISTORY};

use super::progress::{get_condition, AVAILABLE, PROGRESSING};
use super::replicas::spec_replicas;
use super::{controller_of, POD_TEMPLATE_HASH};
use crate::toolkit::testing::{eventually, TestApi};

const WAIT: Duration = Duration::from_secs(20);

/// One tick of the simulated cluster.
#[derive(Debug, Clone)]
struct Tick {
    pods: i32,
    available: i32,
    /// Sets that have live pods.
    sets_with_pods: usize,
}

struct FakeReplicaSets {
    timeline: Arc<Mutex<Vec<Tick>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeReplicaSets {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn image_of(rs: &ReplicaSet) -> String {
    rs.spec
        .template
        .as_ref()
        .and_then(|t| t.spec.as_ref())
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.clone())
        .unwrap_or_default()
}

impl FakeReplicaSets {
    fn start(client: kube::Client, terminating: bool) -> Self {
        let timeline: Arc<Mutex<Vec<Tick>>> = Arc::default();
        let record = timeline.clone();
        let task = tokio::spawn(async move {
            let rs_api: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
            let pod_api: Api<Pod> = Api::namespaced(client.clone(), "default");
            let mut born_before: HashSet<String> = HashSet::new();
            let mut serial = 0u64;
            let mut lingering: HashSet<String> = HashSet::new();
            loop {
                tokio::time::sleep(Duration::from_millis(10)).await;
                // Pods that terminated last tick go now.
                for victim in lingering.drain() {
                    let _ = pod_api
                        .delete(&victim, &DeleteParams::default().grace_period(0))
                        .await;
                }
                let Ok(sets) = rs_api.list(&ListParams::default()).await else {
                    continue;
                };
                let Ok(pods) = pod_api.list(&ListParams::default()).await else {
                    continue;
                };
                let owned = |rs: &ReplicaSet| -> Vec<Pod> {
                    pods.items
                        .iter()
                        .filter(|p| {
                            controller_of(&p.metadata).map(|o| &o.uid) == rs.metadata.uid.as_ref()
                        })
                        .cloned()
                        .collect()
                };
                // Deletions first, then creations.
                let mut alive: Vec<(ReplicaSet, Vec<String>)> = Vec::new();
                let mut terminating_now: Vec<String> = Vec::new();
                for rs in &sets.items {
                    let mut mine: Vec<String> = owned(rs)
                        .iter()
                        .filter_map(|p| p.metadata.name.clone())
                        .collect();
                    mine.sort();
                    while mine.len() as i32 > spec_replicas(rs) {
                        let victim = mine.pop().unwrap();
                        if terminating {
                            terminating_now.push(rs.metadata.uid.clone().unwrap());
                            lingering.insert(victim);
                        } else {
                            let _ = pod_api
                                .delete(&victim, &DeleteParams::default().grace_period(0))
                                .await;
                        }
                    }
                    alive.push((rs.clone(), mine));
                }
                for (rs, mine) in alive.iter_mut() {
                    while (mine.len() as i32) < spec_replicas(rs) {
                        serial += 1;
                        let name = format!("{}-{serial:05}", rs.metadata.name.clone().unwrap());
                        let template = rs.spec.template.clone().unwrap_or_default();
                        let pod: Pod = serde_json::from_value(json!({
                            "metadata": {
                                "name": name,
                                "labels": template.metadata.as_ref().and_then(|m| m.labels.clone()),
                                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                    "name": rs.metadata.name, "uid": rs.metadata.uid, "controller": true}],
                            },
                            "spec": template.spec,
                        }))
                        .unwrap();
                        if pod_api.create(&PostParams::default(), &pod).await.is_ok() {
                            mine.push(name);
                        } else {
                            break;
                        }
                    }
                }
                let mut tick = Tick {
                    pods: 0,
                    available: 0,
                    sets_with_pods: 0,
                };
                let mut now_alive = HashSet::new();
                for (rs, mine) in &alive {
                    let ready = if image_of(rs).ends_with(":stuck") {
                        0
                    } else {
                        mine.iter().filter(|n| born_before.contains(*n)).count() as i32
                    };
                    let uid = rs.metadata.uid.clone().unwrap();
                    let lingering_here = terminating_now.iter().filter(|u| **u == uid).count();
                    tick.pods += (mine.len() + lingering_here) as i32;
                    tick.available += ready;
                    if !mine.is_empty() || lingering_here > 0 {
                        tick.sets_with_pods += 1;
                    }
                    now_alive.extend(mine.iter().cloned());
                    let status = ReplicaSetStatus {
                        replicas: mine.len() as i32,
                        fully_labeled_replicas: Some(mine.len() as i32),
                        ready_replicas: Some(ready),
                        available_replicas: Some(ready),
                        observed_generation: rs.metadata.generation,
                        ..Default::default()
                    };
                    if rs.status.as_ref() != Some(&status) {
                        let mut rs = rs.clone();
                        rs.status = Some(status);
                        let name = rs.metadata.name.clone().unwrap();
                        let _ = rs_api
                            .replace_status(&name, &PostParams::default(), &rs)
                            .await;
                    }
                }
                born_before = now_alive;
                record.lock().unwrap().push(tick);
            }
        });
        FakeReplicaSets { timeline, task }
    }

    /// Forgets the timeline so far.
    fn reset(&self) {
        self.timeline.lock().unwrap().clear();
    }

    fn timeline(&self) -> Vec<Tick> {
        self.timeline.lock().unwrap().clone()
    }
}

struct Harness {
    api: TestApi,
    sim: FakeReplicaSets,
    controller: tokio::task::JoinHandle<()>,
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.controller.abort();
    }
}

impl Harness {
    async fn start() -> Harness {
        Self::start_with(false).await
    }

    async fn start_with(terminating: bool) -> Harness {
        let api = TestApi::start().await;
        let shared = api.shared();
        let fut = super::start_with(&shared, Duration::from_millis(100));
        shared.informers.start();
        shared.informers.wait_ready().await;
        let controller = tokio::spawn(fut);
        let sim = FakeReplicaSets::start(api.client.clone(), terminating);
        Harness {
            api,
            sim,
            controller,
        }
    }

    fn deployments(&self) -> Api<Deployment> {
        self.api.api(Some("default"))
    }

    fn replica_sets(&self) -> Api<ReplicaSet> {
        self.api.api(Some("default"))
    }

    async fn create(&self, spec: serde_json::Value) -> Deployment {
        let mut full = json!({
            "replicas": 3,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                         "spec": {"containers": [{"name": "web", "image": "bosun.local/web:1"}]}},
        });
        for (k, v) in spec.as_object().unwrap() {
            full[k] = v.clone();
        }
        self.api
            .create(json!({"apiVersion": "apps/v1", "kind": "Deployment",
                           "metadata": {"name": "web", "namespace": "default"}, "spec": full}))
            .await
    }

    async fn patch(&self, patch: serde_json::Value) {
        self.deployments()
            .patch("web", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("patch deployment");
    }

    async fn set_image(&self, image: &str) {
        self.patch(json!({"spec": {"template": {"spec": {"containers": [{"name": "web", "image": image}]}}}}))
            .await;
    }

    async fn get(&self) -> Deployment {
        self.deployments().get("web").await.unwrap()
    }

    async fn sets(&self) -> Vec<ReplicaSet> {
        let mut sets = self
            .replica_sets()
            .list(&ListParams::default())
            .await
            .unwrap()
            .items;
        super::replicas::sort_by_creation(&mut sets);
        sets
    }

    /// Waits until the rollout of the current template is complete: one
    /// set runs `replicas` available pods of `image`, the others none.
    async fn wait_complete(&self, image: &str) -> ReplicaSet {
        eventually(&format!("rollout of {image} complete"), WAIT, || async {
            let d = self.get().await;
            let n = d.spec.replicas.unwrap_or(1);
            let status = d.status.clone()?;
            let progressing = get_condition(&status, PROGRESSING)?;
            let sets = self.sets().await;
            let new = sets.iter().find(|rs| image_of(rs) == image)?;
            let done = status.observed_generation == d.metadata.generation
                && status.updated_replicas == Some(n)
                && status.replicas == Some(n)
                && status.available_replicas == Some(n)
                && progressing.reason.as_deref() == Some("NewReplicaSetAvailable")
                && sets
                    .iter()
                    .all(|rs| rs.metadata.name == new.metadata.name || spec_replicas(rs) == 0)
                && self.sim.timeline().last().is_some_and(|t| t.pods == n);
            done.then(|| new.clone())
        })
        .await
    }

    async fn event_messages(&self) -> Vec<String> {
        let events: Api<Event> = self.api.api(Some("default"));
        events
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some("ScalingReplicaSet"))
            .filter_map(|e| e.message)
            .collect()
    }

    async fn wait_event(&self, message: &str) {
        eventually(&format!("event {message:?}"), WAIT, || async {
            self.event_messages()
                .await
                .iter()
                .any(|m| m == message)
                .then_some(())
        })
        .await
    }
}

fn annotation(rs: &ReplicaSet, key: &str) -> Option<String> {
    rs.metadata.annotations.as_ref()?.get(key).cloned()
}

fn name(rs: &ReplicaSet) -> String {
    rs.metadata.name.clone().unwrap()
}

#[tokio::test]
async fn creates_a_hashed_replica_set_and_scaling_does_not_roll_out() {
    let h = Harness::start().await;
    h.create(json!({})).await;
    let rs = h.wait_complete("bosun.local/web:1").await;
    let hash = rs.metadata.labels.as_ref().unwrap()[POD_TEMPLATE_HASH].clone();
    assert_eq!(name(&rs), format!("web-{hash}"));
    assert!(
        hash.len() >= 6
            && hash
                .bytes()
                .all(|b| b"bcdfghjklmnpqrstvwxz2456789".contains(&b))
    );
    assert_eq!(
        rs.spec.selector.match_labels.as_ref().unwrap()[POD_TEMPLATE_HASH],
        hash
    );
    let template_labels = rs
        .spec
        .template
        .as_ref()
        .unwrap()
        .metadata
        .as_ref()
        .unwrap()
        .labels
        .clone();
    assert_eq!(template_labels.unwrap()[POD_TEMPLATE_HASH], hash);
    let owner = controller_of(&rs.metadata).expect("a controller reference");
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("Deployment", "web")
    );
    assert_eq!(annotation(&rs, REVISION).as_deref(), Some("1"));
    // 3 replicas, 25% surge rounds up to 1.
    assert_eq!(annotation(&rs, DESIRED_REPLICAS).as_deref(), Some("3"));
    assert_eq!(annotation(&rs, MAX_REPLICAS).as_deref(), Some("4"));
    let d = h.get().await;
    assert_eq!(d.metadata.annotations.as_ref().unwrap()[REVISION], "1");
    let status = d.status.unwrap();
    assert_eq!(status.ready_replicas, Some(3));
    assert_eq!(status.unavailable_replicas, Some(0));
    let available = get_condition(&status, AVAILABLE).unwrap();
    assert_eq!(available.status.as_deref(), Some("True"));
    assert_eq!(
        available.reason.as_deref(),
        Some("MinimumReplicasAvailable")
    );
    assert_eq!(
        available.message.as_deref(),
        Some("Deployment has minimum availability.")
    );
    let progressing = get_condition(&status, PROGRESSING).unwrap();
    assert_eq!(
        progressing.message.clone().unwrap(),
        format!("ReplicaSet \"{}\" has successfully progressed.", name(&rs))
    );
    h.wait_event(&format!("Scaled up replica set {} from 0 to 3", name(&rs)))
        .await;

    h.patch(json!({"spec": {"replicas": 5}})).await;
    let scaled = h.wait_complete("bosun.local/web:1").await;
    assert_eq!(name(&scaled), name(&rs));
    h.wait_event(&format!("Scaled up replica set {} from 3 to 5", name(&rs)))
        .await;
    h.patch(json!({"spec": {"replicas": 2}})).await;
    h.wait_complete("bosun.local/web:1").await;
    h.wait_event(&format!(
        "Scaled down replica set {} from 5 to 2",
        name(&rs)
    ))
    .await;
    assert_eq!(h.sets().await.len(), 1, "scaling made no new replica set");
    assert_eq!(h.get().await.metadata.annotations.unwrap()[REVISION], "1");
}

/// Rolls `replicas` from web:1 to web:2 and checks every tick of the
/// simulated cluster against the bounds.
async fn rolling_update_within(strategy: serde_json::Value, replicas: i32, most: i32, least: i32) {
    let h = Harness::start().await;
    h.create(json!({"replicas": replicas, "strategy": strategy}))
        .await;
    let old = h.wait_complete("bosun.local/web:1").await;
    h.sim.reset();
    h.set_image("bosun.local/web:2").await;
    let new = h.wait_complete("bosun.local/web:2").await;
    let timeline = h.sim.timeline();
    assert!(
        timeline.iter().any(|t| t.sets_with_pods == 2),
        "old and new ran side by side"
    );
    for t in &timeline {
        assert!(t.pods <= most, "{} pods > {most}: {timeline:?}", t.pods);
        assert!(
            t.available >= least,
            "{} available < {least}: {timeline:?}",
            t.available
        );
    }
    let up = format!("Scaled up replica set {} from 0 to ", name(&new));
    let down = format!("Scaled down replica set {} from ", name(&old));
    eventually("the scaling events", WAIT, || async {
        let messages = h.event_messages().await;
        (messages.iter().any(|m| m.starts_with(&up))
            && messages
                .iter()
                .any(|m| m.starts_with(&down) && m.ends_with(" to 0")))
        .then_some(())
    })
    .await;
}

#[tokio::test]
async fn rolling_update_respects_max_surge_and_max_unavailable() {
    // The seed's case: 4 replicas, maxSurge 1, maxUnavailable 1.
    rolling_update_within(
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 1}}),
        4,
        5,
        3,
    )
    .await;
}

#[tokio::test]
async fn rolling_update_rounds_percentages() {
    // 25% of 10: surge 2.5 rounds up to 3, unavailable rounds down to 2.
    rolling_update_within(json!({"type": "RollingUpdate"}), 10, 13, 8).await;
}

#[tokio::test]
async fn recreate_stops_old_pods_before_starting_new_ones() {
    // Old pods linger after their set's status dropped them: the new set
    // must wait for the pods themselves.
    let h = Harness::start_with(true).await;
    h.create(json!({"strategy": {"type": "Recreate"}})).await;
    let old = h.wait_complete("bosun.local/web:1").await;
    h.sim.reset();
    h.set_image("bosun.local/web:2").await;
    h.wait_complete("bosun.local/web:2").await;
    let timeline = h.sim.timeline();
    assert!(
        timeline.iter().any(|t| t.pods == 0),
        "all old pods went first: {timeline:?}"
    );
    assert!(
        timeline.iter().all(|t| t.sets_with_pods <= 1),
        "old and new pods never run together: {timeline:?}"
    );
    h.wait_event(&format!(
        "Scaled down replica set {} from 3 to 0",
        name(&old)
    ))
    .await;
}

#[tokio::test]
async fn scaling_mid_rollout_is_proportional() {
    // Kubernetes' documented example: 10 replicas, maxSurge 3,
    // maxUnavailable 2, a rollout stuck at 8 old + 5 new; scaled to 15,
    // the 5 extra go 3 to the old set and 2 to the new.
    let h = Harness::start().await;
    h.create(json!({"replicas": 10, "strategy": {"type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 3, "maxUnavailable": 2}}}))
        .await;
    let old = h.wait_complete("bosun.local/web:1").await;
    h.set_image("bosun.local/web:stuck").await;
    let sizes = |want: (i32, i32)| {
        let h = &h;
        let old = name(&old);
        async move {
            eventually(&format!("old/new at {want:?}"), WAIT, || async {
                let sets = h.sets().await;
                let o = sets.iter().find(|rs| name(rs) == old)?;
                let n = sets
                    .iter()
                    .find(|rs| image_of(rs) == "bosun.local/web:stuck")?;
                ((spec_replicas(o), spec_replicas(n)) == want).then_some(())
            })
            .await
        }
    };
    sizes((8, 5)).await;
    h.patch(json!({"spec": {"replicas": 15}})).await;
    sizes((11, 7)).await;
    let sets = h.sets().await;
    assert_eq!(sets.len(), 2);
    for rs in &sets {
        assert_eq!(annotation(rs, DESIRED_REPLICAS).as_deref(), Some("15"));
        assert_eq!(annotation(rs, MAX_REPLICAS).as_deref(), Some("18"));
    }
}

#[tokio::test]
async fn revisions_increase_and_a_template_back_gets_the_next_number() {
    let h = Harness::start().await;
    h.create(json!({})).await;
    h.patch(json!({"metadata": {"annotations": {"kubernetes.io/change-cause": "create"}}}))
        .await;
    let v1 = h.wait_complete("bosun.local/web:1").await;
    h.patch(json!({"metadata": {"annotations": {"kubernetes.io/change-cause": "set image web:2"}},
        "spec": {"template": {"spec": {"containers": [{"name": "web", "image": "bosun.local/web:2"}]}}}}))
        .await;
    let v2 = h.wait_complete("bosun.local/web:2").await;
    assert_eq!(annotation(&v2, REVISION).as_deref(), Some("2"));
    assert_eq!(
        annotation(&v2, CHANGE_CAUSE).as_deref(),
        Some("set image web:2")
    );
    // What `rollout undo` does: the old template comes back.
    h.set_image("bosun.local/web:1").await;
    let back = h.wait_complete("bosun.local/web:1").await;
    assert_eq!(name(&back), name(&v1), "the old set is the new one again");
    assert_eq!(annotation(&back, REVISION).as_deref(), Some("3"));
    assert_eq!(annotation(&back, REVISION_HISTORY).as_deref(), Some("1"));
    assert_eq!(h.sets().await.len(), 2);
    assert_eq!(h.get().await.metadata.annotations.unwrap()[REVISION], "3");
    h.set_image("bosun.local/web:2").await;
    let again = h.wait_complete("bosun.local/web:2").await;
    assert_eq!(annotation(&again, REVISION).as_deref(), Some("4"));
    assert_eq!(annotation(&again, REVISION_HISTORY).as_deref(), Some("2"));
}

#[tokio::test]
async fn edits_while_paused_make_one_rollout_on_resume() {
    let h = Harness::start().await;
    h.create(json!({})).await;
    h.wait_complete("bosun.local/web:1").await;
    h.patch(json!({"spec": {"paused": true}})).await;
    eventually("the paused condition", WAIT, || async {
        let status = h.get().await.status?;
        let c = get_condition(&status, PROGRESSING)?;
        (c.reason.as_deref() == Some("DeploymentPaused") && c.status.as_deref() == Some("Unknown"))
            .then_some(())
    })
    .await;
    h.set_image("bosun.local/web:2").await;
    h.patch(json!({"spec": {"replicas": 4, "template": {"metadata": {"labels": {"app": "web", "edit": "two"}}}}}))
        .await;
    // The controller has seen the edits (and scaled) but rolled nothing.
    eventually("the edits observed and the scale applied", WAIT, || async {
        let d = h.get().await;
        let sets = h.sets().await;
        (d.status?.observed_generation == d.metadata.generation
            && sets.len() == 1
            && spec_replicas(&sets[0]) == 4)
            .then_some(())
    })
    .await;
    assert_eq!(h.sets().await.len(), 1, "no rollout while paused");
    h.patch(json!({"spec": {"paused": false}})).await;
    let new = h.wait_complete("bosun.local/web:2").await;
    let labels = new.spec.template.unwrap().metadata.unwrap().labels.unwrap();
    assert_eq!(labels["edit"], "two");
    assert_eq!(
        h.sets().await.len(),
        2,
        "one new replica set for both edits"
    );
}

#[tokio::test]
async fn revision_history_limit_deletes_the_oldest_empty_sets() {
    let h = Harness::start().await;
    h.create(json!({"replicas": 1, "revisionHistoryLimit": 1}))
        .await;
    h.wait_complete("bosun.local/web:1").await;
    for v in 2..=4 {
        h.set_image(&format!("bosun.local/web:{v}")).await;
        h.wait_complete(&format!("bosun.local/web:{v}")).await;
    }
    eventually("one old set left", WAIT, || async {
        let sets = h.sets().await;
        let images: BTreeMap<String, i32> = sets
            .iter()
            .map(|rs| (image_of(rs), spec_replicas(rs)))
            .collect();
        let want: BTreeMap<String, i32> = [
            ("bosun.local/web:3".to_string(), 0),
            ("bosun.local/web:4".to_string(), 1),
        ]
        .into();
        (images == want).then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_stalled_rollout_exceeds_its_progress_deadline() {
    let h = Harness::start().await;
    h.create(json!({"replicas": 2, "progressDeadlineSeconds": 60}))
        .await;
    h.wait_complete("bosun.local/web:1").await;
    h.set_image("bosun.local/web:stuck").await;
    // Stalled: one new pod that never gets ready next to the two old
    // ones (25% of 2 rounds maxUnavailable down to 0), and the progress
    // it made (the new pod) recorded.
    let new = eventually("the stalled rollout", WAIT, || async {
        let d = h.get().await;
        let status = d.status.clone()?;
        let c = get_condition(&status, PROGRESSING)?.clone();
        let sets = h.sets().await;
        let new = sets
            .into_iter()
            .find(|rs| image_of(rs) == "bosun.local/web:stuck")?;
        (c.status.as_deref() == Some("True")
            && c.reason.as_deref() == Some("ReplicaSetUpdated")
            && status.replicas == Some(3)
            && status.updated_replicas == Some(1)
            && status.available_replicas == Some(2))
        .then_some(new)
    })
    .await;
    h.api.clock.advance(Duration::from_secs(61));
    // No event needed: the controller requeues itself at the deadline.
    let c = eventually("ProgressDeadlineExceeded", WAIT, || async {
        let status = h.get().await.status?;
        let c = get_condition(&status, PROGRESSING)?.clone();
        (c.reason.as_deref() == Some("ProgressDeadlineExceeded")).then_some(c)
    })
    .await;
    assert_eq!(c.status.as_deref(), Some("False"));
    assert_eq!(
        c.message.unwrap(),
        format!("ReplicaSet \"{}\" has timed out progressing.", name(&new))
    );
    // The two old pods still serve.
    let status = h.get().await.status.unwrap();
    let available = get_condition(&status, AVAILABLE).unwrap();
    assert_eq!(available.status.as_deref(), Some("True"), "{status:?}");
}

#[tokio::test]
async fn available_is_false_below_minimum_availability() {
    let h = Harness::start().await;
    h.create(
        json!({"replicas": 4, "template": {"metadata": {"labels": {"app": "web"}},
        "spec": {"containers": [{"name": "web", "image": "bosun.local/web:stuck"}]}}}),
    )
    .await;
    let c = eventually("Available=False", WAIT, || async {
        let status = h.get().await.status?;
        let c = get_condition(&status, AVAILABLE)?.clone();
        (status.replicas == Some(4) && status.unavailable_replicas == Some(4)).then_some(c)
    })
    .await;
    assert_eq!(c.status.as_deref(), Some("False"));
    assert_eq!(c.reason.as_deref(), Some("MinimumReplicasUnavailable"));
    assert_eq!(
        c.message.as_deref(),
        Some("Deployment does not have minimum availability.")
    );
}

#[tokio::test]
async fn a_hash_collision_bumps_the_collision_count() {
    let h = Harness::start().await;
    let d = h.create(json!({"paused": true})).await;
    let hash = super::compute_hash(&d.spec.template, None);
    // Someone else's set already has the name the template hashes to.
    let _: ReplicaSet = h
        .api
        .create(json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": format!("web-{hash}"), "namespace": "default"},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "other"}},
                     "template": {"metadata": {"labels": {"app": "other"}},
                                  "spec": {"containers": [{"name": "c", "image": "other"}]}}}}))
        .await;
    h.patch(json!({"spec": {"paused": false}})).await;
    let rs = h.wait_complete("bosun.local/web:1").await;
    let d = h.get().await;
    assert_eq!(d.status.unwrap().collision_count, Some(1));
    assert_eq!(
        name(&rs),
        format!("web-{}", super::compute_hash(&d.spec.template, Some(1)))
    );
}
