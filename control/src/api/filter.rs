//! `labelSelector` and `fieldSelector` of list and watch requests.

use bosun::resources::ResourceInfo;
use bosun::selector::{FieldSelector, LabelSelector};
#[cfg(test)]
use serde_json::Value;
#[cfg(test)]
use std::collections::BTreeMap;

use super::error::{ApiError, ApiResult};
use super::items::{selectable, Attrs};

/// A field's value as a selector compares it: missing fields are "".
#[cfg(test)]
fn field_value(obj: &Value, path: &str) -> String {
    let pointer = format!("/{}", path.replace('.', "/"));
    let value = if path == "source" {
        obj.pointer("/source/component")
    } else {
        obj.pointer(&pointer)
    };
    match value {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    }
}

#[cfg(test)]
fn labels_of(obj: &Value) -> BTreeMap<String, String> {
    obj.pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

#[derive(Debug, Clone, Default)]
pub struct Filter {
    labels: Option<LabelSelector>,
    fields: Option<FieldSelector>,
}

impl Filter {
    pub fn parse(
        res: &ResourceInfo,
        label_selector: Option<&str>,
        field_selector: Option<&str>,
    ) -> ApiResult<Filter> {
        let labels = match label_selector.filter(|s| !s.is_empty()) {
            None => None,
            Some(s) => {
                Some(LabelSelector::parse(s).map_err(|e| ApiError::bad_request(e.to_string()))?)
            }
        };
        // Only the empty string selects everything: upstream refuses " ".
        let fields = match field_selector.filter(|s| !s.is_empty()) {
            None => None,
            Some(s) => {
                let sel =
                    FieldSelector::parse(s).map_err(|e| ApiError::bad_request(e.to_string()))?;
                for f in sel.fields() {
                    let ok = f == "metadata.name"
                        || f == "metadata.namespace"
                        || selectable(res).contains(&f);
                    if !ok {
                        return Err(ApiError::bad_request(format!(
                            "field label not supported: {f}"
                        )));
                    }
                }
                Some(sel)
            }
        };
        Ok(Filter { labels, fields })
    }

    /// Whether the request selects nothing out (no selector).
    pub fn is_empty(&self) -> bool {
        self.labels.is_none() && self.fields.is_none()
    }

    /// Whether an object matches, by the attributes read from its stored
    /// bytes ([`super::items::Attrs`]).
    pub fn matches_attrs(&self, attrs: &Attrs) -> bool {
        if let Some(l) = &self.labels {
            if !l.matches_by(|key| attrs.label(key)) {
                return false;
            }
        }
        if let Some(f) = &self.fields {
            if !f.matches(|path| Some(attrs.field(path))) {
                return false;
            }
        }
        true
    }

    /// Whether a decoded object matches: the reference the attributes'
    /// matching is tested against.
    #[cfg(test)]
    pub fn matches(&self, obj: &Value) -> bool {
        if let Some(l) = &self.labels {
            if !l.matches(&labels_of(obj)) {
                return false;
            }
        }
        if let Some(f) = &self.fields {
            if !f.matches(|path| Some(field_value(obj, path))) {
                return false;
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::items;
    use crate::store::Stored;
    use serde_json::json;

    fn pods() -> &'static ResourceInfo {
        bosun::resources::by_name("pods").unwrap()
    }

    #[test]
    fn pods_select_by_node_and_phase() {
        let pods = bosun::resources::by_name("pods").unwrap();
        let f = Filter::parse(
            pods,
            Some("app=web"),
            Some("spec.nodeName=n1,status.phase!=Failed"),
        )
        .unwrap();
        let pod = json!({"metadata": {"labels": {"app": "web"}},
            "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}});
        assert!(f.matches(&pod));
        let other = json!({"metadata": {"labels": {"app": "web"}}, "spec": {}});
        assert!(!f.matches(&other));
        let unbound = Filter::parse(pods, None, Some("spec.nodeName=")).unwrap();
        assert!(unbound.matches(&other));
    }

    #[test]
    fn unsupported_field_is_refused() {
        let deploy = bosun::resources::by_name("deploy").unwrap();
        let err = Filter::parse(deploy, None, Some("spec.replicas=3")).unwrap_err();
        assert_eq!(err.code, 400);
        assert!(err.message.contains("spec.replicas"));
    }

    /// What each kind of selector selects of a pod, by the attributes
    /// read from its bytes.
    #[test]
    fn selectors_on_a_pods_attributes() {
        let pod = json!({"metadata": {"name": "web-1", "namespace": "default",
                "labels": {"app": "web", "tier": "fe", "pod-template-hash": "abc"}},
            "spec": {"nodeName": "n1", "hostNetwork": true},
            "status": {"phase": "Running"}});
        let value = Stored::new(serde_json::to_vec(&pod).unwrap());
        let attrs = &items::derived(pods(), &value).attrs;
        for (labels, fields, want) in [
            (Some("app=web"), None, true),
            (Some("app==web"), None, true),
            (Some("app=db"), None, false),
            (Some("app!=db"), None, true),
            (Some("app!=web"), None, false),
            (Some("canary!=x"), None, true),
            (Some("tier in (fe,be)"), None, true),
            (Some("tier in (be)"), None, false),
            (Some("canary in (x)"), None, false),
            (Some("tier notin (be)"), None, true),
            (Some("tier notin (fe,be)"), None, false),
            (Some("canary notin (x)"), None, true),
            (Some("pod-template-hash"), None, true),
            (Some("canary"), None, false),
            (Some("!canary"), None, true),
            (Some("!tier"), None, false),
            (Some("app=web,tier notin (be),!canary"), None, true),
            (Some("app=web,canary"), None, false),
            (None, Some("metadata.name=web-1"), true),
            (None, Some("metadata.name!=web-1"), false),
            (
                None,
                Some("metadata.namespace=default,spec.nodeName=n1"),
                true,
            ),
            (None, Some("spec.nodeName=n2"), false),
            (None, Some("spec.hostNetwork=true"), true),
            (None, Some("status.podIP="), true),
            (None, Some("status.podIP!="), false),
            (None, Some("status.phase!=Failed"), true),
            (Some("app=web"), Some("status.phase=Pending"), false),
            (Some("app=db"), Some("status.phase=Running"), false),
            (Some("app in (web)"), Some("status.phase=Running"), true),
        ] {
            let filter = Filter::parse(pods(), labels, fields).unwrap();
            assert_eq!(filter.matches_attrs(attrs), want, "{labels:?} {fields:?}");
        }
    }

    /// A selector matches the attributes read from the bytes exactly as it
    /// matches the decoded object.
    #[test]
    fn attributes_select_as_the_decoded_object_does() {
        let objects = [
            json!({"metadata": {"name": "a", "namespace": "ns1", "labels": {"app": "web", "tier": "fe"}},
                "spec": {"nodeName": "n1", "hostNetwork": true, "restartPolicy": "Always"},
                "status": {"phase": "Running", "podIP": "10.0.0.1"}}),
            json!({"metadata": {"name": "b", "namespace": "ns2", "labels": {"app": "db"}},
                "spec": {"containers": [{"name": "x"}]}, "status": {}}),
            json!({"metadata": {"name": "c\\\"d"}, "spec": null}),
            json!({"spec": {"nodeName": 3}}),
        ];
        let selectors = [
            (Some("app=web"), None),
            (Some("app in (web,db),!canary"), None),
            (Some("tier"), Some("spec.nodeName=n1")),
            (None, Some("spec.nodeName=")),
            (None, Some("spec.nodeName!=n1,status.phase!=Failed")),
            (None, Some("spec.hostNetwork=true")),
            (None, Some("metadata.name=c\\\\\"d")),
            (None, Some("metadata.namespace=ns2,status.podIP=")),
            (None, Some("spec.nodeName=3")),
        ];
        for (labels, fields) in selectors {
            let filter = Filter::parse(pods(), labels, fields).unwrap();
            for obj in &objects {
                let value = Stored::new(serde_json::to_vec(obj).unwrap());
                let d = items::derived(pods(), &value);
                assert_eq!(
                    filter.matches_attrs(&d.attrs),
                    filter.matches(obj),
                    "{labels:?} {fields:?} on {obj}"
                );
            }
        }
    }
}
