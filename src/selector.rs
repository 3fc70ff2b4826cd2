//! TEMPORARY: replaced by the selector module from branch `valid`.
use std::collections::BTreeMap;
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SelectorError(pub String);
#[derive(Debug, Clone, Default)]
pub struct LabelSelector(Vec<(String, String, bool)>);
impl LabelSelector {
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let mut out = Vec::new();
        for part in s.split(',').filter(|p| !p.is_empty()) {
            if let Some((k, v)) = part.split_once("!=") {
                out.push((k.to_string(), v.to_string(), false));
            } else if let Some((k, v)) = part.split_once('=') {
                out.push((k.to_string(), v.trim_start_matches('=').to_string(), true));
            } else {
                return Err(SelectorError(part.to_string()));
            }
        }
        Ok(LabelSelector(out))
    }
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0
            .iter()
            .all(|(k, v, eq)| (labels.get(k) == Some(v)) == *eq)
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}
pub fn from_label_selector(
    sel: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
) -> Result<LabelSelector, SelectorError> {
    Ok(LabelSelector(
        sel.match_labels
            .clone()
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, v, true))
            .collect(),
    ))
}
#[derive(Debug, Clone, Default)]
pub struct FieldSelector(Vec<(String, String, bool)>);
impl FieldSelector {
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        LabelSelector::parse(s).map(|l| FieldSelector(l.0))
    }
    pub fn matches(&self, get: impl Fn(&str) -> Option<String>) -> bool {
        self.0
            .iter()
            .all(|(k, v, eq)| (get(k).unwrap_or_default() == *v) == *eq)
    }
    pub fn fields(&self) -> Vec<&str> {
        self.0.iter().map(|(k, _, _)| k.as_str()).collect()
    }
}
