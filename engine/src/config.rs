//! The engine's configuration file (docs/architecture.md, "Queue engine contract").

use crate::edge::EdgeConfig;
pub use crate::params::{deep_error, one_unit, Buffer, Threshold, Unit};
pub use crate::policy::PolicyConfig;
use crate::policy::{LinkEnv, LossConfig};
use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::collections::HashSet;
use std::path::Path;

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
    /// Random loss drawn on every arrival before the policy.
    #[serde(default)]
    pub loss: Option<LossConfig>,
    /// Edge functions applied in order to every arrival, before the loss and the policy.
    #[serde(default)]
    pub edge: Vec<EdgeConfig>,
}

impl LinkConfig {
    /// A link with the given policy and no loss or edge functions.
    pub fn new(name: &str, rate_bps: u64, delay_us: u64, buffer: Option<Buffer>, policy: PolicyConfig) -> LinkConfig {
        LinkConfig { name: name.into(), queue_num: 0, rate_bps, delay_us, buffer, policy, loss: None, edge: Vec::new() }
    }

    /// Whether an edge function or the policy of this link may change a packet's DSCP (the live
    /// engine then copies whole packets from the kernel, to give them back rewritten).
    pub fn may_rewrite(&self) -> bool {
        self.policy.may_rewrite() || self.edge.iter().any(EdgeConfig::may_rewrite)
    }

    /// The loss wrapper cannot go around a policy that idles while holding packets: it does not
    /// pass on the policy's wake-up time, and the link would stall until the next arrival.
    pub fn check_loss_wrapping(&self) -> std::result::Result<(), String> {
        if self.loss.is_some() && self.policy.idles_while_holding() {
            return Err(format!(
                "loss: policy {} cannot take a loss wrapper (it idles waiting for tokens); put the loss on another link",
                self.policy.kind()
            ));
        }
        Ok(())
    }
}

fn default_verdict_batch() -> usize {
    32
}
fn default_recv_batch() -> usize {
    32
}
/// recvmmsg takes at most this many messages per call (UIO_MAXIOV).
pub const MAX_RECV_BATCH: usize = 1024;
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
    /// NFQUEUE messages taken per receive call at most (1: one call per packet).
    #[serde(default = "default_recv_batch")]
    pub recv_batch: usize,
    /// Write every arrival, in the order taken and at the time used, here (arrival_log.rs).
    #[serde(default)]
    pub arrival_log: Option<std::path::PathBuf>,
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
            let path = e.path().to_string();
            match explain(&path, &value) {
                Some(why) => {
                    let at = path.strip_suffix(".kind").unwrap_or(&path);
                    anyhow::anyhow!("{}{why}", name_links(at, &value).trim_end_matches(": "))
                }
                None => anyhow::anyhow!("{}{}", name_links(&path, &value), e.into_inner()),
            }
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
        if !(1..=MAX_RECV_BATCH).contains(&self.recv_batch) {
            bail!("recv_batch: {} is outside 1-{MAX_RECV_BATCH} (messages per receive call)", self.recv_batch);
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
            let env = LinkEnv { buffer: l.buffer, rate_bps: l.rate_bps, seed: self.seed };
            l.policy.build::<()>(&env).map_err(|e| anyhow::anyhow!("{who}.policy: {e}"))?;
            if let Some(loss) = &l.loss {
                loss.validate().map_err(|e| anyhow::anyhow!("{who}.loss: {e}"))?;
            }
            l.check_loss_wrapping().map_err(|e| anyhow::anyhow!("{who}.{e}"))?;
            for (j, f) in l.edge.iter().enumerate() {
                f.validate().map_err(|e| anyhow::anyhow!("{who}.edge[{j}]: {e}"))?;
            }
        }
        Ok(())
    }
}

/// Source scheduler's `downgrade_after_us` at most (policy/source_sched.rs: an hour).
const MAX_DOWNGRADE_AFTER_US: u64 = 3_600_000_000;

