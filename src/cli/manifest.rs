//! Reading manifests the way kubectl does: `-f FILE`, `-f DIR` (with `-R`
//! for subdirectories), `-f -` for stdin; YAML files with several documents
//! separated by `---` lines, JSON files, and `kind: List` wrappers.

use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// One object read from a manifest, with where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    /// The file name as the user gave it (or `STDIN`).
    pub source: String,
    /// 1-based number of the document in its file.
    pub document: usize,
    pub object: Value,
}

impl Manifest {
    pub fn api_version(&self) -> &str {
        self.object["apiVersion"].as_str().unwrap_or_default()
    }
    pub fn kind(&self) -> &str {
        self.object["kind"].as_str().unwrap_or_default()
    }
    pub fn name(&self) -> &str {
        self.object["metadata"]["name"].as_str().unwrap_or_default()
    }
    pub fn namespace(&self) -> Option<&str> {
        self.object["metadata"]["namespace"]
            .as_str()
            .filter(|s| !s.is_empty())
    }
}

/// Why a manifest could not be read; the message names the file, the
/// document and the line, like `parsing nginx.yaml: document 2: line 7: ...`.
#[derive(Debug, PartialEq)]
pub struct ManifestError {
    pub source: String,
    pub document: Option<usize>,
    pub line: Option<usize>,
    pub message: String,
}

impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "parsing {}", self.source)?;
        if let Some(d) = self.document {
            write!(f, ": document {d}")?;
        }
        if let Some(l) = self.line {
            write!(f, ": line {l}")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ManifestError {}

fn err(
    source: &str,
    document: Option<usize>,
    line: Option<usize>,
    message: String,
) -> ManifestError {
    ManifestError {
        source: source.to_string(),
        document,
        line,
        message,
    }
}

/// A `---` separator line, as kubectl's YAML reader recognises it.
fn is_separator(line: &str) -> bool {
    line.starts_with("---")
}

/// Documents that hold only blanks and comments are skipped, as kubectl does.
fn is_blank(doc: &str) -> bool {
    doc.lines().all(|l| {
        let t = l.trim();
        t.is_empty() || t.starts_with('#') || t == "..."
    })
}

/// Splits YAML text into documents: (text, 0-based line of its first line).
fn split_documents(text: &str) -> Vec<(String, usize)> {
    let mut docs = Vec::new();
    let mut current = String::new();
    let mut start = 0;
    for (i, line) in text.lines().enumerate() {
        if is_separator(line) {
            docs.push((std::mem::take(&mut current), start));
            start = i + 1;
        } else {
            current.push_str(line);
            current.push('\n');
        }
    }
    docs.push((current, start));
    docs.into_iter().filter(|(d, _)| !is_blank(d)).collect()
}

/// Parses the text of one file (YAML with any number of documents, or JSON).
pub fn parse_documents(source: &str, text: &str) -> Result<Vec<Manifest>, ManifestError> {
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        let value: Value = serde_json::from_str(text)
            .map_err(|e| err(source, None, Some(e.line()), e.to_string()))?;
        let mut out = Vec::new();
        let values = match value {
            Value::Array(items) => items,
            v => vec![v],
        };
        for (i, v) in values.into_iter().enumerate() {
            push_object(source, i + 1, v, &mut out)?;
        }
        return Ok(out);
    }
    let mut out = Vec::new();
    for (index, (doc, first_line)) in split_documents(text).into_iter().enumerate() {
        let number = index + 1;
        let yaml: serde_yaml::Value = serde_yaml::from_str(&doc).map_err(|e| {
            let line = e.location().map(|l| l.line() + first_line);
            let mut message = e.to_string();
            // serde_yaml appends " at line L column C" relative to the document; drop it,
            // the absolute line is reported separately.
            if let Some(pos) = message.find(" at line ") {
                message.truncate(pos);
            }
            err(source, Some(number), line, message)
        })?;
        let value = serde_json::to_value(&yaml)
            .map_err(|e| err(source, Some(number), Some(first_line + 1), e.to_string()))?;
        push_object(source, number, value, &mut out)?;
    }
    Ok(out)
}

/// Checks one document is an object with `apiVersion` and `kind`; unwraps `kind: List`.
fn push_object(
    source: &str,
    document: usize,
    value: Value,
    out: &mut Vec<Manifest>,
) -> Result<(), ManifestError> {
    if value.is_null() {
        return Ok(());
    }
    if !value.is_object() {
        return Err(err(
            source,
            Some(document),
            None,
            "expected an object with apiVersion and kind".to_string(),
        ));
    }
    if value["kind"].as_str() == Some("List") {
        if let Some(items) = value["items"].as_array() {
            for item in items {
                push_object(source, document, item.clone(), out)?;
            }
        }
        return Ok(());
    }
    for field in ["apiVersion", "kind"] {
        if value[field].as_str().is_none_or(str::is_empty) {
            return Err(err(
                source,
                Some(document),
                None,
                format!("{field} not set"),
            ));
        }
    }
    out.push(Manifest {
        source: source.to_string(),
        document,
        object: value,
    });
    Ok(())
}

fn is_manifest_file(path: &Path) -> bool {
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("yaml" | "yml" | "json")
    )
}

