//! A StatefulSet pod's identity and storage (`stateful_set_utils.go`): its
//! name `<set>-<ordinal>`, its hostname (the pod name) and subdomain (the
//! set's `serviceName`), so `web-0.nginx.<ns>.svc.cluster.local` names it
//! whatever node it lands on; and one claim per `volumeClaimTemplates`
//! entry, `<template>-<set>-<ordinal>`, which outlives the pod so a
//! re-created pod finds its data.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod, Volume,
};
use kube::ResourceExt;

use crate::toolkit::pod_from_template;

/// The label with the pod's own name, so a Service can select one pod.
pub const POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";
/// The label with the pod's ordinal.
pub const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";
/// The label naming the ControllerRevision a pod was made from.
pub const REVISION_LABEL: &str = "controller-revision-hash";

/// The set a pod name belongs to and its ordinal: `web-12` is `("web", 12)`.
pub fn parent_and_ordinal(pod_name: &str) -> Option<(&str, i32)> {
    let (parent, ordinal) = pod_name.rsplit_once('-')?;
    if ordinal.is_empty() || !ordinal.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((parent, ordinal.parse().ok()?))
}

/// The pod's ordinal, -1 when its name carries none.
pub fn ordinal_of(pod: &Pod) -> i32 {
    parent_and_ordinal(&pod.name_any()).map_or(-1, |(_, o)| o)
}

/// Whether the pod's name says it is one of the set's (`isMemberOf`).
pub fn is_member_of(set: &StatefulSet, pod: &Pod) -> bool {
    parent_and_ordinal(&pod.name_any()).is_some_and(|(parent, _)| parent == set.name_any())
}

pub fn pod_name(set: &StatefulSet, ordinal: i32) -> String {
    format!("{}-{ordinal}", set.name_any())
}

fn service_name(set: &StatefulSet) -> Option<String> {
    Some(&set.spec)
        .and_then(|s| s.service_name.clone())
        .filter(|s| !s.is_empty())
}

/// The claim templates of the set.
pub fn claim_templates(set: &StatefulSet) -> Vec<PersistentVolumeClaim> {
    Some(&set.spec)
        .and_then(|s| s.volume_claim_templates.clone())
        .unwrap_or_default()
}

/// `<template>-<set>-<ordinal>`.
pub fn claim_name(set: &StatefulSet, template: &PersistentVolumeClaim, ordinal: i32) -> String {
    format!("{}-{}-{ordinal}", template.name_any(), set.name_any())
}

/// Whether the pod has the name, namespace, labels, hostname and
/// subdomain its ordinal gives it (`identityMatches`).
pub fn identity_matches(set: &StatefulSet, pod: &Pod) -> bool {
    let name = pod.name_any();
    let Some((parent, ordinal)) = parent_and_ordinal(&name) else {
        return false;
    };
    let spec = pod.spec.as_ref();
    parent == set.name_any()
        && ordinal >= 0
        && pod.namespace() == set.namespace()
        && pod.labels().get(POD_NAME_LABEL) == Some(&pod.name_any())
        && spec.and_then(|s| s.hostname.clone()) == Some(pod.name_any())
        && spec.and_then(|s| s.subdomain.clone()) == service_name(set)
}

/// Gives the pod the identity of `ordinal` (`updateIdentity`).
pub fn update_identity(set: &StatefulSet, pod: &mut Pod, ordinal: i32) {
    let name = pod_name(set, ordinal);
    pod.metadata.name = Some(name.clone());
    pod.metadata.generate_name = None;
    pod.metadata.namespace = set.namespace();
    let labels = pod.labels_mut();
    labels.insert(POD_NAME_LABEL.into(), name.clone());
    labels.insert(POD_INDEX_LABEL.into(), ordinal.to_string());
    let spec = pod.spec.get_or_insert_with(Default::default);
    spec.hostname = Some(name);
    spec.subdomain = service_name(set);
}

/// The claims the pod mounts from the set's templates, by volume name.
fn claim_volumes(set: &StatefulSet, ordinal: i32) -> BTreeMap<String, String> {
    claim_templates(set)
        .iter()
        .map(|t| (t.name_any(), claim_name(set, t, ordinal)))
        .collect()
}

/// Whether every claim template is mounted from the pod's own claim
/// (`storageMatches`).
pub fn storage_matches(set: &StatefulSet, pod: &Pod) -> bool {
    let ordinal = ordinal_of(pod);
    let volumes = pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.clone())
        .unwrap_or_default();
    claim_volumes(set, ordinal).iter().all(|(volume, claim)| {
        volumes.iter().any(|v| {
            &v.name == volume
                && v.persistent_volume_claim
                    .as_ref()
                    .is_some_and(|c| &c.claim_name == claim)
        })
    })
}

