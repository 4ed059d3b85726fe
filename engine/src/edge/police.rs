//! `police`: a token-bucket meter (per link, source or flow) that drops or remarks what is out
//! of profile.

use super::api::{check_dscp, EdgeFunction, EdgeParams, Step};
use super::bucket::{check_bucket, cost, BucketSpec, Tokens};
use crate::packet::PacketInfo;
use crate::policy::Queued;
use serde::Deserialize;
use std::collections::HashMap;

/// What a policer keys its buckets by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Per {
    Link,
    Src,
    Flow,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExceedAction {
    Drop,
    Remark,
}

/// `{"action": "drop"}` or `{"action": "remark", "dscp": D}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExceedConfig {
    pub action: ExceedAction,
    #[serde(default)]
    pub dscp: Option<u8>,
}

/// `{"kind": "police", "rate_bps": r, "bucket_bytes": b, "dscp": [..] or null, "per": "link",
/// "exceed": {...}}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoliceConfig {
    pub rate_bps: u64,
    pub bucket_bytes: u64,
    /// The DSCPs it meters (null: every packet); others pass untouched and uncounted.
    #[serde(deserialize_with = "crate::params::nullable")]
    pub dscp: Option<Vec<u8>>,
    pub per: Per,
    pub exceed: ExceedConfig,
}

impl EdgeParams for PoliceConfig {
    fn build<H: 'static>(&self) -> Result<Box<dyn EdgeFunction<H>>, String> {
        check_bucket(self.rate_bps, self.bucket_bytes)?;
        let meter = match &self.dscp {
            None => [true; 64],
            Some(list) if list.is_empty() => return Err("dscp: an empty list meters nothing (null: all)".into()),
            Some(list) => {
                let mut m = [false; 64];
                for (i, d) in list.iter().enumerate() {
                    m[usize::from(check_dscp(&format!("dscp[{i}]"), *d)?)] = true;
                }
                m
            }
        };
        let remark = match (self.exceed.action, self.exceed.dscp) {
            (ExceedAction::Drop, None) => None,
            (ExceedAction::Drop, Some(_)) => return Err("exceed.dscp: only for the action remark".into()),
            (ExceedAction::Remark, None) => return Err("exceed.dscp: the action remark needs a DSCP".into()),
            (ExceedAction::Remark, Some(d)) => Some(check_dscp("exceed.dscp", d)?),
        };
        let spec = BucketSpec::new(self.rate_bps, self.bucket_bytes);
        Ok(Box::new(Policer {
            spec,
            meter,
            per: self.per,
            remark,
            one: None,
            buckets: HashMap::new(),
            counts: PoliceCounts::default(),
        }))
    }

    fn may_rewrite(&self) -> bool {
        self.exceed.action == ExceedAction::Remark
    }
}

/// Metered packets in and out of profile; the out-of-profile ones dropped (the others were
/// remarked).
#[derive(Debug, Clone, Copy, Default)]
struct PoliceCounts {
    in_profile: u64,
    out_profile: u64,
    dropped: u64,
}

pub struct Policer {
    spec: BucketSpec,
    meter: [bool; 64],
    per: Per,
    /// Out of profile: remark to this DSCP, or drop (None).
    remark: Option<u8>,
    one: Option<Tokens>,
    buckets: HashMap<u64, Tokens>,
    counts: PoliceCounts,
}

/// A policer's decision on one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policed {
    Unmetered,
    In,
    Out,
}

/// Buckets kept per source or flow before the full ones (same as new) are forgotten.
const PRUNE_AT: usize = 4096;

impl Policer {
    pub fn meter(&mut self, p: &PacketInfo, now: u64) -> Policed {
        if !self.meter[usize::from(p.dscp & 63)] {
            return Policed::Unmetered;
        }
        let spec = self.spec;
        let key = match self.per {
            Per::Link => None,
            Per::Src => Some(u64::from(p.src)),
            Per::Flow => Some(p.flow),
        };
        if key.is_some() && self.buckets.len() >= PRUNE_AT {
            self.buckets.retain(|_, t| {
                spec.refill(t, now);
                t.credit < spec.depth
            });
        }
        let tokens = match key {
            None => self.one.get_or_insert(spec.full(now)),
            Some(k) => self.buckets.entry(k).or_insert(spec.full(now)),
        };
        spec.refill(tokens, now);
        let c = cost(u64::from(p.len));
        if tokens.credit >= c {
            tokens.credit -= c;
            Policed::In
        } else {
            Policed::Out
        }
    }
}

impl<H> EdgeFunction<H> for Policer {
    fn apply(&mut self, mut pkt: Queued<H>, now: u64) -> Step<H> {
        match self.meter(&pkt.info, now) {
            Policed::Unmetered => Step::Next(pkt),
            Policed::In => {
                self.counts.in_profile += 1;
                Step::Next(pkt)
            }
            Policed::Out => {
                self.counts.out_profile += 1;
                match self.remark {
                    Some(d) => {
                        pkt.info.set_dscp(d);
                        Step::Next(pkt)
                    }
                    None => {
                        self.counts.dropped += 1;
                        Step::Drop(pkt, true)
                    }
                }
            }
        }
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let c = self.counts;
        vec![("in", c.in_profile), ("out", c.out_profile), ("dropped", c.dropped)]
    }
}
