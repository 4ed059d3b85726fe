//! `mark`: a classifier setting the DSCP by header fields (the first matching rule, else the
//! default).

use super::api::{check_dscp, parse_cidr, EdgeFunction, EdgeParams, Step};
use crate::packet::PacketInfo;
use crate::policy::Queued;
use serde::Deserialize;

/// `{"kind": "mark", "rules": [...], "default": D or null}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MarkConfig {
    pub rules: Vec<MarkRule>,
    /// DSCP of a packet no rule matches; null leaves it unchanged (given, as every parameter).
    #[serde(deserialize_with = "crate::params::nullable")]
    pub default: Option<u8>,
}

/// A classifier rule: every field given must match (null or absent: any; this is the rule's
/// language, not a default: the schema writes each field, null where a scenario gives none).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MarkRule {
    #[serde(default)]
    pub proto: Option<u8>,
    #[serde(default)]
    pub src: Option<String>,
    #[serde(default)]
    pub dst: Option<String>,
    #[serde(default)]
    pub sport: Option<[u32; 2]>,
    #[serde(default)]
    pub dport: Option<[u32; 2]>,
    pub dscp: u8,
}

impl EdgeParams for MarkConfig {
    fn build<H: 'static>(&self) -> Result<Box<dyn EdgeFunction<H>>, String> {
        let rules = self
            .rules
            .iter()
            .enumerate()
            .map(|(i, r)| r.compile().map_err(|e| format!("rules[{i}].{e}")))
            .collect::<Result<Vec<_>, _>>()?;
        let default = self.default.map(|d| check_dscp("default", d)).transpose()?;
        Ok(Box::new(Marker { rules, default, remarked: 0 }))
    }

    fn may_rewrite(&self) -> bool {
        true
    }
}

fn port_range(range: [u32; 2]) -> Result<(u16, u16), String> {
    let [lo, hi] = range;
    if lo <= hi && hi <= 65535 {
        Ok((lo as u16, hi as u16))
    } else {
        Err(format!("need lo <= hi <= 65535 (got [{lo}, {hi}])"))
    }
}

impl MarkRule {
    fn compile(&self) -> Result<Rule, String> {
        if let Some(p) = self.proto.filter(|p| *p != 6 && *p != 17) {
            return Err(format!("proto: must be 6 (TCP), 17 (UDP) or null (got {p})"));
        }
        let cidr = |name: &str, v: &Option<String>| {
            v.as_deref().map(parse_cidr).transpose().map_err(|e| format!("{name}: {e}"))
        };
        let ports = |name: &str, v: Option<[u32; 2]>| v.map(port_range).transpose().map_err(|e| format!("{name}: {e}"));
        Ok(Rule {
            proto: self.proto,
            src: cidr("src", &self.src)?,
            dst: cidr("dst", &self.dst)?,
            sport: ports("sport", self.sport)?,
            dport: ports("dport", self.dport)?,
            dscp: check_dscp("dscp", self.dscp)?,
        })
    }
}

struct Rule {
    proto: Option<u8>,
    src: Option<(u32, u32)>,
    dst: Option<(u32, u32)>,
    sport: Option<(u16, u16)>,
    dport: Option<(u16, u16)>,
    dscp: u8,
}

impl Rule {
    fn matches(&self, p: &PacketInfo) -> bool {
        let within = |r: Option<(u16, u16)>, port: Option<u16>| {
            r.is_none_or(|(lo, hi)| port.is_some_and(|x| lo <= x && x <= hi))
        };
        self.proto.is_none_or(|x| x == p.proto)
            && self.src.is_none_or(|(net, mask)| p.src & mask == net)
            && self.dst.is_none_or(|(net, mask)| p.dst & mask == net)
            && within(self.sport, p.ports.map(|x| x.0))
            && within(self.dport, p.ports.map(|x| x.1))
    }
}

pub struct Marker {
    rules: Vec<Rule>,
    default: Option<u8>,
    /// Packets whose DSCP it changed.
    remarked: u64,
}

impl Marker {
    /// The first matching rule's DSCP, else the default; true if the DSCP changed.
    pub fn mark(&self, p: &mut PacketInfo) -> bool {
        let dscp = self.rules.iter().find(|r| r.matches(p)).map(|r| r.dscp).or(self.default);
        match dscp {
            Some(d) if d != p.dscp => {
                p.set_dscp(d);
                true
            }
            _ => false,
        }
    }
}

impl<H> EdgeFunction<H> for Marker {
    fn apply(&mut self, mut pkt: Queued<H>, _now: u64) -> Step<H> {
        if self.mark(&mut pkt.info) {
            self.remarked += 1;
        }
        Step::Next(pkt)
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![("remarked", self.remarked)]
    }
}
