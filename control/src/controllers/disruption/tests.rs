//! The budget arithmetic and the eviction decision, on upstream's
//! disruption_test and eviction_test cases.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use chrono::{DateTime, Duration, TimeZone, Utc};
use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus};
use k8s_openapi::api::policy::v1::{
    PodDisruptionBudget, PodDisruptionBudgetSpec, PodDisruptionBudgetStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use bosun::disruption::budget::{self, ControllerScale, Expected};
use bosun::disruption::eviction::{decide, Verdict};
use bosun::disruption::from_chrono;

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 12, 0, 0).unwrap()
}

fn labels() -> BTreeMap<String, String> {
    [("app".to_string(), "web".to_string())].into()
}

fn pod(name: &str, ready: bool, owner: Option<&str>) -> Arc<Pod> {
    Arc::new(Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            labels: Some(labels()),
            resource_version: Some("7".into()),
            owner_references: owner.map(|uid| {
                vec![OwnerReference {
                    api_version: "apps/v1".into(),
                    kind: "ReplicaSet".into(),
                    name: format!("rs-{uid}"),
                    uid: uid.into(),
                    controller: Some(true),
                    ..Default::default()
                }]
            }),
            ..Default::default()
        },
        status: Some(PodStatus {
            phase: Some("Running".into()),
            conditions: Some(vec![PodCondition {
                type_: "Ready".into(),
                status: if ready { "True" } else { "False" }.into(),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    })
}

fn int(n: i32) -> Option<IntOrString> {
    Some(IntOrString::Int(n))
}

fn pct(s: &str) -> Option<IntOrString> {
    Some(IntOrString::String(s.into()))
}

fn pdb(min: Option<IntOrString>, max: Option<IntOrString>) -> PodDisruptionBudget {
    PodDisruptionBudget {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("default".into()),
            generation: Some(1),
            ..Default::default()
        },
        spec: Some(PodDisruptionBudgetSpec {
            min_available: min,
            max_unavailable: max,
            selector: Some(LabelSelector {
                match_labels: Some(labels()),
                ..Default::default()
            }),
            ..Default::default()
        }),
        status: None,
    }
}

fn scales(entries: &[(&str, &str, i32)]) -> HashMap<String, ControllerScale> {
    entries
        .iter()
        .map(|(pod_owner, controller, replicas)| {
            (
                pod_owner.to_string(),
                ControllerScale {
                    uid: controller.to_string(),
                    replicas: *replicas,
                },
            )
        })
        .collect()
}

/// The status one sync writes.
fn sync(
    pdb: &PodDisruptionBudget,
    pods: &[Arc<Pod>],
    scales: &HashMap<String, ControllerScale>,
) -> Result<PodDisruptionBudgetStatus, String> {
    let expected = budget::expected_pod_count(pdb, pods, scales)?;
    let (disrupted, _, _) = budget::disrupted_pods(pdb, pods, now());
    let healthy = budget::count_healthy(pods, &disrupted, now());
    Ok(budget::status_of(pdb, healthy, &expected, disrupted, now()))
}

fn reason(s: &PodDisruptionBudgetStatus) -> (String, String) {
    let c = &s.conditions.as_ref().unwrap()[0];
    assert_eq!(c.type_, "DisruptionAllowed");
    (c.status.clone(), c.reason.clone())
}

#[test]
fn scaled_values_round_as_upstream() {
    // intstr.GetScaledValueFromIntOrPercent's cases, rounding up.
    let cases = [
        (IntOrString::Int(3), 10, true, 3),
        (IntOrString::String("50%".into()), 5, true, 3),
        (IntOrString::String("50%".into()), 5, false, 2),
        (IntOrString::String("28%".into()), 0, true, 0),
        (IntOrString::String("34%".into()), 3, true, 2),
        (IntOrString::String("100%".into()), 7, true, 7),
        (IntOrString::String("0%".into()), 7, true, 0),
        (IntOrString::String("10%".into()), 10, true, 1),
        (IntOrString::String("1%".into()), 201, true, 3),
    ];
    for (v, total, up, want) in cases {
        assert_eq!(
            budget::scaled_value(&v, total, up),
            Ok(want),
            "{v:?} of {total}"
        );
    }
    assert!(budget::scaled_value(&IntOrString::String("5".into()), 10, true).is_err());
}

#[test]
fn budgets_compute_as_upstream_disruption_tests() {
    // (case, minAvailable, maxUnavailable, pods (ready, owner), scales,
    //  want expected, desired, current, allowed)
    type Case<'a> = (
        &'a str,
        Option<IntOrString>,
        Option<IntOrString>,
        Vec<(bool, Option<&'a str>)>,
        Vec<(&'a str, &'a str, i32)>,
        (i32, i32, i32, i32),
    );
    let rs = Some("rs");
    let cases: Vec<Case> = vec![
        // TestUnavailable: minAvailable 3 over 4 ready pods.
        (
            "int min, all ready",
            int(3),
            None,
            vec![(true, None); 4],
            vec![],
            (4, 3, 4, 1),
        ),
        (
            "int min, one unready",
            int(3),
            None,
            vec![(true, None), (true, None), (true, None), (false, None)],
            vec![],
            (4, 3, 3, 0),
        ),
        // An integer minAvailable counts pods, managed or not.
        (
            "int min, no pods",
            int(1),
            None,
            vec![],
            vec![],
            (0, 1, 0, 0),
        ),
        // TestNakedPod: a percentage of nothing managed allows nothing.
        (
            "percent min, naked pod",
            pct("28%"),
            None,
            vec![(true, None)],
            vec![],
            (0, 0, 1, 0),
        ),
        // TestReplicaSet: 20% of 10 replicas is 2; one pod ready.
        (
            "percent min of a replica set",
            pct("20%"),
            None,
            vec![(true, rs)],
            vec![("rs", "rs", 10)],
            (10, 2, 1, 0),
        ),
        // TestReplicationController/StatefulSet: 34% of 3 is 2.
        (
            "percent min, 3 of 3 ready",
            pct("34%"),
            None,
            vec![(true, rs); 3],
            vec![("rs", "rs", 3)],
            (3, 2, 3, 1),
        ),
        (
            "percent min, 2 of 3 ready",
            pct("34%"),
            None,
            vec![(true, rs), (true, rs), (false, rs)],
            vec![("rs", "rs", 3)],
            (3, 2, 2, 0),
        ),
        // TestIntegerMaxUnavailable: 1 of 3 replicas may be down.
        (
            "int max",
            None,
            int(1),
            vec![(true, rs); 3],
            vec![("rs", "rs", 3)],
            (3, 2, 3, 1),
        ),
        (
            "int max, one down",
            None,
            int(1),
            vec![(true, rs), (true, rs), (false, rs)],
            vec![("rs", "rs", 3)],
            (3, 2, 2, 0),
        ),
        // TestIntegerMaxUnavailableWithScaling: the scale, not the pods, counts.
        (
            "int max, scaled up",
            None,
            int(2),
            vec![(true, rs); 3],
            vec![("rs", "rs", 5)],
            (5, 3, 3, 0),
        ),
        // maxUnavailable past the scale: nothing must be healthy.
        (
            "int max over scale",
            None,
            int(5),
            vec![(true, rs); 2],
            vec![("rs", "rs", 2)],
            (2, 0, 2, 2),
        ),
        // TestPercentageMaxUnavailable: 10% of 10 is 1 (rounded up).
        (
            "percent max",
            None,
            pct("10%"),
            vec![(true, rs); 10],
            vec![("rs", "rs", 10)],
            (10, 9, 10, 1),
        ),
        (
            "percent max rounds up",
            None,
            pct("25%"),
            vec![(true, rs); 3],
            vec![("rs", "rs", 3)],
            (3, 2, 3, 1),
        ),
        // A pod without a controller is left out of a scale-based count.
        (
            "max with an unmanaged pod",
            None,
            int(1),
            vec![(true, rs), (true, rs), (true, None)],
            vec![("rs", "rs", 2)],
            (2, 1, 3, 2),
        ),
        // Two ReplicaSets of one Deployment count the Deployment once.
        (
            "deployment through two replica sets",
            pct("50%"),
            None,
            vec![
                (true, Some("old")),
                (true, Some("new")),
                (true, Some("new")),
            ],
            vec![("old", "dep", 4), ("new", "dep", 4)],
            (4, 2, 3, 1),
        ),
        // TestTwoControllers: two controllers' scales add up.
        (
            "two controllers",
            pct("50%"),
            None,
            vec![(true, Some("a")), (true, Some("b"))],
            vec![("a", "a", 1), ("b", "b", 3)],
            (4, 2, 2, 0),
        ),
        // Neither set (v1 allows it): nothing is needed and nothing expected.
        (
            "neither",
            None,
            None,
            vec![(true, None)],
            vec![],
            (0, 0, 1, 0),
        ),
    ];
    for (name, min, max, pods, sc, (expected, desired, current, allowed)) in cases {
        let pods: Vec<Arc<Pod>> = pods
            .iter()
            .enumerate()
            .map(|(i, (ready, owner))| pod(&format!("p{i}"), *ready, *owner))
            .collect();
        let status = sync(&pdb(min, max), &pods, &scales(&sc)).unwrap();
        assert_eq!(
            (
                status.expected_pods,
                status.desired_healthy,
                status.current_healthy,
                status.disruptions_allowed
            ),
            (Some(expected), Some(desired), Some(current), Some(allowed)),
            "{name}"
        );
        let want = if allowed > 0 {
            ("True", "SufficientPods")
        } else {
            ("False", "InsufficientPods")
        };
        assert_eq!(reason(&status), (want.0.into(), want.1.into()), "{name}");
        assert_eq!(status.observed_generation, Some(1), "{name}");
    }
}

#[test]
fn unmanaged_pods_are_reported() {
    let pods = vec![pod("a", true, Some("rs")), pod("naked", true, None)];
    let got = budget::expected_pod_count(&pdb(None, int(1)), &pods, &scales(&[("rs", "rs", 1)]));
    assert_eq!(
        got,
        Ok(Expected {
            expected_count: 1,
            desired_healthy: 0,
            unmanaged: vec!["naked".into()]
        })
    );
}

#[test]
fn a_controller_that_cannot_be_found_fails_the_sync() {
    let pods = vec![pod("a", true, Some("gone"))];
    let err = budget::expected_pod_count(&pdb(pct("50%"), None), &pods, &HashMap::new());
    assert_eq!(err, Err("found no controllers for pod \"a\"".into()));
    let status = budget::fail_safe(&pdb(pct("50%"), None), &err.unwrap_err(), now());
    assert_eq!(status.disruptions_allowed, Some(0));
    let c = &status.conditions.unwrap()[0];
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        ("False", "SyncFailed")
    );
    assert_eq!(c.message, "found no controllers for pod \"a\"");
}

#[test]
fn disrupted_pods_count_until_deleted_or_timed_out() {
    // TestUpdateDisruptedPods: p1 just evicted, p2 evicted long ago (not
    // deleted: counts again), p3 gone; p4 being deleted.
    let mut p = pdb(int(1), None);
    p.status = Some(PodDisruptionBudgetStatus {
        disrupted_pods: Some(
            [
                ("p1".to_string(), from_chrono(now() - Duration::seconds(10))),
                ("p2".to_string(), from_chrono(now() - Duration::minutes(3))),
                ("p3".to_string(), from_chrono(now())),
                ("p4".to_string(), from_chrono(now())),
            ]
            .into(),
        ),
        ..Default::default()
    });
    let mut deleting = (*pod("p4", true, None)).clone();
    deleting.metadata.deletion_timestamp = Some(from_chrono(now()));
    let pods = vec![
        pod("p1", true, None),
        pod("p2", true, None),
        Arc::new(deleting),
    ];
    let (kept, overdue, recheck) = budget::disrupted_pods(&p, &pods, now());
    assert_eq!(kept.keys().collect::<Vec<_>>(), ["p1"]);
    assert_eq!(overdue, ["p2"]);
    assert_eq!(recheck, Some(now() + Duration::seconds(110)));
    // p1 is on its way out, p4 is being deleted: only p2 is healthy.
    assert_eq!(budget::count_healthy(&pods, &kept, now()), 1);
    let status = sync(&p, &pods, &HashMap::new()).unwrap();
    assert_eq!(status.disruptions_allowed, Some(0));
    assert_eq!(status.disrupted_pods.unwrap().len(), 1);
}

fn with_status(
    mut p: PodDisruptionBudget,
    allowed: i32,
    current: i32,
    desired: i32,
) -> PodDisruptionBudget {
    p.status = Some(PodDisruptionBudgetStatus {
        disruptions_allowed: Some(allowed),
        current_healthy: Some(current),
        desired_healthy: Some(desired),
        expected_pods: Some(current),
        observed_generation: Some(1),
        ..Default::default()
    });
    p
}

#[test]
fn evictions_are_decided_as_eviction_rest() {
    let ready = pod("p", true, None);
    let unready = pod("p", false, None);
    let allowing = with_status(pdb(int(2), None), 1, 3, 2);
    let blocking = with_status(pdb(int(2), None), 0, 2, 2);

    // Allowed: one disruption spent, the pod recorded.
    let Verdict::Decrement(next) = decide(&ready, std::slice::from_ref(&allowing), now()) else {
        panic!("expected a decrement")
    };
    let st = next.status.unwrap();
    assert_eq!(st.disruptions_allowed, Some(0));
    assert!(st.disrupted_pods.unwrap().contains_key("p"));
    assert_eq!(st.conditions.unwrap()[0].reason, "InsufficientPods");

    // No disruption left: 429 naming the budget's numbers.
    assert_eq!(
        decide(&ready, std::slice::from_ref(&blocking), now()),
        Verdict::TooManyRequests(
            "The disruption budget web needs 2 healthy pods and has 2 currently".into()
        )
    );
    // A budget the controller has not seen yet.
    let mut fresh = blocking.clone();
    fresh.metadata.generation = Some(2);
    assert_eq!(
        decide(&ready, &[fresh], now()),
        Verdict::TooManyRequests(
            "The disruption budget web is still being processed by the server.".into()
        )
    );
    // No budget, another namespace's, or a selector that does not match.
    assert_eq!(decide(&ready, &[], now()), Verdict::Delete);
    let mut elsewhere = blocking.clone();
    elsewhere.metadata.namespace = Some("other".into());
    assert_eq!(decide(&ready, &[elsewhere], now()), Verdict::Delete);
    let mut nil_selector = blocking.clone();
    nil_selector.spec.as_mut().unwrap().selector = None;
    assert_eq!(decide(&ready, &[nil_selector], now()), Verdict::Delete);
    // An empty selector selects every pod of the namespace (policy/v1).
    let mut everything = blocking.clone();
    everything.spec.as_mut().unwrap().selector = Some(LabelSelector::default());
    assert!(matches!(
        decide(&ready, &[everything], now()),
        Verdict::TooManyRequests(_)
    ));
    // Two budgets: 500.
    assert_eq!(
        decide(&ready, &[allowing.clone(), allowing.clone()], now()),
        Verdict::MoreThanOneBudget
    );
    // A pending or finished pod ignores budgets.
    for phase in ["Pending", "Succeeded", "Failed"] {
        let mut p = (*ready).clone();
        p.status.as_mut().unwrap().phase = Some(phase.into());
        assert_eq!(
            decide(&p, std::slice::from_ref(&blocking), now()),
            Verdict::Delete,
            "{phase}"
        );
    }
    // Unready pods: IfHealthyBudget lets one go while the budget is met,
    // not while it is not; AlwaysAllow always does.
    assert_eq!(
        decide(&unready, std::slice::from_ref(&blocking), now()),
        Verdict::DeleteUnhealthy
    );
    let unmet = with_status(pdb(int(2), None), 0, 1, 2);
    assert!(matches!(
        decide(&unready, std::slice::from_ref(&unmet), now()),
        Verdict::TooManyRequests(_)
    ));
    let mut always = unmet.clone();
    always.spec.as_mut().unwrap().unhealthy_pod_eviction_policy = Some("AlwaysAllow".into());
    assert_eq!(decide(&unready, &[always], now()), Verdict::DeleteUnhealthy);
    let mut if_healthy = unmet;
    if_healthy
        .spec
        .as_mut()
        .unwrap()
        .unhealthy_pod_eviction_policy = Some("IfHealthyBudget".into());
    assert!(matches!(
        decide(&unready, &[if_healthy], now()),
        Verdict::TooManyRequests(_)
    ));
    // A negative count is refused outright.
    let negative = with_status(pdb(int(2), None), -1, 3, 2);
    assert!(matches!(
        decide(&ready, &[negative], now()),
        Verdict::Forbidden(_)
    ));
}
