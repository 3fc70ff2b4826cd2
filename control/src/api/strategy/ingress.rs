//! Ingresses, on create, as Kubernetes' `DefaultIngressClass` admission
//! plugin: an Ingress that names no class (neither `spec.ingressClassName`
//! nor the deprecated `kubernetes.io/ingress.class` annotation) gets the
//! default IngressClass, the one annotated
//! `ingressclass.kubernetes.io/is-default-class: "true"` (the newest, then
//! the first by name, if several are). Without a default it is stored
//! as given.

use async_trait::async_trait;
use bosun::validation::FieldError;
use serde_json::{json, Value};

use super::Strategy;
use crate::api::error::ApiResult;
use crate::api::request::list_all;
use crate::api::{object, ApiState};

/// The annotation that makes an IngressClass the default.
pub const DEFAULT_CLASS_ANNOTATION: &str = "ingressclass.kubernetes.io/is-default-class";
/// The class annotation Ingresses used before `spec.ingressClassName`.
pub const CLASS_ANNOTATION: &str = "kubernetes.io/ingress.class";

pub struct IngressStrategy;

/// The default class among `classes`, as [`super::volume::default_class`]
/// picks among StorageClasses.
pub fn default_ingress_class(classes: &[Value]) -> Option<String> {
    classes
        .iter()
        .filter(|c| {
            c.pointer("/metadata/annotations")
                .and_then(|a| a.get(DEFAULT_CLASS_ANNOTATION))
                .and_then(Value::as_str)
                == Some("true")
                && object::meta_str(c, "deletionTimestamp").is_none()
        })
        .max_by(|a, b| {
            let created = |c: &Value| {
                object::meta_str(c, "creationTimestamp")
                    .unwrap_or("")
                    .to_string()
            };
            let name = |c: &Value| object::meta_str(c, "name").unwrap_or("").to_string();
            created(a)
                .cmp(&created(b))
                .then_with(|| name(b).cmp(&name(a)))
        })
        .and_then(|c| object::meta_str(c, "name").map(str::to_string))
}

#[async_trait]
impl Strategy for IngressStrategy {
    async fn allocate(&self, state: &ApiState, obj: &mut Value) -> ApiResult<Vec<FieldError>> {
        let named = obj
            .pointer("/spec/ingressClassName")
            .is_some_and(|v| !v.is_null())
            || obj
                .pointer("/metadata/annotations")
                .and_then(|a| a.get(CLASS_ANNOTATION))
                .is_some();
        if named {
            return Ok(Vec::new());
        }
        let res = bosun::resources::by_name("ingressclasses.networking.k8s.io").expect("served");
        let classes = list_all(state, res).await?;
        if let (Some(class), Some(spec)) = (
            default_ingress_class(&classes),
            obj.get_mut("spec").and_then(Value::as_object_mut),
        ) {
            spec.insert("ingressClassName".into(), json!(class));
        }
        Ok(Vec::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(name: &str, created: &str, default: bool) -> Value {
        json!({"metadata": {"name": name, "creationTimestamp": created,
            "annotations": {DEFAULT_CLASS_ANNOTATION: default.to_string()}},
            "spec": {"controller": "x.io/y"}})
    }

    #[test]
    fn the_newest_default_ingress_class_wins() {
        assert_eq!(default_ingress_class(&[]), None);
        let plain = class("plain", "2026-01-02T00:00:00Z", false);
        assert_eq!(default_ingress_class(std::slice::from_ref(&plain)), None);
        let old = class("bosun", "2026-01-01T00:00:00Z", true);
        let new = class("nginx", "2026-01-03T00:00:00Z", true);
        assert_eq!(
            default_ingress_class(&[old.clone(), plain, new]).as_deref(),
            Some("nginx")
        );
    }
}
