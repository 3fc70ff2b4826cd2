//! Priority admission, as kube-apiserver's `Priority` plugin: a new pod's
//! `priorityClassName` is resolved into `spec.priority` and
//! `spec.preemptionPolicy` (the global default class, or priority 0, when
//! it names none); a pod naming a class that does not exist, or setting a
//! priority that disagrees with its class, is refused. An update keeps
//! the priority the pod was given. On PriorityClasses it keeps
//! `globalDefault` to one class.

use bosun::resources::ResourceInfo;
use bosun::validation::scheduling::class_priority;
use serde_json::{json, Value};

use crate::api::error::{ApiError, ApiResult};
use crate::api::object;
use crate::api::request::name_of;
use crate::api::ApiRequest;
use crate::api::ApiState;

fn classes_res() -> &'static ResourceInfo {
    bosun::resources::by_name("priorityclasses").expect("served")
}

fn forbidden(req: &ApiRequest, name: &str, why: &str) -> ApiError {
    ApiError::forbidden(format!(
        "{} \"{name}\" is forbidden: {why}",
        req.target.res.plural_group()
    ))
}

fn is_pod(req: &ApiRequest) -> bool {
    req.target.res.group.is_empty()
        && req.target.res.kind == "Pod"
        && req.target.subresource.is_none()
}

async fn class(state: &ApiState, name: &str) -> ApiResult<Option<Value>> {
    let res = classes_res();
    match state.store.get(&res.storage_key(None, name)).await {
        Ok(Some(kv)) => Ok(Some(object::from_store(&kv)?)),
        Ok(None) => Ok(None),
        Err(e) => Err(ApiError::from_store(e, res, name)),
    }
}

/// The global default class: of several marked, the one with the lowest
/// value (`getDefaultPriorityClass`).
async fn default_class(state: &ApiState) -> ApiResult<Option<Value>> {
    let res = classes_res();
    let (kvs, _) = state
        .store
        .list(&res.storage_prefix())
        .await
        .map_err(|e| ApiError::from_store(e, res, ""))?;
    let mut best: Option<Value> = None;
    for kv in &kvs {
        let c = object::from_store(kv)?;
        if c.get("globalDefault").and_then(Value::as_bool) != Some(true) {
            continue;
        }
        let lower = best
            .as_ref()
            .is_none_or(|b| class_priority(&c).0 < class_priority(b).0);
        if lower {
            best = Some(c);
        }
    }
    Ok(best)
}

/// Resolves a pod's priority on create; keeps it on update. Runs before
/// validation, as a mutating admission plugin.
pub(super) async fn admit(
    state: &ApiState,
    req: &ApiRequest,
    obj: &mut Value,
    old: Option<&Value>,
) -> ApiResult<()> {
    if !is_pod(req) {
        return Ok(());
    }
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_else(|| name_of(req))
        .to_string();
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return Ok(());
    };
    if let Some(old) = old {
        // The priority was set on create; validation refuses changing it.
        for field in ["priority", "preemptionPolicy"] {
            let unset = spec.get(field).is_none_or(Value::is_null);
            if let (true, Some(v)) = (unset, old.pointer(&format!("/spec/{field}"))) {
                spec.insert(field.into(), v.clone());
            }
        }
        return Ok(());
    }
    let named = spec
        .get("priorityClassName")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let (class_name, priority, policy) = if named.is_empty() {
        match default_class(state).await? {
            Some(c) => {
                let (value, policy) = class_priority(&c);
                let name = c
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                (name, value, policy)
            }
            None => (String::new(), 0, "PreemptLowerPriority".to_string()),
        }
    } else {
        let Some(c) = class(state, &named).await? else {
            return Err(forbidden(
                req,
                &name,
                &format!("no PriorityClass with name {named} was found"),
            ));
        };
        let (value, policy) = class_priority(&c);
        (named, value, policy)
    };
    if let Some(given) = spec.get("priority").and_then(Value::as_i64) {
        if given != priority {
            return Err(forbidden(
                req,
                &name,
                &format!("the integer value of priority ({given}) must not be provided in pod spec; priority admission controller computed {priority} from the given PriorityClass name"),
            ));
        }
    }
    if let Some(given) = spec.get("preemptionPolicy").and_then(Value::as_str) {
        if given != policy {
            return Err(forbidden(
                req,
                &name,
                &format!("the string value of PreemptionPolicy ({given}) must not be provided in pod spec; priority admission controller computed {policy} from the given PriorityClass name"),
            ));
        }
    }
    if !class_name.is_empty() {
        spec.insert("priorityClassName".into(), json!(class_name));
    }
    spec.insert("priority".into(), json!(priority));
    spec.insert("preemptionPolicy".into(), json!(policy));
    Ok(())
}

