//! Edge functions: what a DiffServ edge does to a link's arrivals before its queue. A link's
//! `edge` list is applied in order to every arrival: `mark` sets the DSCP by header fields,
//! `police` meters with a token bucket and drops or remarks what is out of profile, `shape`
//! holds packets in a buffer of its own until a token bucket lets them on, `tcpf` and
//! `token_marker` are the TCP-friendly marking paper's markers (edge/tcpf.rs). The loss wrapper and
//! the policy see the packet as the edge functions left it.
//!
//! Each function is one file in edge/: its config struct checks its parameters and builds it
//! ([`EdgeParams`]), the function keeps its own counters ([`EdgeFunction`]); those traits live
//! in edge/api.rs, below this file, so a function's file never imports the list that registers
//! it. Adding one is that file plus one line in the `edge_functions!` list below (and its `mod`), which makes the `kind` enum of the
//! config, the list of kinds, each kind's parameters and the dispatch (as policy/mod.rs does for
//! queue policies). No parameter has a default here: the schema (spec/edge.py) writes them all.
//!
//! Token buckets (edge/bucket.rs) are exact integers on the engine's virtual clock (a credit in units of 1e-9
//! bit, to which a rate of r bit/s adds r per ns), so a shaper's releases, like the
//! transmitter's departures, never drift and never move with a late wake-up.

pub mod api;
pub mod bucket;
mod mark;
mod police;
mod shape;
pub mod tcpf;

pub use api::{parse_cidr, AckObserver, EdgeFunction, EdgeParams, Step};
pub use bucket::MIN_BUCKET_BYTES;
pub use mark::{MarkConfig, MarkRule, Marker};
pub use police::{ExceedAction, ExceedConfig, Per, PoliceConfig, Policed, Policer};
pub use shape::{ShapeConfig, Shaper};
pub use tcpf::{TcpfConfig, TokenMarkerConfig};

use crate::policy::Queued;
use crate::stats::EdgeCounters;
use serde::Deserialize;
use std::cell::RefCell;
use std::rc::Rc;

/// The edge functions: `"kind" => Variant(its parameters)`, one line each.
macro_rules! edge_functions {
    ($($kind:literal => $variant:ident($params:ty),)*) => {
        /// One edge function: `{"kind": K, ...K's parameters}`.
        #[derive(Debug, Clone, Deserialize)]
        #[serde(tag = "kind")]
        pub enum EdgeConfig {
            $(#[serde(rename = $kind)] $variant($params),)*
        }

        /// Every edge function kind, in the order error messages list them.
        pub const KINDS: &[&str] = &[$($kind),*];

        /// Every kind with the parameters it takes (`catnip-engine kinds`), each one required.
        pub fn parameters() -> Vec<(&'static str, &'static [&'static str])> {
            vec![$(($kind, crate::params::fields_of::<$params>()),)*]
        }

        impl EdgeConfig {
            pub fn kind(&self) -> &'static str {
                match self {
                    $(EdgeConfig::$variant(_) => $kind,)*
                }
            }

            /// Whether it may change a packet's DSCP.
            pub fn may_rewrite(&self) -> bool {
                match self {
                    $(EdgeConfig::$variant(p) => p.may_rewrite(),)*
                }
            }

            /// Check the parameters (errors name the field: `rules[1].src: ...`) and build the function.
            pub fn build<H: 'static>(&self) -> Result<Stage<H>, String> {
                let f = match self {
                    $(EdgeConfig::$variant(p) => p.build()?,)*
                };
                Ok(Stage { kind: self.kind(), f })
            }

            /// Why the parameters of `kind` in `rest` do not deserialize (see config.rs, params.rs `deep_error`).
            pub fn explain(kind: &str, rest: &serde_json::Value) -> Option<String> {
                match kind {
                    $($kind => crate::params::deep_error::<$params>(rest),)*
                    _ => None,
                }
            }
        }
    };
}

edge_functions! {
    "mark" => Mark(MarkConfig),
    "police" => Police(PoliceConfig),
    "shape" => Shape(ShapeConfig),
    "tcpf" => Tcpf(TcpfConfig),
    "token_marker" => TokenMarker(TokenMarkerConfig),
}

