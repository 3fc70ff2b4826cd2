//! Ingresses, on create, as Kubernetes' `DefaultIngressClass` admission
//! plugin: an Ingress that names no class (neither `spec.ingressClassName`
//! nor the deprecated `kubernetes.io/ingress.class` annotation) gets the
//! default IngressClass, the one annotated
//! `ingressclass.kubernetes.io/is-default-class: "true"` (the newest, then
//! the first by name, if several are). Without a default it is stored
//! as given.

use async_trait::async_trait;
use bosun::validation::FieldError;
use serde_json::Value;

use super::Strategy;
use crate::api::error::ApiResult;
use crate::api::ApiState;

/// The annotation that makes an IngressClass the default.
pub const DEFAULT_CLASS_ANNOTATION: &str = "ingressclass.kubernetes.io/is-default-class";
/// The class annotation Ingresses used before `spec.ingressClassName`.
pub const CLASS_ANNOTATION: &str = "kubernetes.io/ingress.class";

pub struct IngressStrategy;

/// The default class among `classes`, as [`super::volume::default_class`]
/// picks among StorageClasses.
pub fn default_ingress_class(classes: &[Value]) -> Option<String> {
    super::newest_default(classes, |c| {
        c.pointer("/metadata/annotations")
            .and_then(|a| a.get(DEFAULT_CLASS_ANNOTATION))
            .and_then(Value::as_str)
            == Some("true")
    })
}

#[async_trait]
impl Strategy for IngressStrategy {
    async fn allocate(&self, state: &ApiState, obj: &mut Value) -> ApiResult<Vec<FieldError>> {
        super::set_default_class(
            state,
            obj,
            "ingressclasses.networking.k8s.io",
            "ingressClassName",
            CLASS_ANNOTATION,
            default_ingress_class,
        )
        .await?;
        Ok(Vec::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
