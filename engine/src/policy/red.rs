//! RED (Floyd and Jacobson, 1993) and CATNIP-RED (CATNIP section III-C).
//!
//! On every arrival the average queue (packets) is updated: avg = (1 - w_q) avg + w_q q when
//! the queue holds packets, and after an idle period avg = (1 - w_q)^m avg, where m is the
//! number of typical packets the link could have sent meanwhile. Between min_th and max_th an
//! arrival is dropped with probability p_a = p_b / (1 - count p_b), p_b = max_p (avg - min_th) /
//! (max_th - min_th), where count is the number of arrivals since the last drop, which spaces
//! drops evenly; at or above max_th every arrival is dropped. The buffer limit still applies.
//!
//! With thresholds in bytes (`{"bytes": x}`) the average is over the queue's bytes instead of
//! its packets (byte mode); nothing else changes.
//!
//! CATNIP-RED takes the same decisions, but when one falls on a high-priority arrival and a
//! low-priority packet is queued, a random low-priority packet is pushed out instead.

use super::fifo::{Admission, Buffered, FifoPolicy};
use super::pushout::{is_high, is_low, push_out};
use super::{typical_tx_ns, Dropped, LinkEnv, PolicyParams, QueuePolicy, Queued};
use crate::params::{one_unit, Buffer, Threshold, Unit};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Deserialize;

/// `{"kind": "red", "min_th": T, "max_th": T, "w_q": w, "max_p": p, "mean_pkt_bytes": 1000}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedConfig {
    pub min_th: Threshold,
    pub max_th: Threshold,
    pub w_q: f64,
    pub max_p: f64,
    /// Bytes of a typical packet, for the idle-time correction.
    pub mean_pkt_bytes: u32,
}

/// `{"kind": "catnip_red", ...}`: RED's parameters.
#[derive(Debug, Clone, Deserialize)]
#[serde(transparent)]
pub struct CatnipRedConfig(pub RedConfig);

impl RedConfig {
    /// The checked parameters and their unit.
    pub fn params(&self, rate_bps: u64) -> Result<(RedParams, Unit), String> {
        red_params(
            &[("min_th", self.min_th), ("max_th", self.max_th)],
            self.w_q,
            self.max_p,
            self.mean_pkt_bytes,
            rate_bps,
        )
    }

    fn red<H: 'static>(&self, env: &LinkEnv, catnip: bool) -> Result<Box<dyn QueuePolicy<H>>, String> {
        let (params, unit) = self.params(env.rate_bps)?;
        Ok(Box::new(Red::<H>::new(params, unit, env.buffer, catnip, env.seed)))
    }
}

/// RED's parameters from named thresholds (min_th, max_th), checked: one unit, order, ranges.
pub fn red_params(
    thresholds: &[(&str, Threshold); 2],
    w_q: f64,
    max_p: f64,
    mean_pkt_bytes: u32,
    rate_bps: u64,
) -> Result<(RedParams, Unit), String> {
    let named: Vec<(String, Threshold)> = thresholds.iter().map(|(n, t)| (n.to_string(), *t)).collect();
    let unit = one_unit(&named)?;
    if mean_pkt_bytes == 0 {
        return Err("mean_pkt_bytes: must be at least 1".into());
    }
    let params = RedParams {
        min_th: thresholds[0].1.value,
        max_th: thresholds[1].1.value,
        w_q,
        max_p,
        typical_tx_ns: typical_tx_ns(mean_pkt_bytes, rate_bps),
    };
    params.validate()?;
    Ok((params, unit))
}

impl PolicyParams for RedConfig {
    fn build<H: 'static>(&self, env: &LinkEnv) -> Result<Box<dyn QueuePolicy<H>>, String> {
        self.red(env, false)
    }
}

impl PolicyParams for CatnipRedConfig {
    fn build<H: 'static>(&self, env: &LinkEnv) -> Result<Box<dyn QueuePolicy<H>>, String> {
        self.0.red(env, true)
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RedParams {
    pub min_th: f64,
    pub max_th: f64,
    pub w_q: f64,
    pub max_p: f64,
    /// Transmission time of a typical packet, ns (idle-time correction).
    pub typical_tx_ns: f64,
}

impl RedParams {
    pub fn validate(&self) -> Result<(), String> {
        if !(self.min_th >= 0.0 && self.max_th > self.min_th) {
            return Err(format!("need 0 <= min_th < max_th (got {} and {})", self.min_th, self.max_th));
        }
        if !(self.w_q > 0.0 && self.w_q <= 1.0) || !(self.max_p > 0.0 && self.max_p <= 1.0) {
            return Err(format!("w_q and max_p must be in (0, 1] (got {} and {})", self.w_q, self.max_p));
        }
        Ok(())
    }
}

/// RED's admission rule (and CATNIP-RED's).
pub struct RedRule {
    params: RedParams,
    unit: Unit,
    avg: f64,
    /// Arrivals since the last drop while avg was between the thresholds; -1 outside.
    count: i64,
    catnip: bool,
    rng: ChaCha8Rng,
}

pub type Red<H> = FifoPolicy<H, RedRule>;

impl<H> Red<H> {
    pub fn new(params: RedParams, unit: Unit, limit: Option<Buffer>, catnip: bool, seed: u64) -> Red<H> {
        let rule = RedRule { params, unit, avg: 0.0, count: -1, catnip, rng: ChaCha8Rng::seed_from_u64(seed) };
        FifoPolicy::with_rule(limit, rule)
    }