/// Mounts the pod's own claims in place of any template volumes of the
/// same name (`updateStorage`).
pub fn update_storage(set: &StatefulSet, pod: &mut Pod) {
    let claims = claim_volumes(set, ordinal_of(pod));
    if claims.is_empty() {
        return;
    }
    let spec = pod.spec.get_or_insert_with(Default::default);
    let mut volumes: Vec<Volume> = spec
        .volumes
        .take()
        .unwrap_or_default()
        .into_iter()
        .filter(|v| !claims.contains_key(&v.name))
        .collect();
    for (volume, claim) in claims {
        volumes.push(Volume {
            name: volume,
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim,
                read_only: None,
            }),
            ..Default::default()
        });
    }
    spec.volumes = Some(volumes);
}

/// The pod of `ordinal` made from `set`'s template, labelled with
/// `revision` (`newStatefulSetPod` + `setPodRevision`).
pub fn new_pod(set: &StatefulSet, ordinal: i32, revision: &str) -> Pod {
    let template = Some(&set.spec.template);
    let mut pod = pod_from_template(set, template);
    update_identity(set, &mut pod, ordinal);
    update_storage(set, &mut pod);
    pod.labels_mut()
        .insert(REVISION_LABEL.into(), revision.to_string());
    pod
}

/// The claims a pod of the set needs, named for its ordinal and labelled
/// with the set's selector labels (`getPersistentVolumeClaims`).
pub fn claims_for(set: &StatefulSet, ordinal: i32) -> Vec<PersistentVolumeClaim> {
    let selector_labels = Some(&set.spec)
        .and_then(|s| s.selector.match_labels.clone())
        .unwrap_or_default();
    claim_templates(set)
        .into_iter()
        .map(|template| {
            let name = claim_name(set, &template, ordinal);
            let mut claim = PersistentVolumeClaim {
                metadata: template.metadata.clone(),
                spec: template.spec.clone(),
                status: None,
            };
            claim.metadata.name = Some(name);
            claim.metadata.namespace = set.namespace();
            claim.metadata.resource_version = None;
            claim.metadata.uid = None;
            let labels = claim.labels_mut();
            for (k, v) in &selector_labels {
                labels.insert(k.clone(), v.clone());
            }
            claim
        })
        .collect()
}

/// The revision a pod was made from.
pub fn revision_of(pod: &Pod) -> Option<&str> {
    pod.labels().get(REVISION_LABEL).map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn set() -> StatefulSet {
        serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "web", "namespace": "default", "uid": "u-web"},
            "spec": {
                "serviceName": "nginx",
                "selector": {"matchLabels": {"app": "nginx"}},
                "template": {"metadata": {"labels": {"app": "nginx"}},
                             "spec": {"containers": [{"name": "nginx", "image": "web:1"}],
                                      "volumes": [{"name": "www", "emptyDir": {}}]}},
                "volumeClaimTemplates": [{"metadata": {"name": "www"},
                    "spec": {"accessModes": ["ReadWriteOnce"],
                             "resources": {"requests": {"storage": "1Gi"}}}}]
            }
        }))
        .unwrap()
    }

    #[test]
    fn names_carry_the_parent_and_the_ordinal() {
        assert_eq!(parent_and_ordinal("web-0"), Some(("web", 0)));
        assert_eq!(parent_and_ordinal("my-web-12"), Some(("my-web", 12)));
        assert_eq!(parent_and_ordinal("web"), None);
        assert_eq!(parent_and_ordinal("web-"), None);
        assert_eq!(parent_and_ordinal("web-x1"), None);
    }

    #[test]
    fn a_new_pod_has_its_ordinals_identity_and_claims() {
        let set = set();
        let pod = new_pod(&set, 1, "web-abc");
        assert_eq!(pod.name_any(), "web-1");
        assert!(pod.metadata.generate_name.is_none());
        assert_eq!(pod.labels()[POD_NAME_LABEL], "web-1");
        assert_eq!(pod.labels()[REVISION_LABEL], "web-abc");
        assert_eq!(pod.labels()["app"], "nginx");
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(spec.hostname.as_deref(), Some("web-1"));
        assert_eq!(spec.subdomain.as_deref(), Some("nginx"));
        // The template's own `www` volume gives way to the claim.
        let volumes = spec.volumes.as_ref().unwrap();
        assert_eq!(volumes.len(), 1);
        assert_eq!(
            volumes[0]
                .persistent_volume_claim
                .as_ref()
                .unwrap()
                .claim_name,
            "www-web-1"
        );
        assert!(identity_matches(&set, &pod));
        assert!(storage_matches(&set, &pod));
        assert!(is_member_of(&set, &pod));

        let mut renamed = pod.clone();
        renamed.spec.as_mut().unwrap().hostname = Some("other".into());
        assert!(!identity_matches(&set, &renamed));
        update_identity(&set, &mut renamed, 1);
        assert!(identity_matches(&set, &renamed));
    }

    #[test]
    fn claims_are_named_per_ordinal_and_labelled_like_the_set() {
        let claims = claims_for(&set(), 2);
        assert_eq!(claims.len(), 1);
        assert_eq!(claims[0].name_any(), "www-web-2");
        assert_eq!(claims[0].labels()["app"], "nginx");
        assert_eq!(claims[0].namespace().as_deref(), Some("default"));
    }
}
