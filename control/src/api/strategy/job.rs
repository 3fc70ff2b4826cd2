//! Jobs: unless `manualSelector` is set, a Job selects its pods by its own
//! uid, and its template carries that uid and the Job's name as labels.

use serde_json::{json, Value};

use super::Strategy;
use crate::api::ApiOptions;

pub struct JobStrategy;

impl Strategy for JobStrategy {
    fn prepare_for_create(&self, _options: &ApiOptions, job: &mut Value) {
        job_selector(job);
    }
}

/// A Job without `manualSelector: true` selects its pods by its own uid,
/// and its template carries that uid and the job's name as labels.
fn job_selector(job: &mut Value) {
    if job.pointer("/spec/manualSelector") == Some(&json!(true)) {
        return;
    }
    let uid = job["metadata"]["uid"].clone();
    let name = job["metadata"]["name"].clone();
    job["spec"]["selector"] = json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}});
    let template = &mut job["spec"]["template"];
    if !template["metadata"].is_object() {
        template["metadata"] = json!({});
    }
    if !template["metadata"]["labels"].is_object() {
        template["metadata"]["labels"] = json!({});
    }
    let labels = template["metadata"]["labels"]
        .as_object_mut()
        .expect("object");
    labels.insert("batch.kubernetes.io/controller-uid".into(), uid.clone());
    labels.insert("batch.kubernetes.io/job-name".into(), name.clone());
    labels.insert("controller-uid".into(), uid);
    labels.insert("job-name".into(), name);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_select_their_own_pods() {
        let mut job = json!({"metadata": {"name": "pi", "uid": "u1"},
            "spec": {"template": {"spec": {}}}});
        job_selector(&mut job);
        assert_eq!(
            job["spec"]["selector"]["matchLabels"]["batch.kubernetes.io/controller-uid"],
            "u1"
        );
        assert_eq!(
            job["spec"]["template"]["metadata"]["labels"]["job-name"],
            "pi"
        );
    }
}
