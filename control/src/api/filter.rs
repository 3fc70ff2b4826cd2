//! `labelSelector` and `fieldSelector` of list and watch requests.

use bosun::resources::ResourceInfo;
use bosun::selector::{FieldSelector, LabelSelector};
#[cfg(test)]
use serde_json::Value;
#[cfg(test)]
use std::collections::BTreeMap;

use super::error::{ApiError, ApiResult};

/// The fields each kind can be selected by, besides metadata.name and
/// metadata.namespace (Kubernetes' field label conversion functions).
pub(super) fn selectable_fields(kind: &str) -> &'static [&'static str] {
    match kind {
        "Pod" => &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
        "Event" => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ],
        "Node" => &["spec.unschedulable"],
        "Namespace" => &["status.phase"],
        "Job" => &["status.successful"],
        "ReplicaSet" => &["status.replicas"],
        _ => &[],
    }
}

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
        let labels =
            match label_selector.filter(|s| !s.trim().is_empty()) {
                None => None,
                Some(s) => Some(LabelSelector::parse(s).map_err(|e| {
                    ApiError::bad_request(format!("unable to parse requirement: {e}"))
                })?),
            };
        let fields = match field_selector.filter(|s| !s.trim().is_empty()) {
            None => None,
            Some(s) => {
                let sel = FieldSelector::parse(s)
                    .map_err(|e| ApiError::bad_request(format!("invalid field selector: {e}")))?;
                for f in sel.fields() {
                    let ok = f == "metadata.name"
                        || f == "metadata.namespace"
                        || selectable_fields(res.kind).contains(&f);
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
    pub fn matches_attrs(&self, attrs: &super::items::Attrs) -> bool {
        if let Some(l) = &self.labels {
            if !l.matches(&attrs.labels) {
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
    use serde_json::json;

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
}