    pub fn average(&self) -> f64 {
        self.rule.avg
    }
}

impl RedRule {
    fn early_drop(&mut self) -> bool {
        early_drop(&self.params, self.avg, &mut self.count, &mut self.rng)
    }
}

/// RED's average after an arrival: the EWMA of the queue `q`, or, when the queue has been
/// empty since `idle_since`, the decay (1 - w_q)^m for the m typical packets the link could
/// have sent meanwhile. Shared by RED, CATNIP-RED, RIO and 3-level RED.
pub fn next_average(p: &RedParams, avg: f64, q: f64, idle_since: Option<u64>, now: u64) -> f64 {
    match idle_since {
        Some(since) => avg * (1.0 - p.w_q).powf(now.saturating_sub(since) as f64 / p.typical_tx_ns),
        None => (1.0 - p.w_q) * avg + p.w_q * q,
    }
}

/// RED's decision for one arrival given the average (Floyd and Jacobson, Fig. 2): none below
/// min_th (count = -1), always at or above max_th, else p_a = p_b / (1 - count p_b) with count
/// the arrivals since the last drop. Shared by RED, CATNIP-RED, RIO and 3-level RED.
pub fn early_drop(p: &RedParams, avg: f64, count: &mut i64, rng: &mut ChaCha8Rng) -> bool {
    if avg < p.min_th {
        *count = -1;
        return false;
    }
    if avg >= p.max_th {
        *count = 0;
        return true;
    }
    *count += 1;
    let p_b = p.max_p * (avg - p.min_th) / (p.max_th - p.min_th);
    let denom = 1.0 - *count as f64 * p_b;
    let p_a = if denom <= 0.0 { 1.0 } else { (p_b / denom).min(1.0) };
    if rng.gen::<f64>() < p_a {
        *count = 0;
        return true;
    }
    false
}

impl<H> Admission<H> for RedRule {
    fn admit(&mut self, pkt: Queued<H>, q: &mut Buffered<H>, now: u64, dropped: &mut Vec<Dropped<H>>) {
        self.avg = next_average(&self.params, self.avg, q.fifo.size(self.unit) as f64, q.idle_since(), now);
        let early = self.early_drop();
        if !early && q.fits(pkt.info.len) {
            q.fifo.push(pkt);
        } else if self.catnip && is_high(pkt.info.class) && q.fifo.count_where(is_low) > 0 {
            if early {
                // RED wanted a drop: a low-priority packet pays it instead of this arrival.
                let out = q.fifo.remove_random_where(is_low, &mut self.rng).expect("counted above");
                dropped.push(Dropped::evicted(out));
            }
            // And if the buffer is still full, push-out as CATNIP-Good does.
            push_out(&mut q.fifo, q.limit, pkt, is_low, &mut self.rng, dropped);
        } else {
            dropped.push(Dropped::refused(pkt));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{PacketInfo, DSCP_AF11, DSCP_AF12};

    const PARAMS: RedParams = RedParams { min_th: 2.0, max_th: 6.0, w_q: 0.01, max_p: 0.1, typical_tx_ns: 1e6 };

    fn pkt(seq: u64, dscp: u8) -> Queued<u64> {
        Queued { handle: seq, info: PacketInfo::new(1000, dscp, 0), arrival: 0, seq }
    }

    #[test]
    fn average_follows_the_ewma_and_decays_when_idle() {
        let mut red = Red::new(PARAMS, Unit::Packets, Some(Buffer::Packets(10)), false, 1);
        let mut d = Vec::new();
        red.enqueue(pkt(0, 0), 0, &mut d); // empty queue, idle since 0: avg stays 0
        red.enqueue(pkt(1, 0), 0, &mut d); // q = 1
        assert!((red.average() - 0.01).abs() < 1e-12);
        red.enqueue(pkt(2, 0), 0, &mut d); // q = 2
        assert!((red.average() - (0.99 * 0.01 + 0.02)).abs() < 1e-12);
        let before = red.average();
        (0..3).for_each(|_| drop(red.dequeue(1_000_000)));
        // Idle for 100 typical transmission times: avg *= 0.99^100.
        red.enqueue(pkt(3, 0), 101_000_000, &mut d);
        assert!((red.average() - before * 0.99f64.powi(100)).abs() < 1e-12);
    }

    #[test]
    fn no_early_drops_below_min_th_all_at_max_th() {
        let mut red = Red::new(RedParams { w_q: 1.0, ..PARAMS }, Unit::Packets, None, false, 1);
        let mut d = Vec::new();
        for i in 0..3 {
            red.enqueue(pkt(i, 0), 0, &mut d); // avg = q before this arrival: 0, 1, 2 -> none dropped
        }
        assert!(d.is_empty());
        for i in 3..7 {
            red.enqueue(pkt(i, 0), 0, &mut d);
        }
        let before = d.len();
        // Force q >= max_th: every further arrival is dropped.
        while red.len_packets() < 6 {
            red.q.fifo.push(pkt(99, 0));
        }
        red.enqueue(pkt(100, 0), 0, &mut d);
        assert_eq!(d.len(), before + 1);
    }

    #[test]
    fn drop_rate_between_thresholds_matches_the_count_rule() {
        // avg held at the midpoint of the thresholds: p_b = max_p / 2 = 0.05.
        let mut red: Red<u64> = Red::new(RedParams { w_q: 1e-9, ..PARAMS }, Unit::Packets, None, false, 5);
        red.rule.avg = 4.0;
        red.q.set_busy();
        red.q.fifo.push(pkt(0, 0));
        let mut drops = 0;
        let n = 200_000;
        for _ in 0..n {
            if red.rule.early_drop() {
                drops += 1;
            }
        }
        // With count restarting at 0 after a drop and incremented before p_a is computed (the
        // pseudocode of Floyd & Jacobson, Fig. 2), the gap between drops is uniform on
        // 1 .. 1/p_b - 1 = 19 arrivals: mean 10.
        let mean_gap = n as f64 / drops as f64;
        assert!((mean_gap - 10.0).abs() < 0.2, "mean gap {mean_gap}");
    }

    /// How many of `n` packets of `len` bytes offered at once a RED built from the config's
    /// JSON queues (w_q 1: the average is the queue; max_p 1e-9: between the thresholds a drop
    /// is all but impossible, at max_th certain).
    fn accepted(thresholds: &str, n: u64, len: u32) -> usize {
        let json = format!(r#"{{{thresholds}, "w_q": 1, "max_p": 1e-9}}"#);
        let config: RedConfig = serde_json::from_str(&crate::testkit::params("red", &json)).unwrap();
        let env = LinkEnv { buffer: None, rate_bps: 1_000_000, seed: 1 };
        let mut red = config.build::<u64>(&env).unwrap();
        let mut d = Vec::new();
        for i in 0..n {
            red.enqueue(Queued { handle: i, info: PacketInfo::new(len, 0, 0), arrival: 0, seq: i }, 0, &mut d);
        }
        red.len_packets()
    }

    #[test]
    fn byte_mode_averages_bytes_not_packets() {
        // Thresholds 3000 and 6000 bytes: 40 small packets (4000 bytes) stay below max_th, large
        // ones stop at 6000 bytes (4). In packets (3 and 6) both stop at 6 packets.
        let bytes = r#""min_th": {"bytes": 3000}, "max_th": {"bytes": 6000}"#;
        let packets = r#""min_th": 3, "max_th": {"packets": 6}"#;
        assert_eq!((accepted(bytes, 40, 100), accepted(bytes, 10, 1500)), (40, 4));
        assert_eq!((accepted(packets, 40, 100), accepted(packets, 10, 1500)), (6, 6));
        // And the same in the average's own terms, below the limit of one RED.
        let mut red = Red::new(RedParams { w_q: 0.5, ..PARAMS }, Unit::Bytes, None, false, 1);
        let mut d = Vec::new();
        red.q.set_busy();
        red.q.fifo.push(Queued { handle: 0, info: PacketInfo::new(1500, 0, 0), arrival: 0, seq: 0 });
        red.enqueue(pkt(1, 0), 0, &mut d);
        assert_eq!(red.average(), 750.0);
    }

    #[test]
    fn catnip_red_pushes_out_a_low_packet_for_a_high_arrival() {
        let mut red = Red::new(RedParams { w_q: 1.0, ..PARAMS }, Unit::Packets, Some(Buffer::Packets(8)), true, 2);
        for i in 0..7 {
            red.q.fifo.push(pkt(i, if i == 3 { DSCP_AF12 } else { DSCP_AF11 }));
        }
        red.q.set_busy();
        // avg = q = 7 >= max_th: RED drops; the high arrival evicts the one low packet instead.
        let mut out = Vec::new();
        red.enqueue(pkt(50, DSCP_AF11), 0, &mut out);
        let got: Vec<(u64, bool)> = out.iter().map(|x| (x.pkt.seq, x.is_eviction())).collect();
        assert_eq!(got, vec![(3, true)]);
        let mut out = Vec::new();
        red.enqueue(pkt(51, DSCP_AF11), 0, &mut out); // no low packet left: the arrival goes
        assert_eq!(out.iter().map(|x| (x.pkt.seq, x.is_eviction())).collect::<Vec<_>>(), vec![(51, false)]);
    }
}
