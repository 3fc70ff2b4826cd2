//! The objects of kubectl's `create configmap` and `create secret
//! generic|tls|docker-registry` generators: keys from `--from-literal`,
//! `--from-file` (a file, `key=file`, or every regular file of a directory)
//! and `--from-env-file`, checked as kubectl checks them before anything is
//! sent.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{anyhow, bail, Context as _, Result};
use base64::Engine;
use serde_json::{json, Value};

use bosun::names::{is_config_map_key, is_env_var_name};

/// The flags `create configmap` and `create secret generic` share.
#[derive(Debug, Default, clap::Args)]
pub struct DataSources {
    /// Key and literal value to insert (`--from-literal=key=value`).
    #[arg(long = "from-literal")]
    pub from_literal: Vec<String>,
    /// A file, `key=file`, or a directory whose regular files become keys.
    #[arg(long = "from-file")]
    pub from_file: Vec<String>,
    /// A file of `KEY=VALUE` lines.
    #[arg(long = "from-env-file")]
    pub from_env_file: Vec<String>,
}

/// The keys gathered for one object: text values and binary ones (a
/// ConfigMap keeps file contents that are not UTF-8 in `binaryData`).
#[derive(Debug, Default, PartialEq)]
pub struct Entries {
    pub text: BTreeMap<String, String>,
    pub binary: BTreeMap<String, Vec<u8>>,
}

impl Entries {
    fn add(&mut self, kind: &str, name: &str, key: &str, value: Vec<u8>) -> Result<()> {
        if let Some(msg) = is_config_map_key(key).into_iter().next() {
            bail!("{key:?} is not a valid key name for a {kind}: {msg}");
        }
        if self.text.contains_key(key) || self.binary.contains_key(key) {
            bail!("cannot add key {key:?}, another key by that name already exists in Data for {kind} {name:?}");
        }
        match String::from_utf8(value) {
            Ok(s) => self.text.insert(key.to_string(), s),
            Err(e) => self
                .binary
                .insert(key.to_string(), e.into_bytes())
                .map(|_| String::new()),
        };
        Ok(())
    }
}

/// Reads the sources in kubectl's order: files, literals, env files.
pub fn gather(kind: &str, name: &str, src: &DataSources) -> Result<Entries> {
    if !src.from_env_file.is_empty() && (!src.from_file.is_empty() || !src.from_literal.is_empty())
    {
        bail!("from-env-file cannot be combined with from-file or from-literal");
    }
    let mut out = Entries::default();
    for spec in &src.from_file {
        let (key, path) = match spec.split_once('=') {
            Some((k, p)) if !k.is_empty() && !p.is_empty() => (Some(k), p),
            Some(_) => bail!("key names or file paths cannot be empty: {spec:?}"),
            None => (None, spec.as_str()),
        };
        let p = Path::new(path);
        if p.is_dir() {
            if key.is_some() {
                bail!("cannot give a key name for a directory path");
            }
            let mut files: Vec<_> = std::fs::read_dir(p)
                .with_context(|| format!("error reading {path}"))?
                .filter_map(|e| e.ok())
                .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
                .collect();
            files.sort_by_key(|e| e.file_name());
            for f in files {
                let k = f.file_name().to_string_lossy().into_owned();
                // kubectl skips files whose names are not valid keys.
                if !is_config_map_key(&k).is_empty() {
                    continue;
                }
                let bytes = std::fs::read(f.path())
                    .with_context(|| format!("error reading {}", f.path().display()))?;
                out.add(kind, name, &k, bytes)?;
            }
        } else {
            let bytes = std::fs::read(p).with_context(|| format!("error reading {path}"))?;
            let k = match key {
                Some(k) => k.to_string(),
                None => p
                    .file_name()
                    .map(|f| f.to_string_lossy().into_owned())
                    .ok_or_else(|| anyhow!("no file name in {path:?}"))?,
            };
            out.add(kind, name, &k, bytes)?;
        }
    }
    for lit in &src.from_literal {
        let (k, v) = lit
            .split_once('=')
            .filter(|(k, _)| !k.is_empty())
            .ok_or_else(|| anyhow!("invalid literal source {lit}, expected key=value"))?;
        out.add(kind, name, k, v.as_bytes().to_vec())?;
    }
    for path in &src.from_env_file {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("error reading {path}"))?;
        for (k, v) in parse_env_file(&text, |k| std::env::var(k).ok())
            .with_context(|| format!("error reading {path}"))?
        {
            // A later line wins over an earlier one, as kubectl's env files.
            out.text.insert(k, v);
        }
    }
    Ok(out)
}

/// kubectl's env file: `KEY=VALUE` lines, blank lines and `#` comments
/// skipped, leading whitespace dropped, a line without `=` taking its value
/// from the environment (skipped when unset); keys must be env var names.
pub fn parse_env_file(
    text: &str,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    for (i, line) in text.lines().enumerate() {
        let line = line.trim_start();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (k, v) = match line.split_once('=') {
            Some((k, v)) => (k, Some(v.to_string())),
            None => (line, env(line)),
        };
        if let Some(msg) = is_env_var_name(k).into_iter().next() {
            bail!("{k:?} is not a valid key name: {msg} (line {})", i + 1);
        }
        if let Some(v) = v {
            out.push((k.to_string(), v));
        }
    }
    Ok(out)
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// `create configmap NAME ...`.
pub fn config_map(name: &str, entries: Entries) -> Value {
    let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}});
    if !entries.text.is_empty() {
        cm["data"] = json!(entries.text);
    }
    if !entries.binary.is_empty() {
        let binary: BTreeMap<&String, String> =
            entries.binary.iter().map(|(k, v)| (k, b64(v))).collect();
        cm["binaryData"] = json!(binary);
    }
    cm
}