/// One bound: `{"min": a, "max": b}`, with `"min_exclusive"`/`"max_exclusive"` where the bound
/// itself is refused.
fn bound(
    min: serde_json::Value,
    max: serde_json::Value,
    min_exclusive: bool,
    max_exclusive: bool,
) -> serde_json::Value {
    let mut b = serde_json::json!({"min": min, "max": max});
    if min_exclusive {
        b["min_exclusive"] = true.into();
    }
    if max_exclusive {
        b["max_exclusive"] = true.into();
    }
    b
}

fn int(min: u64, max: u64) -> serde_json::Value {
    bound(min.into(), max.into(), false, false)
}

/// Every bound the engine checks when it loads a configuration (`catnip-engine limits`), by
/// field: those of its checks (`validate` here, the policies' and edge functions' `build`) and
/// those of the field's type (a `u64` holds at most 2^64 - 1). The controller's schema (spec/)
/// is held within them by tests/test_engine_limits.py, which also loads configurations at and
/// beyond each bound through `catnip-engine check`, so this table cannot drift from the checks.
/// Rules between fields (min_th < max_th, a WRR queue's share of the buffer, distinct IN and OUT
/// DSCPs, a source scheduler on a rated link) are not bounds: the schema checks them with the
/// same rule, and the scenario-mutation corpus has the engine judge what it accepted.
pub fn limits() -> serde_json::Value {
    let u64_max = u64::MAX;
    let u32_max = u64::from(u32::MAX);
    let probability = bound(0.0.into(), 1.0.into(), false, true); // [0, 1)
    let gain = bound(0.0.into(), 1.0.into(), true, false); // (0, 1]
    let nonnegative = bound(0.0.into(), f64::MAX.into(), false, false);
    serde_json::json!({
        "seed": int(0, u64_max),
        "stats_interval_ms": int(1, u64_max),
        "late_threshold_us": int(0, u64_max),
        "spin_us": int(0, u64_max),
        "queue_maxlen": int(0, u32_max),
        "verdict_batch": int(0, usize::MAX as u64),
        "recv_batch": int(1, MAX_RECV_BATCH as u64),
        "links.count": int(1, u64::from(u16::MAX) + 1),
        "link.queue_num": int(0, u64::from(u16::MAX)),
        "link.rate_bps": int(0, u64_max),
        "link.delay_us": int(0, u64_max),
        "buffer.packets": int(1, u64_max),
        "buffer.bytes": int(1, u64_max),
        "loss.p": probability,
        "loss.p_high": probability,
        "policy.loss_p": probability,
        "policy.loss_p_high": probability,
        "policy.w_q": gain,
        "policy.max_p": gain,
        "policy.levels.max_p": gain,
        "policy.min_th": nonnegative,
        "policy.mean_pkt_bytes": int(1, u32_max),
        "policy.min_q": nonnegative,
        "policy.weights": int(1, u32_max),
        "policy.weights.count": int(2, 3),
        "policy.levels.count": int(2, 3),
        "policy.downgrade_after_us": int(1, MAX_DOWNGRADE_AFTER_US),
        "bucket.rate_bps": int(1, u64_max),
        "bucket.bucket_bytes": int(crate::edge::bucket::MIN_BUCKET_BYTES, u64_max),
        "port": int(0, 65535),
        "dscp": int(0, 63),
        "edge.proto": {"one_of": [6, 17]},
        "edge.interval_us": int(1, u64_max),
        "edge.pool_bytes": int(1, u64_max),
        "edge.tiny_window": int(0, u32_max),
        "edge.mss_bytes": int(1, u32_max),
        "edge.w_gain": gain,
        "edge.e_gain": gain,
        "edge.flow_idle_us": int(crate::edge::tcpf::MIN_MEMORY_US, u64_max),
    })
}

