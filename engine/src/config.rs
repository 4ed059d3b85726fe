//! The engine's configuration file (docs/architecture.md, "Queue engine contract").

use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::collections::HashSet;
use std::path::Path;

#[derive(Debug, Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(deny_unknown_fields, rename_all = "lowercase")]
pub enum Buffer {
    Packets(u64),
    Bytes(u64),
}

/// One drop-precedence level of RIO, 3-level RED or FRIO (thresholds in packets).
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct LevelConfig {
    pub min_th: f64,
    pub max_th: f64,
    pub max_p: f64,
}

/// A policy and its parameters; which parameters apply depends on `kind` (src/policy/mod.rs).
#[derive(Debug, Deserialize, Clone, Default)]
#[serde(deny_unknown_fields)]
pub struct PolicyConfig {
    pub kind: String,
    /// RED and FRED: thresholds on the average queue, in packets.
    #[serde(default)]
    pub min_th: Option<f64>,
    #[serde(default)]
    pub max_th: Option<f64>,
    /// RED, RIO, 3-level RED, FRED and FRIO: weight of the moving average.
    #[serde(default)]
    pub w_q: Option<f64>,
    /// RED and FRED: drop probability at max_th.
    #[serde(default)]
    pub max_p: Option<f64>,
    /// The RED family: packet size (bytes) for the idle-time correction's "typical transmission time".
    #[serde(default)]
    pub mean_pkt_bytes: Option<u32>,
    /// RIO, 3-level RED and FRIO: per-level parameters, highest precedence first.
    #[serde(default)]
    pub levels: Option<Vec<LevelConfig>>,
    /// FRED and FRIO: packets a flow may queue between the thresholds without a random drop
    /// (default 2, Lin and Morris's value for small buffers).
    #[serde(default)]
    pub min_q: Option<f64>,
    /// WRR: packets each queue may send per round, 2 queues (AF11, rest) or 3 (AF11, AF12,
    /// AF13 and unmarked); the link's buffer is split among the queues in the same proportion.
    #[serde(default)]
    pub weights: Option<Vec<u32>>,
    /// Loss models: probability of losing a packet (all packets, or the low-priority ones).
    #[serde(default)]
    pub loss_p: Option<f64>,
    /// CATNIP error model: loss probability p' of high-priority (AF11) packets.
    #[serde(default)]
    pub loss_p_high: Option<f64>,
}

#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct LinkConfig {
    pub name: String,
    pub queue_num: u16,
    /// 0: no serialization (a pure delay line).
    pub rate_bps: u64,
    pub delay_us: u64,
    /// None: unlimited.
    pub buffer: Option<Buffer>,
    pub policy: PolicyConfig,
}

fn default_verdict_batch() -> usize {
    32
}
fn default_stats_interval() -> u64 {
    500
}
fn default_late_threshold() -> u64 {
    1000
}
fn default_maxlen() -> u32 {
    8192
}
fn default_spin() -> u64 {
    200
}

#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub seed: u64,
    #[serde(default = "default_stats_interval")]
    pub stats_interval_ms: u64,
    #[serde(default = "default_late_threshold")]
    pub late_threshold_us: u64,
    #[serde(default = "default_maxlen")]
    pub queue_maxlen: u32,
    /// Poll without sleeping for this long before each scheduled event (0: always sleep).
    #[serde(default = "default_spin")]
    pub spin_us: u64,
    /// Verdicts sent together in one netlink call at most (1: one call per verdict).
    #[serde(default = "default_verdict_batch")]
    pub verdict_batch: usize,
    pub links: Vec<LinkConfig>,
}

impl Config {
    pub fn load(path: &Path) -> Result<Config> {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
        Config::parse(&text).with_context(|| format!("{}: invalid engine config", path.display()))
    }