/// The files `-f PATH` names: the file itself, or a directory's `.yaml`,
/// `.yml` and `.json` files (sorted; subdirectories only with `recursive`).
pub fn expand_path(path: &Path, recursive: bool) -> std::io::Result<Vec<PathBuf>> {
    if !path.is_dir() {
        // Reading it reports a missing file with its name.
        std::fs::metadata(path)?;
        return Ok(vec![path.to_path_buf()]);
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(path)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    entries.sort();
    let mut out = Vec::new();
    for entry in entries {
        if entry.is_dir() {
            if recursive {
                out.extend(expand_path(&entry, true)?);
            }
        } else if is_manifest_file(&entry) {
            out.push(entry);
        }
    }
    Ok(out)
}

/// Reads every manifest named by `-f` arguments (`-` reads stdin).
pub fn load(paths: &[String], recursive: bool) -> Result<Vec<Manifest>, ManifestError> {
    let mut out = Vec::new();
    for p in paths {
        if p == "-" {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
                .map_err(|e| err("STDIN", None, None, e.to_string()))?;
            out.extend(parse_documents("STDIN", &text)?);
            continue;
        }
        let files = expand_path(Path::new(p), recursive).map_err(|e| {
            err(
                p,
                None,
                None,
                if e.kind() == std::io::ErrorKind::NotFound {
                    "the path does not exist".to_string()
                } else {
                    e.to_string()
                },
            )
        })?;
        for file in files {
            let name = file.display().to_string();
            let text = std::fs::read_to_string(&file)
                .map_err(|e| err(&name, None, None, e.to_string()))?;
            out.extend(parse_documents(&name, &text)?);
        }
    }
    if out.is_empty() {
        return Err(err(
            &paths.join(","),
            None,
            None,
            "no objects passed".to_string(),
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO: &str = "\
apiVersion: v1
kind: Pod
metadata:
  name: a
---
# the second one
apiVersion: apps/v1
kind: Deployment
metadata:
  name: b
";

    #[test]
    fn several_documents_in_order() {
        let docs = parse_documents("x.yaml", TWO).unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[0].name(), "a");
        assert_eq!(docs[0].document, 1);
        assert_eq!(docs[1].kind(), "Deployment");
        assert_eq!(docs[1].api_version(), "apps/v1");
        assert_eq!(docs[1].document, 2);
        assert_eq!(docs[1].source, "x.yaml");
    }

    #[test]
    fn leading_separator_and_empty_documents_are_skipped() {
        let text = format!("---\n{TWO}---\n# nothing here\n---\n");
        let docs = parse_documents("x.yaml", &text).unwrap();
        assert_eq!(
            docs.iter().map(|d| d.name()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        assert_eq!(docs[1].document, 2);
    }

    #[test]
    fn bad_document_names_file_document_and_absolute_line() {
        // Line 8 of the file (1-based) has the bad indentation.
        let text = "\
apiVersion: v1
kind: Pod
metadata:
  name: a
---
apiVersion: v1
kind: Pod
metadata:
  name: b
 labels: {x: y}
";
        let e = parse_documents("nginx.yaml", text).unwrap_err();
        assert_eq!(e.source, "nginx.yaml");
        assert_eq!(e.document, Some(2));
        assert_eq!(e.line, Some(10));
        let msg = e.to_string();
        assert!(
            msg.starts_with("parsing nginx.yaml: document 2: line 10: "),
            "{msg}"
        );
        assert!(!msg.contains(" at line "), "{msg}");
    }

    #[test]
    fn missing_kind_is_reported() {
        let e = parse_documents("p.yaml", "apiVersion: v1\nmetadata:\n  name: x\n").unwrap_err();
        assert_eq!(e.to_string(), "parsing p.yaml: document 1: kind not set");
    }

    #[test]
    fn json_and_lists() {
        let text = r#"{"apiVersion":"v1","kind":"List","items":[
            {"apiVersion":"v1","kind":"Pod","metadata":{"name":"p1"}},
            {"apiVersion":"v1","kind":"Service","metadata":{"name":"s1","namespace":"web"}}]}"#;
        let docs = parse_documents("l.json", text).unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[1].kind(), "Service");
        assert_eq!(docs[1].namespace(), Some("web"));
        assert_eq!(docs[0].namespace(), None);

        let e = parse_documents("bad.json", "{\n\"kind\": \n}").unwrap_err();
        assert_eq!(e.line, Some(3));
    }

    #[test]
    fn directories_take_manifest_files_and_recurse_only_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("b.yaml"), TWO).unwrap();
        std::fs::write(
            dir.path().join("a.json"),
            r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"n"}}"#,
        )
        .unwrap();
        std::fs::write(dir.path().join("notes.txt"), "not a manifest").unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/c.yml"), TWO).unwrap();
        let d = dir.path().display().to_string();

        let flat = load(std::slice::from_ref(&d), false).unwrap();
        assert_eq!(
            flat.iter().map(|m| m.name()).collect::<Vec<_>>(),
            ["n", "a", "b"]
        );
        let deep = load(&[d], true).unwrap();
        assert_eq!(deep.len(), 5);
        assert!(deep[4].source.ends_with("sub/c.yml"));

        let missing = load(&["/nonexistent/x.yaml".to_string()], false).unwrap_err();
        assert_eq!(
            missing.to_string(),
            "parsing /nonexistent/x.yaml: the path does not exist"
        );
    }
}
