//! `catnip-engine run` (live, NFQUEUE) and `catnip-engine replay` (trace, offline).

use anyhow::{Context, Result};
use catnip_engine::config::Config;
use catnip_engine::link::Link;
use catnip_engine::replay;
use clap::{Parser, Subcommand};
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::PathBuf;

#[derive(Parser)]
#[command(version, about = "Router queue engine of the CATNIP testbed")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Emulate the configured links on live packets (run inside the router's namespace).
    Run {
        #[arg(long)]
        config: PathBuf,
        #[arg(long)]
        stats: PathBuf,
    },
    /// Run one link of the config over a packet trace and write every packet's fate.
    Replay {
        #[arg(long)]
        config: PathBuf,
        #[arg(long)]
        trace: PathBuf,
        #[arg(long)]
        out: PathBuf,
        /// Link name (default: the first link of the config).
        #[arg(long)]
        link: Option<String>,
    },
    /// Print the policy and edge function kinds this engine has, and the parameters each takes
    /// (all required: the engine has no defaults), as JSON (`catnip check`, tests/test_kinds_match.py).
    Kinds,
    /// Print every bound the engine checks when it loads a configuration, as JSON.
    Limits,
    /// Load a configuration as `run` does, without running: exit 0, or 2 with the error. Without
    /// --config, one configuration per line of standard input, one JSON answer per line
    /// (`{"ok": true}` or `{"ok": false, "error": "..."}`).
    Check {
        #[arg(long)]
        config: Option<PathBuf>,
    },
}

fn main() {
    if let Err(e) = run(Cli::parse()) {
        eprintln!("catnip-engine: error: {e:#}");
        std::process::exit(2);
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Kinds => {
            let params = |list: Vec<(&str, &[&str])>| {
                list.into_iter()
                    .map(|(kind, p)| (kind.to_string(), serde_json::json!(p)))
                    .collect::<serde_json::Map<_, _>>()
            };
            let kinds = serde_json::json!({
                "policies": catnip_engine::policy::KINDS,
                "edge": catnip_engine::edge::KINDS,
                "parameters": {
                    "policies": params(catnip_engine::policy::parameters()),
                    "edge": params(catnip_engine::edge::parameters()),
                },
            });
            println!("{kinds}");
            Ok(())
        }
        Command::Limits => {
            println!("{}", catnip_engine::config::limits());
            Ok(())
        }
        Command::Check { config: Some(path) } => Config::load(&path).map(|_| println!("ok")),
        Command::Check { config: None } => {
            let mut out = std::io::stdout().lock();
            for line in std::io::stdin().lock().lines() {
                let answer = match Config::parse(&line?) {
                    Ok(_) => serde_json::json!({"ok": true}),
                    Err(e) => serde_json::json!({"ok": false, "error": format!("{e:#}")}),
                };
                writeln!(out, "{answer}")?;
            }
            Ok(())
        }
        Command::Run { config, stats } => catnip_engine::nfq_loop::run(&Config::load(&config)?, &stats),
        Command::Replay { config, trace, out, link } => {
            let config = Config::load(&config)?;
            let chosen = match &link {
                Some(name) => config
                    .links
                    .iter()
                    .find(|l| &l.name == name)
                    .with_context(|| format!("--link {name:?}: no such link in the config"))?,
                None => &config.links[0],
            };
            let mut l = Link::new(chosen, config.seed).map_err(anyhow::Error::msg)?;
            let file = File::open(&trace).with_context(|| format!("cannot read {}", trace.display()))?;
            let packets = replay::read_trace(BufReader::new(file))?;
            let fates = replay::replay(&mut l, &packets)?;
            let out_file = File::create(&out).with_context(|| format!("cannot write {}", out.display()))?;
            replay::write_fates(BufWriter::new(out_file), &packets, &fates)
        }
    }
}