/// A Secret of `type_` with `data` (raw bytes, encoded here).
pub fn secret(name: &str, type_: Option<&str>, entries: Entries) -> Value {
    let mut data: BTreeMap<String, String> = entries
        .text
        .into_iter()
        .map(|(k, v)| (k, b64(v.as_bytes())))
        .collect();
    data.extend(entries.binary.into_iter().map(|(k, v)| (k, b64(&v))));
    let mut s = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}});
    if let Some(t) = type_.filter(|t| !t.is_empty()) {
        s["type"] = json!(t);
    }
    if !data.is_empty() {
        s["data"] = json!(data);
    }
    s
}

/// `create secret tls NAME --cert --key`.
pub fn tls_secret(name: &str, cert: &str, key: &str) -> Result<Value> {
    let crt = std::fs::read(cert).with_context(|| format!("error reading {cert}"))?;
    let k = std::fs::read(key).with_context(|| format!("error reading {key}"))?;
    let mut e = Entries::default();
    e.binary.insert("tls.crt".into(), crt);
    e.binary.insert("tls.key".into(), k);
    Ok(secret(name, Some("kubernetes.io/tls"), e))
}

/// `create secret docker-registry NAME ...`: `.dockerconfigjson` as kubectl
/// writes it (`auth` is base64 of `user:password`, an empty email left out).
pub fn docker_registry_secret(
    name: &str,
    server: &str,
    username: &str,
    password: &str,
    email: &str,
) -> Value {
    let mut entry = json!({
        "username": username,
        "password": password,
        "auth": b64(format!("{username}:{password}").as_bytes()),
    });
    if !email.is_empty() {
        entry["email"] = json!(email);
    }
    let config = json!({"auths": {server: entry}});
    let mut e = Entries::default();
    e.binary.insert(
        ".dockerconfigjson".into(),
        serde_json::to_vec(&config).unwrap(),
    );
    secret(name, Some("kubernetes.io/dockerconfigjson"), e)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sources(lit: &[&str], file: &[&str], env: &[&str]) -> DataSources {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect();
        DataSources {
            from_literal: s(lit),
            from_file: s(file),
            from_env_file: s(env),
        }
    }

    #[test]
    fn literals_files_and_directories() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("game.properties"), "lives=3\n").unwrap();
        std::fs::write(dir.path().join("bin"), [0xff, 0x00]).unwrap();
        std::fs::write(dir.path().join("bad name"), "x").unwrap();
        let d = dir.path().to_str().unwrap().to_string();
        let file = format!("{d}/game.properties");
        let named = format!("ui={file}");
        let e = gather(
            "ConfigMap",
            "c",
            &sources(&["a=1", "b=x=y"], &[&d, &named], &[]),
        )
        .unwrap();
        assert_eq!(e.text["a"], "1");
        assert_eq!(e.text["b"], "x=y");
        assert_eq!(e.text["game.properties"], "lives=3\n");
        assert_eq!(e.text["ui"], "lives=3\n");
        assert!(!e.text.contains_key("bad name"), "skipped as kubectl does");
        assert_eq!(e.binary["bin"], vec![0xff, 0x00]);
        let cm = config_map("c", e);
        assert_eq!(cm["binaryData"]["bin"], "/wA=");

        let dup = gather("ConfigMap", "c", &sources(&["a=1", "a=2"], &[], &[]));
        assert_eq!(
            dup.unwrap_err().to_string(),
            "cannot add key \"a\", another key by that name already exists in Data for ConfigMap \"c\""
        );
        let bad = gather("Secret", "s", &sources(&["a/b=1"], &[], &[]));
        assert!(bad
            .unwrap_err()
            .to_string()
            .starts_with("\"a/b\" is not a valid key name for a Secret: a valid config key"));
        let both = gather("Secret", "s", &sources(&["a=1"], &[], &["x.env"]));
        assert!(both.unwrap_err().to_string().contains("cannot be combined"));
    }

    #[test]
    fn env_files_as_kubectl_reads_them() {
        let text = "\u{feff}# comment\n\n  A=1\nB=two words\nFROM_ENV\nUNSET\nA=again\n";
        let got = parse_env_file(text, |k| (k == "FROM_ENV").then(|| "e".to_string())).unwrap();
        assert_eq!(
            got,
            vec![
                ("A".to_string(), "1".to_string()),
                ("B".to_string(), "two words".to_string()),
                ("FROM_ENV".to_string(), "e".to_string()),
                ("A".to_string(), "again".to_string()),
            ]
        );
        assert!(parse_env_file("1BAD=x\n", |_| None).is_err());
    }

    #[test]
    fn secrets_are_base64_and_typed() {
        let e = gather("Secret", "s", &sources(&["user=admin"], &[], &[])).unwrap();
        let s = secret("s", Some("Opaque"), e);
        assert_eq!(s["data"]["user"], "YWRtaW4=");
        assert_eq!(s["type"], "Opaque");
        let reg = docker_registry_secret("r", "https://reg.example", "u", "p", "");
        let cfg = base64::engine::general_purpose::STANDARD
            .decode(reg["data"][".dockerconfigjson"].as_str().unwrap())
            .unwrap();
        let cfg: Value = serde_json::from_slice(&cfg).unwrap();
        assert_eq!(
            cfg,
            json!({"auths": {"https://reg.example": {"username": "u", "password": "p", "auth": "dTpw"}}})
        );
        assert_eq!(reg["type"], "kubernetes.io/dockerconfigjson");
    }
}