    /// Parse and validate. A bad or missing field is reported with its path and, inside a
    /// link, the link's name (`links[1] ("rs>rc").rate_bps: ...`), so the controller's log
    /// says which link to fix.
    pub fn parse(text: &str) -> Result<Config> {
        let value: serde_json::Value = serde_json::from_str(text)?;
        let config: Config = serde_path_to_error::deserialize(&value).map_err(|e| {
            let at = name_links(&e.path().to_string(), &value);
            anyhow::anyhow!("{at}{}", e.into_inner())
        })?;
        config.validate()?;
        Ok(config)
    }

    pub fn validate(&self) -> Result<()> {
        if self.links.is_empty() {
            bail!("links: at least one link is needed");
        }
        if self.stats_interval_ms == 0 {
            bail!("stats_interval_ms: must be above 0");
        }
        let mut names = HashSet::new();
        let mut queues = HashSet::new();
        for (i, l) in self.links.iter().enumerate() {
            let who = format!("links[{i}] ({:?})", l.name);
            if l.name.is_empty() || !names.insert(l.name.clone()) {
                bail!("{who}.name: must be non-empty and unique");
            }
            if !queues.insert(l.queue_num) {
                bail!("{who}.queue_num: {} is used by another link", l.queue_num);
            }
            match l.buffer {
                Some(Buffer::Packets(0)) | Some(Buffer::Bytes(0)) => {
                    bail!("{who}.buffer: must hold at least one packet or byte (null for unlimited)")
                }
                _ => {}
            }
            crate::policy::build::<()>(&l.policy, l.buffer, l.rate_bps, self.seed)
                .map_err(|e| anyhow::anyhow!("{who}.policy: {e}"))?;
        }
        Ok(())
    }
}

