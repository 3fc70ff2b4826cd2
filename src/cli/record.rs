//! `--record`: the command line a user typed, as kubectl writes it into the
//! `kubernetes.io/change-cause` annotation: the command path, the
//! positional arguments, then every flag given on the command line as
//! `--name=value` in name order (kubectl's pflag `Visit`). Connection
//! flags (`--kubeconfig`, `--context`) are left out: they say where the
//! command ran, not what it changed.

use std::sync::OnceLock;

use clap::parser::ValueSource;
use clap::{ArgMatches, Command};

/// The annotation `--record` writes.
pub use bosun::well_known::CHANGE_CAUSE;

/// Flags never recorded.
const CONNECTION_FLAGS: &[&str] = &["kubeconfig", "context"];

static COMMAND_LINE: OnceLock<String> = OnceLock::new();

/// Remembers the parsed command line, for [`command_line`].
pub fn remember(command: &Command, matches: &ArgMatches) {
    let _ = COMMAND_LINE.set(render(command, matches));
}

/// The command line as `--record` records it (empty if not remembered).
pub fn command_line() -> String {
    COMMAND_LINE.get().cloned().unwrap_or_default()
}

/// `bosun set image deployment/web web=bosun.local/web:2 --record=true`.
pub fn render(command: &Command, matches: &ArgMatches) -> String {
    // Building propagates the global flags (`--namespace`) to subcommands.
    let mut built = command.clone();
    built.build();
    let mut path = vec![built.get_name().to_string()];
    let mut command = &built;
    let mut matches = matches;
    while let Some((name, sub)) = matches.subcommand() {
        let Some(next) = command.find_subcommand(name) else {
            break;
        };
        path.push(name.to_string());
        command = next;
        matches = sub;
    }
    let mut positionals: Vec<(usize, Vec<String>)> = Vec::new();
    let mut flags: Vec<(String, String)> = Vec::new();
    for arg in command.get_arguments() {
        let id = arg.get_id().as_str();
        if matches.value_source(id) != Some(ValueSource::CommandLine) {
            continue;
        }
        let values: Vec<String> = matches
            .get_raw(id)
            .map(|v| v.map(|s| s.to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        if arg.is_positional() {
            positionals.push((arg.get_index().unwrap_or(0), values));
        } else if let Some(long) = arg.get_long() {
            if CONNECTION_FLAGS.contains(&long) {
                continue;
            }
            let value = if values.is_empty() {
                "true".to_string()
            } else {
                values.join(",")
            };
            flags.push((long.to_string(), value));
        }
    }
    positionals.sort_by_key(|(i, _)| *i);
    flags.sort();
    let mut out = path.join(" ");
    for (_, values) in positionals {
        for v in values {
            out.push(' ');
            out.push_str(&v);
        }
    }
    for (name, value) in flags {
        out.push_str(&format!(" --{name}={value}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, FromArgMatches};

    use super::*;
    use crate::cli::Cli;

    fn rendered(args: &[&str]) -> String {
        let command = Cli::command();
        let matches = command.clone().try_get_matches_from(args).unwrap();
        Cli::from_arg_matches(&matches).unwrap();
        render(&command, &matches)
    }

    #[test]
    fn records_like_kubectl() {
        assert_eq!(
            rendered(&[
                "bosun",
                "--kubeconfig",
                "/tmp/k",
                "set",
                "image",
                "deployment/web",
                "web=bosun.local/web:2",
                "--record"
            ]),
            "bosun set image deployment/web web=bosun.local/web:2 --record=true"
        );
        assert_eq!(
            rendered(&[
                "bosun",
                "scale",
                "--replicas=4",
                "deploy",
                "web",
                "--record=true",
                "-n",
                "prod"
            ]),
            "bosun scale deploy web --namespace=prod --record=true --replicas=4"
        );
    }
}
