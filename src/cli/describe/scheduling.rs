//! `describe priorityclass`: kubectl's layout (`describePriorityClass`).

use serde_json::Value;

use super::writer::{str_of, Out};

pub(super) fn describe_priority_class(pc: &Value) -> Out {
    let mut out = Out::default();
    out.kv(0, "Name", str_of(&pc["metadata"]["name"]));
    out.kv(0, "Value", &pc["value"].as_i64().unwrap_or(0).to_string());
    let global = pc["globalDefault"].as_bool().unwrap_or(false);
    out.kv(0, "GlobalDefault", &global.to_string());
    out.kv(0, "PreemptionPolicy", str_of(&pc["preemptionPolicy"]));
    out.kv(0, "Description", str_of(&pc["description"]));
    // labels.FormatLabels: k=v joined by commas, sorted, or <none>.
    let annotations = pc["metadata"]["annotations"]
        .as_object()
        .map(|m| {
            let mut kv: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect();
            kv.sort();
            kv.join(",")
        })
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "<none>".into());
    out.kv(0, "Annotations", &annotations);
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn reads_like_kubectl() {
        let pc = json!({"metadata": {"name": "high", "annotations": {"b": "2", "a": "1"}},
            "value": 1000, "preemptionPolicy": "Never", "description": "important"});
        assert_eq!(
            describe_priority_class(&pc).finish(),
            "Name:              high\nValue:             1000\nGlobalDefault:     false\nPreemptionPolicy:  Never\nDescription:       important\nAnnotations:       a=1,b=2\n"
        );
    }
}
