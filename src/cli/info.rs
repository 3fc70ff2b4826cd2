//! `bosun version` and `bosun api-resources`.

use anyhow::Result;
use serde_json::Value;

use super::client::Ctx;
use super::table::align;

pub async fn version(ctx: &Ctx) -> Result<bool> {
    println!("Client Version: v{}", env!("CARGO_PKG_VERSION"));
    let info = ctx.get_json("/version").await?;
    println!(
        "Server Version: {}",
        info["gitVersion"].as_str().unwrap_or("unknown")
    );
    Ok(true)
}

/// One line of `api-resources`.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiResourceLine {
    pub name: String,
    pub short_names: String,
    pub api_version: String,
    pub namespaced: bool,
    pub kind: String,
}

/// The lines of one APIResourceList (subresources left out, sorted by name).
pub fn lines_of(list: &Value) -> Vec<ApiResourceLine> {
    let gv = list["groupVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let mut out: Vec<ApiResourceLine> = list["resources"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter_map(|r| {
            let name = r["name"].as_str()?;
            if name.contains('/') {
                return None;
            }
            Some(ApiResourceLine {
                name: name.to_string(),
                short_names: r["shortNames"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(Value::as_str)
                            .collect::<Vec<_>>()
                            .join(",")
                    })
                    .unwrap_or_default(),
                api_version: gv.clone(),
                namespaced: r["namespaced"].as_bool().unwrap_or(false),
                kind: r["kind"].as_str().unwrap_or_default().to_string(),
            })
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

pub fn render_api_resources(lines: &[ApiResourceLine]) -> String {
    let mut rows = vec![vec![
        "NAME".to_string(),
        "SHORTNAMES".to_string(),
        "APIVERSION".to_string(),
        "NAMESPACED".to_string(),
        "KIND".to_string(),
    ]];
    for l in lines {
        rows.push(vec![
            l.name.clone(),
            l.short_names.clone(),
            l.api_version.clone(),
            l.namespaced.to_string(),
            l.kind.clone(),
        ]);
    }
    align(&rows)
}

pub async fn api_resources(ctx: &Ctx) -> Result<bool> {
    let mut lines = Vec::new();
    let core = ctx.get_json("/api").await?;
    for v in core["versions"].as_array().cloned().unwrap_or_default() {
        if let Some(v) = v.as_str() {
            lines.extend(lines_of(&ctx.get_json(&format!("/api/{v}")).await?));
        }
    }
    let groups = ctx.get_json("/apis").await?;
    for g in groups["groups"].as_array().cloned().unwrap_or_default() {
        let gv = g["preferredVersion"]["groupVersion"]
            .as_str()
            .or(g["versions"][0]["groupVersion"].as_str());
        if let Some(gv) = gv {
            lines.extend(lines_of(&ctx.get_json(&format!("/apis/{gv}")).await?));
        }
    }
    print!("{}", render_api_resources(&lines));
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn api_resources_table() {
        let list = json!({
            "kind": "APIResourceList",
            "groupVersion": "apps/v1",
            "resources": [
                {"name": "replicasets", "namespaced": true, "kind": "ReplicaSet", "shortNames": ["rs"]},
                {"name": "deployments", "namespaced": true, "kind": "Deployment", "shortNames": ["deploy"]},
                {"name": "deployments/scale", "namespaced": true, "kind": "Scale"},
                {"name": "controllerrevisions", "namespaced": true, "kind": "ControllerRevision"},
            ]
        });
        let out = render_api_resources(&lines_of(&list));
        assert_eq!(
            out,
            "NAME                  SHORTNAMES   APIVERSION   NAMESPACED   KIND\n\
             controllerrevisions                apps/v1      true         ControllerRevision\n\
             deployments           deploy       apps/v1      true         Deployment\n\
             replicasets           rs           apps/v1      true         ReplicaSet\n"
        );
    }
}