/// Only one PriorityClass may be the global default.
pub(super) async fn validate(
    state: &ApiState,
    req: &ApiRequest,
    obj: &Value,
    _old: Option<&Value>,
) -> ApiResult<()> {
    let res = req.target.res;
    if res.group != "scheduling.k8s.io" || res.kind != "PriorityClass" {
        return Ok(());
    }
    if obj.get("globalDefault").and_then(Value::as_bool) != Some(true) {
        return Ok(());
    }
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if let Some(current) = default_class(state).await? {
        let other = current
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        if other != name {
            return Err(forbidden(
                req,
                name,
                &format!("PriorityClass {other} is marked as default. Only one default can exist"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::api::scheduling::v1::PriorityClass;
    use kube::api::{Api, DeleteParams, PostParams};
    use serde_json::json;

    use crate::toolkit::testing::TestApi;

    fn pod(name: &str, spec_extra: serde_json::Value) -> Pod {
        let mut spec = json!({"containers": [{"name": "c", "image": "i"}]});
        if let (Some(s), Some(e)) = (spec.as_object_mut(), spec_extra.as_object()) {
            s.extend(e.clone());
        }
        serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"}, "spec": spec}))
        .unwrap()
    }

    fn class(name: &str, value: i32, extra: serde_json::Value) -> PriorityClass {
        let mut v = json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name}, "value": value});
        if let (Some(o), Some(e)) = (v.as_object_mut(), extra.as_object()) {
            o.extend(e.clone());
        }
        serde_json::from_value(v).unwrap()
    }

    /// The refusal's code and message.
    fn refusal<T: std::fmt::Debug>(r: kube::Result<T>) -> (u16, String) {
        match r {
            Err(kube::Error::Api(s)) => (s.code, s.message),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn pods_get_their_class_priority_as_upstreams_priority_plugin() {
        let api = TestApi::start().await;
        let pods: Api<Pod> = api.api(Some("default"));
        let classes: Api<PriorityClass> = api.api(None);
        let pp = PostParams::default();

        // No class and no default: 0, PreemptLowerPriority.
        let p = pods.create(&pp, &pod("plain", json!({}))).await.unwrap();
        let spec = p.spec.unwrap();
        assert_eq!(spec.priority, Some(0));
        assert_eq!(
            spec.preemption_policy.as_deref(),
            Some("PreemptLowerPriority")
        );
        assert_eq!(spec.priority_class_name, None);

        // A system class.
        let p = pods
            .create(
                &pp,
                &pod(
                    "critical",
                    json!({"priorityClassName": "system-node-critical"}),
                ),
            )
            .await
            .unwrap();
        assert_eq!(p.spec.unwrap().priority, Some(2_000_001_000));

        // A class of one's own, with its policy.
        classes
            .create(
                &pp,
                &class("polite", 50, json!({"preemptionPolicy": "Never"})),
            )
            .await
            .unwrap();
        let p = pods
            .create(&pp, &pod("polite", json!({"priorityClassName": "polite"})))
            .await
            .unwrap();
        let spec = p.spec.unwrap();
        assert_eq!(
            (spec.priority, spec.preemption_policy.as_deref()),
            (Some(50), Some("Never"))
        );

        // An update that leaves priority out keeps it.
        let mut again = pods.get("polite").await.unwrap();
        again.spec.as_mut().unwrap().priority = None;
        again.spec.as_mut().unwrap().preemption_policy = None;
        again.metadata.labels = Some([("a".to_string(), "b".to_string())].into());
        let updated = pods.replace("polite", &pp, &again).await.unwrap();
        assert_eq!(updated.spec.unwrap().priority, Some(50));

        // Unknown class; a priority that disagrees; a policy that does.
        assert_eq!(
            refusal(
                pods.create(&pp, &pod("x", json!({"priorityClassName": "foo"})))
                    .await
            ),
            (
                403,
                "pods \"x\" is forbidden: no PriorityClass with name foo was found".into()
            )
        );
        assert_eq!(
            refusal(pods.create(&pp, &pod("y", json!({"priorityClassName": "polite", "priority": 7}))).await),
            (403, "pods \"y\" is forbidden: the integer value of priority (7) must not be provided in pod spec; priority admission controller computed 50 from the given PriorityClass name".into())
        );
        assert_eq!(
            refusal(pods.create(&pp, &pod("z", json!({"priorityClassName": "polite", "preemptionPolicy": "PreemptLowerPriority"}))).await),
            (403, "pods \"z\" is forbidden: the string value of PreemptionPolicy (PreemptLowerPriority) must not be provided in pod spec; priority admission controller computed Never from the given PriorityClass name".into())
        );
        // Agreeing with the class is fine.
        pods.create(
            &pp,
            &pod("w", json!({"priorityClassName": "polite", "priority": 50})),
        )
        .await
        .unwrap();

        // The global default names pods that name none; one only.
        classes
            .create(&pp, &class("everyone", 5, json!({"globalDefault": true})))
            .await
            .unwrap();
        let p = pods
            .create(&pp, &pod("defaulted", json!({})))
            .await
            .unwrap();
        let spec = p.spec.unwrap();
        assert_eq!(spec.priority_class_name.as_deref(), Some("everyone"));
        assert_eq!(spec.priority, Some(5));
        assert_eq!(
            refusal(classes.create(&pp, &class("second", 6, json!({"globalDefault": true}))).await),
            (403, "priorityclasses.scheduling.k8s.io \"second\" is forbidden: PriorityClass everyone is marked as default. Only one default can exist".into())
        );

        // The system classes stay.
        assert_eq!(
            refusal(classes.delete("system-cluster-critical", &DeleteParams::default()).await),
            (403, "priorityclasses.scheduling.k8s.io \"system-cluster-critical\" is forbidden: this is a system priority class and cannot be deleted".into())
        );
        classes
            .delete("polite", &DeleteParams::default())
            .await
            .unwrap();
        // A class's value is immutable; a system- name is reserved.
        let mut changed = classes.get("everyone").await.unwrap();
        changed.value = Some(6);
        let (code, msg) = refusal(classes.replace("everyone", &pp, &changed).await);
        assert_eq!(code, 422);
        assert!(
            msg.ends_with("value: Forbidden: may not be changed in an update."),
            "{msg}"
        );
        let (code, msg) = refusal(
            classes
                .create(&pp, &class("system-mine", 1, json!({})))
                .await,
        );
        assert_eq!(code, 422);
        assert!(
            msg.contains("system-mine is not a known system priority class"),
            "{msg}"
        );
        api.shut_down();
    }
}
