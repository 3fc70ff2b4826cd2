//! `bosun`: the command line for a bosun cluster.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