impl EdgeConfig {
    pub fn validate(&self) -> Result<(), String> {
        self.build::<()>().map(|_| ())
    }
}

/// A built edge function and its kind.
pub struct Stage<H> {
    pub kind: &'static str,
    f: Box<dyn EdgeFunction<H>>,
}

impl<H> Stage<H> {
    pub fn apply(&mut self, pkt: Queued<H>, now: u64) -> Step<H> {
        self.f.apply(pkt, now)
    }

    pub fn counters(&self) -> EdgeCounters {
        EdgeCounters { kind: self.kind, values: self.f.counters() }
    }

    pub fn next_release(&self) -> Option<u64> {
        self.f.next_release()
    }

    pub fn release(&mut self, t: u64) -> Queued<H> {
        self.f.release(t)
    }

    pub fn drain(&mut self) -> Vec<Queued<H>> {
        self.f.drain()
    }

    pub fn ack_observer(&self) -> Option<Rc<RefCell<dyn AckObserver>>> {
        self.f.ack_observer()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::PacketInfo;
    use std::net::Ipv4Addr;

    fn edge(json: &str) -> Result<Stage<u64>, String> {
        let c: EdgeConfig = serde_json::from_str(&crate::testkit::filled(json)).map_err(|e| e.to_string())?;
        c.build()
    }

    fn info(dscp: u8, proto: u8, src: &str, dst: &str, ports: Option<(u16, u16)>) -> PacketInfo {
        let a = |s: &str| u32::from(s.parse::<Ipv4Addr>().unwrap());
        PacketInfo::new(1000, dscp, 0).with_addresses(proto, a(src), a(dst), ports)
    }

    fn mark(json: &str, p: &PacketInfo) -> u8 {
        let mut stage = edge(json).unwrap();
        assert_eq!(stage.kind, "mark");
        let Step::Next(q) = stage.apply(Queued { handle: 0, info: *p, arrival: 0, seq: 0 }, 0) else {
            panic!("a marker passes every packet on")
        };
        assert_eq!(q.info.class, crate::packet::Class::from_dscp(q.info.dscp));
        assert_eq!(stage.counters().get("remarked"), u64::from(q.info.dscp != p.dscp));
        q.info.dscp
    }

    #[test]
    fn the_first_matching_rule_wins_then_the_default() {
        let rules = r#"{"kind": "mark", "rules": [
            {"proto": 6, "dst": "10.1.0.0/16", "dport": [80, 80], "dscp": 10},
            {"src": "10.2.0.0/24", "dscp": 12},
            {"proto": 17, "sport": [5000, 5999], "dscp": 14}], "default": 0}"#;
        let web = info(46, 6, "10.2.0.5", "10.1.2.3", Some((40000, 80)));
        assert_eq!(mark(rules, &web), 10); // rules 1 and 2 match: the first wins
        assert_eq!(mark(rules, &info(46, 6, "10.2.0.5", "10.1.2.3", Some((40000, 81)))), 12);
        assert_eq!(mark(rules, &info(46, 6, "10.2.1.5", "10.1.2.3", Some((40000, 81)))), 0); // default
                                                                                             // Port ranges are inclusive, and need ports: a UDP packet in range, then out of it.
        assert_eq!(mark(rules, &info(46, 17, "9.9.9.9", "1.1.1.1", Some((5999, 1)))), 14);
        assert_eq!(mark(rules, &info(46, 17, "9.9.9.9", "1.1.1.1", Some((6000, 1)))), 0);
        assert_eq!(mark(rules, &info(46, 17, "9.9.9.9", "1.1.1.1", None)), 0);
        // No default: an unmatched packet keeps its DSCP.
        assert_eq!(mark(r#"{"kind": "mark", "rules": [{"proto": 17, "dscp": 10}]}"#, &web), 46);
        assert_eq!(mark(r#"{"kind": "mark", "rules": [{"src": "0.0.0.0/0", "dscp": 12}]}"#, &web), 12);
    }

    #[test]
    fn bad_fields_are_named() {
        for (json, want) in [
            (
                r#"{"kind": "mark", "rules": [{"dscp": 10}, {"src": "10.0.0.1/24", "dscp": 10}]}"#,
                "rules[1].src: \"10.0.0.1/24\": host bits set",
            ),
            (
                r#"{"kind": "mark", "rules": [{"dst": "10.0.0/8", "dscp": 10}]}"#,
                "rules[0].dst: \"10.0.0/8\": not an IPv4 address",
            ),
            (
                r#"{"kind": "mark", "rules": [{"dst": "10.0.0.0/33", "dscp": 10}]}"#,
                "rules[0].dst: \"10.0.0.0/33\": prefix length",
            ),
            (
                r#"{"kind": "mark", "rules": [{"sport": [10, 5], "dscp": 10}]}"#,
                "rules[0].sport: need lo <= hi <= 65535",
            ),
            (r#"{"kind": "mark", "rules": [{"dport": [10, 65536], "dscp": 10}]}"#, "rules[0].dport: need lo <= hi"),
            (r#"{"kind": "mark", "rules": [{"proto": 1, "dscp": 10}]}"#, "rules[0].proto: must be 6 (TCP), 17 (UDP)"),
            (r#"{"kind": "mark", "rules": [{"dscp": 64}]}"#, "rules[0].dscp: must be a DSCP, 0-63 (got 64)"),
            (r#"{"kind": "mark", "default": 99}"#, "default: must be a DSCP"),
            (
                r#"{"kind": "police", "rate_bps": 0, "bucket_bytes": 1500, "exceed": {"action": "drop"}}"#,
                "rate_bps: must be above 0",
            ),
            (
                r#"{"kind": "police", "rate_bps": 1, "bucket_bytes": 63, "exceed": {"action": "drop"}}"#,
                "bucket_bytes: must hold one packet of 64",
            ),
            (
                r#"{"kind": "police", "rate_bps": 1, "bucket_bytes": 64, "dscp": [10, 70], "exceed": {"action": "drop"}}"#,
                "dscp[1]: must be a DSCP",
            ),
            (
                r#"{"kind": "police", "rate_bps": 1, "bucket_bytes": 64, "dscp": [], "exceed": {"action": "drop"}}"#,
                "dscp: an empty list",
            ),
            (
                r#"{"kind": "police", "rate_bps": 1, "bucket_bytes": 64, "exceed": {"action": "remark"}}"#,
                "exceed.dscp: the action remark needs",
            ),
            (
                r#"{"kind": "police", "rate_bps": 1, "bucket_bytes": 64, "exceed": {"action": "drop", "dscp": 12}}"#,
                "exceed.dscp: only for",
            ),
            (
                r#"{"kind": "police", "rate_bps": 1, "bucket_bytes": 64, "exceed": {"action": "remark", "dscp": 64}}"#,
                "exceed.dscp: must be a DSCP",
            ),
            (r#"{"kind": "shape", "rate_bps": 1000, "bucket_bytes": 10}"#, "bucket_bytes: must hold"),
            (
                r#"{"kind": "shape", "rate_bps": 1000, "bucket_bytes": 1500, "buffer": {"packets": 0}}"#,
                "buffer: must hold at least one",
            ),
        ] {
            let e = edge(json).err().unwrap_or_else(|| panic!("{json} accepted"));
            assert!(e.starts_with(want), "{json}: {e}");
        }
        assert_eq!(parse_cidr("10.1.2.3").unwrap(), (0x0a01_0203, u32::MAX));
        assert_eq!(parse_cidr("0.0.0.0/0").unwrap(), (0, 0));
    }

    fn q(seq: u64, len: u32, dscp: u8, src: u32) -> Queued<u64> {
        Queued { handle: seq, info: PacketInfo::new(len, dscp, 0).with_addresses(6, src, 1, None), arrival: 0, seq }
    }

    #[test]
    fn police_per_source_remarks_or_drops_and_keeps_to_rate_times_t_plus_bucket() {
        // 1 Mbit/s, 3000-byte bucket, per source; AF11 metered, AF12 not.
        let json = |exceed: &str| {
            format!(
                r#"{{"kind": "police", "rate_bps": 1000000, "bucket_bytes": 3000, "dscp": [10], "per": "src", "exceed": {exceed}}}"#
            )
        };
        for exceed in [r#"{"action": "remark", "dscp": 12}"#, r#"{"action": "drop"}"#] {
            let mut stage = edge(&json(exceed)).unwrap();
            // Two sources each sending 1000-byte AF11 packets at 2 Mbit/s (every 4 ms) for 2 s,
            // and a third source's AF12 at the same rate.
            let mut in_bytes = [0u64; 2];
            let (mut remarked, mut dropped) = (0, 0);
            for k in 0..500u64 {
                let t = k * 4_000_000;
                for (s, src) in [(0usize, 1u32), (1, 2)] {
                    match stage.apply(q(k, 1000, 10, src), t) {
                        Step::Next(p) if p.info.dscp == 10 => in_bytes[s] += 1000,
                        Step::Next(p) => {
                            assert_eq!(p.info.dscp, 12);
                            remarked += 1
                        }
                        Step::Drop(_, policed) => {
                            assert!(policed);
                            dropped += 1
                        }
                        Step::Held => unreachable!(),
                    }
                    // Never more than rate * t + bucket in profile, for each source.
                    let bound = 1_000_000 * (t + 1) / 8_000_000_000 + 3000;
                    assert!(in_bytes[s] <= bound, "{} > {bound} at {t}", in_bytes[s]);
                }
                assert!(matches!(stage.apply(q(k, 1000, 12, 3), t), Step::Next(p) if p.info.dscp == 12));
            }
            // Each source gets about the rate: 2 s * 1 Mbit/s = 250 kB, plus the bucket.
            for b in in_bytes {
                assert!((250_000..=253_000).contains(&b), "{b}");
            }
            let c = stage.counters();
            let (in_profile, out_profile, d) = (c.get("in"), c.get("out"), c.get("dropped"));
            assert_eq!(in_profile + out_profile, 1000); // the AF12 packets are not counted
            assert_eq!(in_profile, (in_bytes[0] + in_bytes[1]) / 1000);
            if exceed.contains("remark") {
                assert_eq!((remarked, dropped, d), (out_profile, 0, 0));
            } else {
                assert_eq!((remarked, dropped, d), (0, out_profile, out_profile));
            }
        }
    }

    #[test]
    fn a_policer_per_link_shares_one_bucket_and_oversized_packets_are_out() {
        let mut stage =
            edge(r#"{"kind": "police", "rate_bps": 8000, "bucket_bytes": 1000, "exceed": {"action": "drop"}}"#)
                .unwrap();
        let pass = |s: &mut Stage<u64>, len, src, t| matches!(s.apply(q(0, len, 0, src), t), Step::Next(_));
        assert!(pass(&mut stage, 600, 1, 0));
        assert!(!pass(&mut stage, 600, 2, 0)); // 400 left: the other source shares it
        assert!(pass(&mut stage, 400, 2, 0));
        assert!(!pass(&mut stage, 1, 2, 0));
        assert!(pass(&mut stage, 1, 2, 1_000_000)); // 8000 bit/s: 1 byte per ms
        assert!(!pass(&mut stage, 1001, 1, 10_000_000_000)); // larger than the bucket
    }

    /// Offer arrivals (time, len) to a shaper and run it; (seq, release time) of what passed.
    fn shape(json: &str, arrivals: &[(u64, u32)]) -> (Vec<(u64, u64)>, Vec<u64>, EdgeCounters) {
        let mut stage = edge(json).unwrap();
        let (mut out, mut dropped) = (Vec::new(), Vec::new());
        let run_to = |stage: &mut Stage<u64>, now: u64, out: &mut Vec<(u64, u64)>| {
            while let Some(t) = stage.next_release().filter(|t| *t <= now) {
                out.push((stage.release(t).seq, t));
            }
        };
        for (i, &(t, len)) in arrivals.iter().enumerate() {
            run_to(&mut stage, t, &mut out);
            match stage.apply(q(i as u64, len, 0, 0), t) {
                Step::Next(p) => out.push((p.seq, t)),
                Step::Held => {}
                Step::Drop(p, policed) => {
                    assert!(!policed);
                    dropped.push(p.seq)
                }
            }
        }
        run_to(&mut stage, u64::MAX, &mut out);
        (out, dropped, stage.counters())
    }

    #[test]
    fn a_shaper_releases_at_its_rate_after_the_burst_and_exactly_on_the_clock() {
        // 1 Mbit/s, bucket 3000 bytes: 40 packets of 1000 bytes at once. Three leave at once (the
        // bucket), then one every 8 ms exactly, however many there are.
        let arrivals: Vec<(u64, u32)> = (0..40).map(|_| (0, 1000)).collect();
        let (out, dropped, c) = shape(r#"{"kind": "shape", "rate_bps": 1000000, "bucket_bytes": 3000}"#, &arrivals);
        assert!(dropped.is_empty());
        let times: Vec<u64> = out.iter().map(|x| x.1).collect();
        assert_eq!(&times[..4], &[0, 0, 0, 8_000_000]);
        assert!(times.windows(2).skip(2).all(|w| w[1] - w[0] == 8_000_000));
        assert_eq!(out.iter().map(|x| x.0).collect::<Vec<_>>(), (0..40).collect::<Vec<_>>()); // FIFO
        assert_eq!(c, EdgeCounters::new("shape", &[("held", 37), ("dropped", 0), ("queue_pkts", 0)]));
        // A rate that does not divide evenly: 3 Mbit/s, 1000 bytes = 2666.67 us. Releases are
        // rounded up to the ns but never drift: packet k leaves at ceil(k * 8e9 / 3e6) ns.
        let arrivals: Vec<(u64, u32)> = (0..1000).map(|_| (0, 1000)).collect();
        let (out, _, _) = shape(r#"{"kind": "shape", "rate_bps": 3000000, "bucket_bytes": 1000}"#, &arrivals);
        for (k, (_, t)) in out.iter().enumerate() {
            assert_eq!(*t, (k as u64 * 8_000_000_000_000).div_ceil(3_000_000), "packet {k}");
        }
        // Output rate over the run: 999 packets after the first in 999 * 2666.67 us.
        assert_eq!(out.last().unwrap().1, 2_664_000_000);
    }

    #[test]
    fn a_shaper_buffer_tail_drops() {
        let arrivals: Vec<(u64, u32)> = (0..10).map(|_| (0, 1000)).collect();
        let json = r#"{"kind": "shape", "rate_bps": 1000000, "bucket_bytes": 1000, "buffer": {"packets": 4}}"#;
        let (out, dropped, c) = shape(json, &arrivals);
        // One passes on the bucket, four wait, five are dropped.
        assert_eq!(dropped, vec![5, 6, 7, 8, 9]);
        assert_eq!(out.iter().map(|x| x.0).collect::<Vec<_>>(), vec![0, 1, 2, 3, 4]);
        assert_eq!(c, EdgeCounters::new("shape", &[("held", 4), ("dropped", 5), ("queue_pkts", 0)]));
        let json = r#"{"kind": "shape", "rate_bps": 1000000, "bucket_bytes": 1000, "buffer": {"bytes": 2500}}"#;
        let (_, dropped, _) = shape(json, &arrivals);
        assert_eq!(dropped.len(), 7);
        // An idle shaper refills to its bucket, no more.
        let (out, _, _) = shape(
            r#"{"kind": "shape", "rate_bps": 1000000, "bucket_bytes": 2000}"#,
            &[(0, 1000), (0, 1000), (0, 1000), (1_000_000_000, 1000), (1_000_000_000, 1000), (1_000_000_000, 1000)],
        );
        let times: Vec<u64> = out.iter().map(|x| x.1).collect();
        assert_eq!(times, vec![0, 0, 8_000_000, 1_000_000_000, 1_000_000_000, 1_008_000_000]);
        // A packet larger than the bucket waits for a full bucket, and leaves it in debt.
        let (out, _, _) =
            shape(r#"{"kind": "shape", "rate_bps": 8000, "bucket_bytes": 100}"#, &[(0, 50), (0, 300), (0, 100)]);
        let times: Vec<u64> = out.iter().map(|x| x.1).collect();
        assert_eq!(times, vec![0, 50_000_000, 350_000_000]);
    }
}