/// `links[1].rate_bps` -> `links[1] ("rs>rc").rate_bps: `; the top level (".") -> nothing.
fn name_links(path: &str, value: &serde_json::Value) -> String {
    if path == "." {
        return String::new();
    }
    let named = path.strip_prefix("links[").and_then(|rest| {
        let (index, tail) = rest.split_once(']')?;
        let name = value["links"][index.parse::<usize>().ok()?]["name"].as_str()?;
        Some(format!("links[{index}] ({name:?}){tail}"))
    });
    format!("{}: ", named.unwrap_or_else(|| path.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config> {
        Config::parse(text)
    }

    fn error(text: &str) -> String {
        format!("{:#}", parse(text).unwrap_err())
    }

    #[test]
    fn accepts_the_documented_example() {
        let c = parse(
            r#"{"seed": 1, "links": [
              {"name": "a", "queue_num": 0, "rate_bps": 1500000, "delay_us": 5000,
               "buffer": {"packets": 10}, "policy": {"kind": "droptail"}},
              {"name": "b", "queue_num": 1, "rate_bps": 0, "delay_us": 2000,
               "buffer": null, "policy": {"kind": "droptail"}}]}"#,
        )
        .unwrap();
        assert_eq!(c.links[0].buffer, Some(Buffer::Packets(10)));
        assert_eq!(c.links[1].buffer, None);
        assert_eq!(c.stats_interval_ms, 500);
    }

    #[test]
    fn errors_name_the_link_and_field() {
        let bad_policy = r#"{"links": [{"name": "x", "queue_num": 0, "rate_bps": 1, "delay_us": 0,
            "buffer": null, "policy": {"kind": "fifo"}}]}"#;
        let err = parse(bad_policy).unwrap_err().to_string();
        assert!(err.contains("links[0] (\"x\").policy") && err.contains("droptail"), "{err}");
        let dup = r#"{"links": [
            {"name": "x", "queue_num": 3, "rate_bps": 1, "delay_us": 0, "buffer": null, "policy": {"kind": "droptail"}},
            {"name": "y", "queue_num": 3, "rate_bps": 1, "delay_us": 0, "buffer": null, "policy": {"kind": "droptail"}}]}"#;
        assert!(parse(dup).unwrap_err().to_string().contains("queue_num: 3"));
        let zero = r#"{"links": [{"name": "x", "queue_num": 0, "rate_bps": 1, "delay_us": 0,
            "buffer": {"packets": 0}, "policy": {"kind": "droptail"}}]}"#;
        assert!(parse(zero).unwrap_err().to_string().contains("buffer"));
        assert!(parse(r#"{"links": [], "extra": 1}"#).is_err());
    }

    #[test]
    fn missing_and_mistyped_fields_name_the_link_and_field() {
        let link_a = r#"{"name": "a", "queue_num": 0, "rate_bps": 1, "delay_us": 0, "buffer": null, "policy": {"kind": "droptail"}}"#;
        let missing = format!(
            r#"{{"links": [{link_a}, {{"name": "rs>rc", "queue_num": 1, "delay_us": 0, "buffer": null, "policy": {{"kind": "droptail"}}}}]}}"#
        );
        assert_eq!(error(&missing), r#"links[1] ("rs>rc"): missing field `rate_bps`"#);
        let negative = r#"{"links": [{"name": "b", "queue_num": 0, "rate_bps": -5, "delay_us": 0, "buffer": null, "policy": {"kind": "droptail"}}]}"#;
        let e = error(negative);
        assert!(e.starts_with(r#"links[0] ("b").rate_bps: invalid value: integer `-5`"#), "{e}");
        let buffer = r#"{"links": [{"name": "b", "queue_num": 0, "rate_bps": 1, "delay_us": 0, "buffer": {"pkts": 3}, "policy": {"kind": "droptail"}}]}"#;
        assert!(error(buffer).starts_with(r#"links[0] ("b").buffer: unknown variant `pkts`"#), "{}", error(buffer));
        assert!(error(r#"{"seed": "x", "links": []}"#).starts_with("seed: invalid type"));
        assert_eq!(error(r#"{"seed": 1}"#), "missing field `links`");
        assert!(error("{").contains("EOF"));
    }

    #[test]
    fn fred_frio_and_wrr_parse_and_errors_name_the_parameter() {
        let link = |policy: &str| {
            format!(
                r#"{{"links": [{{"name": "b", "queue_num": 0, "rate_bps": 1000000, "delay_us": 0,
                   "buffer": {{"packets": 10}}, "policy": {policy}}}]}}"#
            )
        };
        let fred = r#"{"kind": "fred", "min_th": 2, "max_th": 6, "w_q": 0.02, "max_p": 0.1, "min_q": 4}"#;
        assert_eq!(parse(&link(fred)).unwrap().links[0].policy.min_q, Some(4.0));
        let frio = r#"{"kind": "frio", "w_q": 0.02, "levels": [{"min_th": 4, "max_th": 8, "max_p": 0.02},
                       {"min_th": 2, "max_th": 6, "max_p": 0.1}]}"#;
        assert_eq!(parse(&link(frio)).unwrap().links[0].policy.min_q, None);
        let wrr = r#"{"kind": "wrr", "weights": [1, 4]}"#;
        assert_eq!(parse(&link(wrr)).unwrap().links[0].policy.weights, Some(vec![1, 4]));
        for (policy, want) in [
            (r#"{"kind": "fred", "min_th": 2, "max_th": 6, "max_p": 0.1}"#, "fred needs w_q"),
            (r#"{"kind": "fred", "min_th": 2, "max_th": 6, "w_q": 0.1, "max_p": 0.1, "min_q": -1}"#, "min_q must be"),
            (r#"{"kind": "frio", "w_q": 0.1, "levels": [{"min_th": 4, "max_th": 8, "max_p": 0.1}]}"#, "frio needs levels: 2"),
            (r#"{"kind": "wrr"}"#, "wrr needs weights"),
            (r#"{"kind": "wrr", "weights": [1, 0]}"#, "weights[1]: must be at least 1"),
            (r#"{"kind": "wrr", "weights": [1, 99]}"#, "weights[0]: queue 0's share of the buffer (1/100) is empty"),
            (r#"{"kind": "wrr", "weights": [1, -2]}"#, "policy.weights[1]: invalid value"),
            (r#"{"kind": "wrr", "weight": [1, 2]}"#, "unknown field `weight`"),
        ] {
            let e = error(&link(policy));
            assert!(e.starts_with(r#"links[0] ("b").policy"#) && e.contains(want), "{e}");
        }
    }
}