/// A policy or an edge function is an internally tagged enum: serde reads it whole before it
/// knows the variant, and the path of an error inside it ends at the enum. Read the value's
/// variant again on its own to say which of its fields is wrong (`.weights[1]: ...`), or, for an
/// unknown kind, which kinds there are. None: the error's own path and message say it.
fn explain(path: &str, value: &serde_json::Value) -> Option<String> {
    let (index, tail) = path.strip_prefix("links[")?.split_once(']')?;
    let tail = tail.strip_suffix(".kind").unwrap_or(tail);
    let link = &value["links"][index.parse::<usize>().ok()?];
    if tail == ".policy" {
        return Some(explain_tagged(&link["policy"], crate::policy::KINDS, PolicyConfig::explain));
    }
    let j = tail.strip_prefix(".edge[")?.strip_suffix(']')?.parse::<usize>().ok()?;
    Some(explain_tagged(&link["edge"][j], crate::edge::KINDS, EdgeConfig::explain))
}

/// `: msg` or `.field: msg` for a value of an enum tagged by `kind`; `variant(kind, rest)` reads
/// the rest of the object as that kind's parameters.
fn explain_tagged(
    value: &serde_json::Value,
    kinds: &[&str],
    variant: fn(&str, &serde_json::Value) -> Option<String>,
) -> String {
    let Some(object) = value.as_object() else {
        return format!(": invalid type: expected an object with a \"kind\" (one of {})", kinds.join(", "));
    };
    let kind = match object.get("kind") {
        None => return ": missing field `kind`".into(),
        Some(serde_json::Value::String(k)) if kinds.contains(&k.as_str()) => k.as_str(),
        Some(k) => return format!(": unknown kind {k}; allowed: {}", kinds.join(", ")),
    };
    let mut rest = object.clone();
    rest.remove("kind");
    variant(kind, &serde_json::Value::Object(rest)).unwrap_or_else(|| ": invalid value".into())
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

    /// The configuration with the parameters it leaves out written in (testkit.rs: the engine
    /// has no defaults).
    fn parse(text: &str) -> Result<Config> {
        Config::parse(&crate::testkit::filled(text))
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
        let PolicyConfig::Fred(f) = &parse(&link(fred)).unwrap().links[0].policy else { panic!("not fred") };
        assert_eq!(f.min_q, Threshold::packets(4.0));
        let frio = r#"{"kind": "frio", "w_q": 0.02, "levels": [{"min_th": 4, "max_th": 8, "max_p": 0.02},
                       {"min_th": 2, "max_th": 6, "max_p": 0.1}]}"#;
        let PolicyConfig::Frio(f) = &parse(&link(frio)).unwrap().links[0].policy else { panic!("not frio") };
        assert_eq!(f.min_q, Threshold::packets(2.0));
        let wrr = r#"{"kind": "wrr", "weights": [1, 4]}"#;
        let PolicyConfig::Wrr(w) = &parse(&link(wrr)).unwrap().links[0].policy else { panic!("not wrr") };
        assert_eq!(w.weights, vec![1, 4]);
        for (policy, want) in [
            // Typed parsing: a missing parameter is serde's "missing field" (was "fred needs w_q").
            (r#"{"kind": "fred", "min_th": 2, "max_th": 6, "max_p": 0.1}"#, "missing field `w_q`"),
            (r#"{"kind": "fred", "min_th": 2, "max_th": 6, "w_q": 0.1, "max_p": 0.1, "min_q": -1}"#, "min_q must be"),
            (
                r#"{"kind": "frio", "w_q": 0.1, "levels": [{"min_th": 4, "max_th": 8, "max_p": 0.1}]}"#,
                "frio needs levels: 2",
            ),
            (r#"{"kind": "wrr"}"#, "missing field `weights`"),
            (r#"{"kind": "wrr", "weights": [1, 0]}"#, "weights[1]: must be at least 1"),
            (r#"{"kind": "wrr", "weights": [1, 99]}"#, "weights[0]: queue 0's share of the buffer (1/100) is empty"),
            (r#"{"kind": "wrr", "weights": [1, -2]}"#, "policy.weights[1]: invalid value"),
            (r#"{"kind": "wrr", "weight": [1, 2]}"#, "unknown field `weight`"),
        ] {
            let e = error(&link(policy));
            assert!(e.starts_with(r#"links[0] ("b").policy"#) && e.contains(want), "{e}");
        }
    }

    fn one_link(fields: &str) -> String {
        format!(
            r#"{{"seed": 3, "links": [{{"name": "b", "queue_num": 0, "rate_bps": 1000000, "delay_us": 0,
               "buffer": {{"packets": 10}}, {fields}}}]}}"#
        )
    }

    /// A policy of `kind` (its parameters the test's own, testkit.rs writing in the rest).
    fn policy_block(kind: &str) -> String {
        match kind {
            "red" | "catnip_red" | "fred" => {
                format!(r#"{{"kind": "{kind}", "min_th": 2, "max_th": 6, "w_q": 0.1, "max_p": 0.1}}"#)
            }
            "rio" | "frio" | "red3" => {
                let n = if kind == "red3" { 3 } else { 2 };
                let levels = vec![r#"{"min_th": 2, "max_th": 6, "max_p": 0.1}"#; n].join(", ");
                format!(r#"{{"kind": "{kind}", "w_q": 0.1, "levels": [{levels}], "mean_pkt_bytes": 1500}}"#)
            }
            "wrr" => r#"{"kind": "wrr", "weights": [1, 4]}"#.into(),
            "bernoulli" => r#"{"kind": "bernoulli", "loss_p": 0.1}"#.into(),
            "catnip_loss" => r#"{"kind": "catnip_loss", "loss_p": 0.1, "loss_p_high": 0.01}"#.into(),
            "source_scheduler" => SOURCE_SCHEDULER.into(),
            "police" => {
                r#"{"kind": "police", "rate_bps": 1000, "bucket_bytes": 64, "exceed": {"action": "drop"}}"#.into()
            }
            "shape" => r#"{"kind": "shape", "rate_bps": 1000, "bucket_bytes": 64}"#.into(),
            _ => format!(r#"{{"kind": "{kind}"}}"#),
        }
    }

    #[test]
    fn every_parameter_of_every_kind_must_be_given() {
        // For each kind `catnip-engine kinds` lists, a whole block loads, has exactly the
        // parameters listed, and without any one of them is refused with an error naming it.
        let policy = |b: &str| one_link(&format!(r#""policy": {b}"#));
        let edge = |b: &str| one_link(&format!(r#""policy": {{"kind": "droptail"}}, "edge": [{b}]"#));
        let lists: [(_, &dyn Fn(&str) -> String); 2] =
            [(crate::policy::parameters(), &policy), (crate::edge::parameters(), &edge)];
        for (kinds, place) in lists {
            for (kind, params) in kinds {
                let full: serde_json::Value =
                    serde_json::from_str(&crate::testkit::filled(&policy_block(kind))).unwrap();
                Config::parse(&place(&full.to_string())).unwrap_or_else(|e| panic!("{kind}: {e:#}"));
                let given: HashSet<&str> = full.as_object().unwrap().keys().map(String::as_str).collect();
                let listed: HashSet<&str> = params.iter().copied().chain(["kind"]).collect();
                assert_eq!(given, listed, "{kind}");
                for p in params.iter() {
                    let mut without = full.clone();
                    without.as_object_mut().unwrap().remove(*p);
                    let e = format!("{:#}", Config::parse(&place(&without.to_string())).unwrap_err());
                    assert!(e.ends_with(&format!(": missing field `{p}`")), "{kind} without {p}: {e}");
                }
            }
        }
        let e = format!(
            "{:#}",
            Config::parse(&one_link(r#""policy": {"kind": "droptail"}, "loss": {"p": 0.1}"#)).unwrap_err()
        );
        assert_eq!(e, r#"links[0] ("b").loss: missing field `p_high`"#);
    }

    #[test]
    fn every_kind_today_parses_and_an_unknown_kind_lists_them_all() {
        for (i, kind) in crate::policy::KINDS.iter().enumerate() {
            let policy = policy_block(kind);
            let c = parse(&one_link(&format!(r#""policy": {policy}"#))).unwrap_or_else(|e| panic!("{kind}: {e:#}"));
            assert_eq!(c.links[0].policy.kind(), *kind, "kind {i}");
        }
        // The message the controller's tests expect, with every kind in one place.
        assert_eq!(
            error(&one_link(r#""policy": {"kind": "fifo"}"#)),
            r#"links[0] ("b").policy: unknown kind "fifo"; allowed: droptail, catnip_good, catnip_bad, red, catnip_red, rio, red3, fred, frio, wrr, bernoulli, catnip_loss, source_scheduler"#
        );
        assert_eq!(error(&one_link(r#""policy": {"max_p": 1}"#)), r#"links[0] ("b").policy: missing field `kind`"#);
        let e = error(&one_link(r#""policy": {"kind": "droptail", "min_th": 1}"#));
        assert!(e.starts_with(r#"links[0] ("b").policy.min_th: unknown field `min_th`, there are no fields"#), "{e}");
    }

    /// The source scheduler with the service-differentiation paper's profile (section 6.3, Fig. 12:
    /// HIGH 250 Kbps, MED 500 Kbps, 6000-byte buckets) and its three application classes.
    const SOURCE_SCHEDULER: &str = r#"{"kind": "source_scheduler", "high": {"rate_bps": 250000, "bucket_bytes": 6000},
        "med": {"rate_bps": 500000, "bucket_bytes": 6000}, "classes": [[[2323, 2323]], [[80, 80]], [[2121, 2121]]],
        "downgrade_after_us": 200000}"#;

    #[test]
    fn the_source_scheduler_rewrites_takes_no_loss_wrapper_and_names_bad_fields() {
        let c = parse(&one_link(&format!(r#""policy": {SOURCE_SCHEDULER}"#))).unwrap();
        assert!(c.links[0].may_rewrite(), "its downgrades remark packets: whole packets must be copied");
        let PolicyConfig::SourceScheduler(s) = &c.links[0].policy else { panic!("not source_scheduler") };
        assert_eq!((s.classes.len(), s.high.rate_bps, s.med.rate_bps), (3, 250_000, 500_000));
        // No default: footnote 7's 200 ms is the schema's (spec/policy.py), written in every config.
        let without = r#""policy": {"kind": "source_scheduler", "high": {"rate_bps": 1, "bucket_bytes": 64},
            "med": {"rate_bps": 1, "bucket_bytes": 64}, "classes": [[[0, 65535]]]}"#;
        assert_eq!(
            format!("{:#}", Config::parse(&one_link(without)).unwrap_err()),
            r#"links[0] ("b").policy: missing field `downgrade_after_us`"#
        );
        assert_eq!(
            error(&one_link(&format!(r#""policy": {SOURCE_SCHEDULER}, "loss": {{"p": 0.01}}"#))),
            r#"links[0] ("b").loss: policy source_scheduler cannot take a loss wrapper (it idles waiting for tokens); put the loss on another link"#
        );
        let with = |from: &str, to: &str| {
            assert!(SOURCE_SCHEDULER.contains(from));
            error(&one_link(&format!(r#""policy": {}"#, SOURCE_SCHEDULER.replace(from, to))))
        };
        for (e, want) in [
            (with(r#""rate_bps": 250000"#, r#""rate_bps": 0"#), "policy: high.rate_bps: must be above 0"),
            (with(r#""rate_bps": 500000"#, r#""rate_bps": 0"#), "policy: med.rate_bps: must be above 0"),
            (
                with(r#""rate_bps": 500000, "bucket_bytes": 6000"#, r#""rate_bps": 500000, "bucket_bytes": 63"#),
                "policy: med.bucket_bytes: must hold one packet of 64 bytes at least (got 63)",
            ),
            (with("[[2323, 2323]], [[80, 80]], [[2121, 2121]]", ""), "policy: classes: need at least one class"),
            (with("[[80, 80]]", "[]"), "policy: classes[1]: a class needs at least one port range"),
            (with("[[80, 80]]", "[[1, 2], [90, 80]]"), "policy: classes[1][1]: need lo <= hi <= 65535 (got [90, 80])"),
            (with("[[80, 80]]", "[[80, 65536]]"), "policy: classes[1][0]: need lo <= hi <= 65535 (got [80, 65536])"),
            (with("200000", "0"), "policy: downgrade_after_us: must be 1 to 3600000000 (an hour), got 0"),
            (with("[[80, 80]]", "[[80]]"), "policy.classes[1][0]: invalid length 1, expected an array of length 2"),
            (with(r#""downgrade_after_us""#, r#""downgrade_after""#), "policy.downgrade_after: unknown field"),
            (with(r#""high": {"rate_bps""#, r#""high": {"rate""#), "policy.high.rate: unknown field `rate`"),
        ] {
            assert!(e.starts_with(&format!(r#"links[0] ("b").{want}"#)), "{e}");
        }
        let no_rate =
            one_link(&format!(r#""policy": {SOURCE_SCHEDULER}"#)).replace(r#""rate_bps": 1000000"#, r#""rate_bps": 0"#);
        assert!(
            error(&no_rate).starts_with(r#"links[0] ("b").policy: needs the link's rate_bps above 0"#),
            "{}",
            error(&no_rate)
        );
    }

    #[test]
    fn thresholds_take_packets_or_bytes_in_one_unit_per_policy() {
        let red = |min: &str, max: &str| {
            one_link(&format!(
                r#""policy": {{"kind": "red", "min_th": {min}, "max_th": {max}, "w_q": 0.1, "max_p": 0.1}}"#
            ))
        };
        let th = |text: &str| {
            let PolicyConfig::Red(r) = parse(text).unwrap().links[0].policy.clone() else { panic!("not red") };
            (r.min_th, r.max_th)
        };
        assert_eq!(th(&red("2", "6.5")), (Threshold::packets(2.0), Threshold::packets(6.5)));
        assert_eq!(th(&red(r#"{"packets": 2}"#, "6")), (Threshold::packets(2.0), Threshold::packets(6.0)));
        assert_eq!(
            th(&red(r#"{"bytes": 3000}"#, r#"{"bytes": 9000}"#)),
            (Threshold::bytes(3000.0), Threshold::bytes(9000.0))
        );
        for (min, max, want) in [
            (r#"{"bytes": 3000}"#, "6", r#"links[0] ("b").policy: max_th: in packets but min_th is in bytes"#),
            (
                r#"{"byte": 3000}"#,
                "6",
                r#"links[0] ("b").policy.min_th: unknown field `byte`, expected `packets` or `bytes`"#,
            ),
            (r#"{"bytes": 3000, "packets": 2}"#, "6", r#"links[0] ("b").policy.min_th: one unit only"#),
            (r#""2""#, "6", r#"links[0] ("b").policy.min_th: invalid type: string "2", expected a number of packets"#),
            (
                r#"{"bytes": 9000}"#,
                r#"{"bytes": 3000}"#,
                r#"links[0] ("b").policy: need 0 <= min_th < max_th (got 9000 and 3000)"#,
            ),
        ] {
            let e = error(&red(min, max));
            assert!(e.starts_with(want), "{e}");
        }
        // Levels: the field named is the first in another unit than levels[0].min_th.
        let rio = r#""policy": {"kind": "rio", "w_q": 0.1, "levels": [
            {"min_th": {"bytes": 50000}, "max_th": {"bytes": 490000}, "max_p": 0.005},
            {"min_th": {"bytes": 10000}, "max_th": 200, "max_p": 0.25}]}"#;
        assert!(error(&one_link(rio))
            .starts_with(r#"links[0] ("b").policy: levels[1].max_th: in packets but levels[0].min_th is in bytes"#));
        let fred = r#""policy": {"kind": "fred", "min_th": {"bytes": 2000}, "max_th": {"bytes": 6000}, "w_q": 0.1, "max_p": 0.1, "min_q": 2}"#;
        assert!(error(&one_link(fred))
            .starts_with(r#"links[0] ("b").policy: min_q: in packets but the thresholds are in bytes"#));
    }

    #[test]
    fn loss_and_edge_errors_name_the_link_and_field() {
        let ok = one_link(
            r#""policy": {"kind": "droptail"}, "loss": {"p": 0.1},
               "edge": [{"kind": "mark", "rules": [{"proto": 6, "src": "10.0.0.0/8", "dport": [80, 80], "dscp": 10}], "default": null},
                        {"kind": "police", "rate_bps": 100000, "bucket_bytes": 3000, "exceed": {"action": "drop"}},
                        {"kind": "shape", "rate_bps": 100000, "bucket_bytes": 1500, "buffer": null}]"#,
        );
        let c = parse(&ok).unwrap();
        assert_eq!((c.links[0].edge.len(), c.links[0].may_rewrite()), (3, true));
        for (fields, want) in [
            (r#""loss": {"p": 1.5}"#, r#"links[0] ("b").loss: p must be in [0, 1) (got 1.5)"#),
            (r#""loss": {"p": 0.1, "p_hi": 0.2}"#, r#"links[0] ("b").loss.p_hi: unknown field `p_hi`"#),
            (r#""loss": {"p": 0.1, "p_high": null}"#, r#"links[0] ("b").loss.p_high: invalid type: null"#),
            (
                r#""edge": [{"kind": "mark"}, {"kind": "meter"}]"#,
                r#"links[0] ("b").edge[1]: unknown kind "meter"; allowed: mark, police, shape"#,
            ),
            (
                r#""edge": [{"kind": "mark", "rules": [{"dscp": 10, "sport": [1, -2]}]}]"#,
                r#"links[0] ("b").edge[0].rules[0].sport[1]: invalid value: integer `-2`"#,
            ),
            (
                r#""edge": [{"kind": "mark", "rules": [{"dscp": 10, "dst": "10.0.0.1/8"}]}]"#,
                r#"links[0] ("b").edge[0]: rules[0].dst: "10.0.0.1/8": host bits set"#,
            ),
            (
                r#""edge": [{"kind": "police", "rate_bps": 1, "bucket_bytes": 64, "per": "host", "exceed": {"action": "drop"}}]"#,
                r#"links[0] ("b").edge[0].per: unknown variant `host`, expected one of `link`, `src`, `flow`"#,
            ),
            (
                r#""edge": [{"kind": "police", "rate_bps": 1, "bucket_bytes": 64}]"#,
                r#"links[0] ("b").edge[0]: missing field `exceed`"#,
            ),
            (
                r#""edge": [{"kind": "shape", "rate_bps": 0, "bucket_bytes": 64}]"#,
                r#"links[0] ("b").edge[0]: rate_bps: must be above 0"#,
            ),
            (
                r#""edge": [{"kind": "tcpf", "pool_bytes": 0}]"#,
                r#"links[0] ("b").edge[0]: pool_bytes: must be above 0"#,
            ),
            (
                r#""edge": [{"kind": "token_marker", "interval_us": 0}]"#,
                r#"links[0] ("b").edge[0]: interval_us: must be above 0"#,
            ),
            (r#""edge": [{"kind": "tcpf", "pools": 1}]"#, r#"links[0] ("b").edge[0].pools: unknown field `pools`"#),
            (r#""edge": [{"kind": "tcpf", "w_gain": 0.0}]"#, r#"links[0] ("b").edge[0]: w_gain: must be in (0, 1]"#),
        ] {
            let e = error(&one_link(&format!(r#""policy": {{"kind": "droptail"}}, {fields}"#)));
            assert!(e.starts_with(want), "{e}");
        }
        let plain = parse(&one_link(
            r#""policy": {"kind": "droptail"}, "edge": [{"kind": "shape", "rate_bps": 1, "bucket_bytes": 64}]"#,
        ))
        .unwrap();
        assert!(!plain.links[0].may_rewrite());
    }
}
