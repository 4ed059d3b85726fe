//! FRED, Flow Random Early Drop (Lin and Morris, "Dynamics of random early detection",
//! SIGCOMM 1997), and FRIO, its extension to IN/OUT drop precedences (TCP-friendly marking
//! paper, section 5), "in a manner similar to how RED was extended to RIO".
//!
//! FRED keeps state for each active flow (one with packets queued; flow id from the 5-tuple):
//! qlen_i, its queued packets, and strike_i, how often it was caught over its allowance. With
//! avgcq = avg / nactive the average per-flow queue (avg when no flow is active), an arrival of
//! flow i is dropped and strike_i incremented when qlen_i >= max_q (max_q = min_th, or 2 once
//! avg >= max_th), or
//! avg >= max_th and qlen_i > 2 avgcq, or qlen_i >= avgcq and strike_i > 1 (a non-adaptive flow).
//! Otherwise RED's rule applies (red.rs), except that between the thresholds only a flow with
//! qlen_i >= max(min_q, avgcq) may be dropped at random; the arrivals of fragile flows still
//! advance RED's count. A flow's state is deleted when its last packet leaves.
//!
//! The average is computed exclusively on arrival, with RED's idle-time correction (section 5's
//! second modification, which this engine applies to FRED too). FRIO has a separate parameter
//! set and separate queue measures for IN (AF11) and OUT packets: as in RIO (multired.rs) the IN
//! measures (average, qlen_i, nactive, strikes) count IN packets and the OUT measures all
//! packets, and each arrival is judged by its own level's. Section 5's first modification: avgcq
//! is computed from the instantaneous queue (q / nactive) instead of the average.
//!
//! With thresholds in bytes (byte mode) the averages, qlen_i and min_q count bytes, and the
//! max_q of 2 packets above max_th becomes 2 mean_pkt_bytes.

use super::fifo::{Admission, Buffered, FifoPolicy};
use super::multired::{level_params, update_levels, Level, LevelConfig};
use super::red::{early_drop, red_params, RedParams};
use super::{Dropped, LinkEnv, PolicyParams, QueuePolicy, Queued};
use crate::packet::Class;
use crate::params::{Buffer, Threshold, Unit};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::Deserialize;
use std::collections::HashMap;

/// `{"kind": "fred", ...RED's parameters, "min_q": T}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FredConfig {
    pub min_th: Threshold,
    pub max_th: Threshold,
    pub w_q: f64,
    pub max_p: f64,
    pub mean_pkt_bytes: u32,
    /// What a flow may queue between the thresholds without a random drop, in the thresholds'
    /// unit (the schema's default is Lin and Morris's 2 packets for small buffers, 2
    /// mean_pkt_bytes in byte mode: spec/policy.py).
    pub min_q: Threshold,
}

/// `{"kind": "frio", "w_q": w, "levels": [IN, OUT], "mean_pkt_bytes": 1000, "min_q": T}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FrioConfig {
    pub w_q: f64,
    pub levels: Vec<LevelConfig>,
    pub mean_pkt_bytes: u32,
    pub min_q: Threshold,
}

/// min_q in the policy's unit, checked.
fn min_q(t: Threshold, unit: Unit) -> Result<f64, String> {
    if t.unit != unit {
        return Err(format!(
            "min_q: in {} but the thresholds are in {}; one policy's thresholds take one unit",
            t.unit.name(),
            unit.name()
        ));
    }
    match t.value {
        q if q >= 0.0 && q.is_finite() => Ok(q),
        q => {
            Err(format!("min_q must be a {} count >= 0 (got {q})", if unit == Unit::Bytes { "byte" } else { "packet" }))
        }
    }
}

impl PolicyParams for FredConfig {
    fn build<H: 'static>(&self, env: &LinkEnv) -> Result<Box<dyn QueuePolicy<H>>, String> {
        let thresholds = [("min_th", self.min_th), ("max_th", self.max_th)];
        let (params, unit) = red_params(&thresholds, self.w_q, self.max_p, self.mean_pkt_bytes, env.rate_bps)?;
        let q = min_q(self.min_q, unit)?;
        Ok(Box::new(Fred::<H>::classic(params, q, env.buffer, env.seed).measured_in(unit, self.mean_pkt_bytes)))
    }
}

impl PolicyParams for FrioConfig {
    fn build<H: 'static>(&self, env: &LinkEnv) -> Result<Box<dyn QueuePolicy<H>>, String> {
        let (params, unit) = level_params("frio", &self.levels, 2, self.w_q, self.mean_pkt_bytes, env.rate_bps)?;
        let q = min_q(self.min_q, unit)?;
        let fred = Fred::<H>::frio([params[0], params[1]], q, env.buffer, env.seed);
        Ok(Box::new(fred.measured_in(unit, self.mean_pkt_bytes)))
    }
}

/// One active flow: per level, what it has queued at that level or higher, and its strikes.
#[derive(Clone, Debug, Default, PartialEq)]
struct Flow {
    qlen: Vec<usize>,
    strike: Vec<u32>,
}

/// FRED's and FRIO's admission rule.
pub struct FredRule {
    levels: Vec<Level>,
    classify: fn(Class) -> usize,
    /// What a flow may always queue between the thresholds without a random drop.
    min_q: f64,
    /// FRIO: avgcq from the instantaneous queue; FRED: from the average.
    instantaneous: bool,
    unit: Unit,
    /// One packet in `unit` (max_q is 2 of them above max_th).
    per_packet: f64,
    flows: HashMap<u64, Flow>,
    /// Per level, the flows with packets counted at that level.
    nactive: Vec<usize>,
    rng: ChaCha8Rng,
}

pub type Fred<H> = FifoPolicy<H, FredRule>;

impl<H> Fred<H> {
    /// FRED: one parameter set for every packet.
    pub fn classic(params: RedParams, min_q: f64, limit: Option<Buffer>, seed: u64) -> Fred<H> {
        Fred::build(vec![params], |_| 0, min_q, false, limit, seed)
    }

    /// FRIO: IN (AF11) parameters first, then OUT.
    pub fn frio(in_out: [RedParams; 2], min_q: f64, limit: Option<Buffer>, seed: u64) -> Fred<H> {
        Fred::build(in_out.to_vec(), super::multired::rio_level, min_q, true, limit, seed)
    }

    /// Count in `unit` (thresholds and min_q must be in it already); packets by default.
    pub fn measured_in(mut self, unit: Unit, mean_pkt_bytes: u32) -> Fred<H> {
        self.rule.unit = unit;
        self.rule.per_packet = if unit == Unit::Bytes { f64::from(mean_pkt_bytes) } else { 1.0 };
        self
    }

    fn build(
        params: Vec<RedParams>,
        classify: fn(Class) -> usize,
        min_q: f64,
        instantaneous: bool,
        limit: Option<Buffer>,
        seed: u64,
    ) -> Fred<H> {
        let n = params.len();
        let rule = FredRule {
            levels: params.into_iter().map(Level::new).collect(),
            classify,
            min_q,
            instantaneous,
            unit: Unit::Packets,
            per_packet: 1.0,
            flows: HashMap::new(),
            nactive: vec![0; n],
            rng: ChaCha8Rng::seed_from_u64(seed),
        };
        FifoPolicy::with_rule(limit, rule)
    }

    pub fn averages(&self) -> Vec<f64> {
        self.rule.levels.iter().map(|l| l.avg).collect()
    }
}

impl FredRule {
    fn level_of(&self, class: Class) -> usize {
        (self.classify)(class).min(self.levels.len() - 1)
    }

    /// A packet's size in the rule's unit.
    fn size(&self, len: u32) -> usize {
        match self.unit {
            Unit::Packets => 1,
            Unit::Bytes => len as usize,
        }
    }

    /// Lin and Morris's per-arrival test, for an arrival of `flow` at `level`: true to drop.
    fn judge<H>(&mut self, flow: u64, level: usize, q: &Buffered<H>) -> bool {
        let (qlen, strike) = self.flows.get(&flow).map_or((0, 0), |f| (f.qlen[level], f.strike[level]));
        let qlen = qlen as f64;
        let classify = self.classify;
        let lv = &mut self.levels[level];
        let (p, avg) = (lv.params, lv.avg);
        let share =
            if self.instantaneous { q.fifo.size_where(self.unit, |c| classify(c) <= level) as f64 } else { avg };
        let avgcq = share / self.nactive[level].max(1) as f64;
        let max_q = if avg >= p.max_th { 2.0 * self.per_packet } else { p.min_th };
        if qlen >= max_q || (avg >= p.max_th && qlen > 2.0 * avgcq) || (qlen >= avgcq && strike > 1) {
            // A state-less flow (nothing queued) keeps no strike: state lives while packets do.
            if let Some(f) = self.flows.get_mut(&flow) {
                f.strike[level] += 1;
            }
            return true;
        }
        let robust = qlen >= self.min_q.max(avgcq);
        if robust || avg < p.min_th || avg >= p.max_th {
            early_drop(&p, avg, &mut lv.count, &mut self.rng)
        } else {
            lv.count += 1; // a fragile flow's arrival: counted, never dropped at random
            false
        }
    }

    /// Count a packet being queued for its flow.
    fn count_in<H>(&mut self, pkt: &Queued<H>) {
        let n = self.levels.len();
        let level = self.level_of(pkt.info.class);
        let size = self.size(pkt.info.len);
        let flow = self.flows.entry(pkt.info.flow).or_insert_with(|| Flow { qlen: vec![0; n], strike: vec![0; n] });
        for l in level..n {
            if flow.qlen[l] == 0 {
                self.nactive[l] += 1;
            }
            flow.qlen[l] += size;
        }
    }
}

impl<H> Admission<H> for FredRule {
    fn admit(&mut self, pkt: Queued<H>, q: &mut Buffered<H>, now: u64, dropped: &mut Vec<Dropped<H>>) {
        let level = self.level_of(pkt.info.class);
        update_levels(&mut self.levels, level, &q.fifo, self.classify, self.unit, q.idle_since(), now);
        if !self.judge(pkt.info.flow, level, q) && q.fits(pkt.info.len) {
            self.count_in(&pkt);
            q.fifo.push(pkt);
        } else {
            dropped.push(Dropped::refused(pkt));
        }
    }

    /// No average update here (section 5): the idle correction on the next arrival stands in.
    fn departed(&mut self, pkt: &Queued<H>) {
        let level = self.level_of(pkt.info.class);
        let size = self.size(pkt.info.len);
        let flow = self.flows.get_mut(&pkt.info.flow).expect("every queued packet's flow has state");
        for l in level..self.levels.len() {
            flow.qlen[l] -= size;
            if flow.qlen[l] == 0 {
                self.nactive[l] -= 1;
                flow.strike[l] = 0;
            }
        }
        if flow.qlen.iter().all(|&q| q == 0) {
            self.flows.remove(&pkt.info.flow);
        }
    }

    fn cleared(&mut self) {
        self.flows.clear();
        self.nactive.iter_mut().for_each(|n| *n = 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{PacketInfo, DSCP_AF11};

    fn params(min_th: f64, max_th: f64, w_q: f64, max_p: f64) -> RedParams {
        RedParams { min_th, max_th, w_q, max_p, typical_tx_ns: 1e6 }
    }

    fn pkt(seq: u64, flow: u64, dscp: u8) -> Queued<u64> {
        Queued { handle: seq, info: PacketInfo::new(1000, dscp, flow), arrival: 0, seq }
    }

    /// Offer (seq, flow, dscp) arrivals at `now`; the seqs dropped.
    fn offer(q: &mut Fred<u64>, now: u64, arrivals: &[(u64, u64, u8)]) -> Vec<u64> {
        let mut d = Vec::new();
        arrivals.iter().for_each(|&(s, f, dscp)| q.enqueue(pkt(s, f, dscp), now, &mut d));
        d.iter().map(|x| x.pkt.seq).collect()
    }

    fn strikes(q: &Fred<u64>, flow: u64) -> Vec<u32> {
        q.rule.flows.get(&flow).map_or(vec![], |f| f.strike.clone())
    }

    /// Queue a packet without judging it.
    fn stuff(q: &mut Fred<u64>, pkt: Queued<u64>) {
        q.rule.count_in(&pkt);
        q.q.fifo.push(pkt);
        q.q.set_busy();
    }

    #[test]
    fn a_flow_over_max_q_is_struck_and_then_held_to_the_average_share() {
        // avg stays far below min_th: no random drops, only the per-flow rules.
        let mut q: Fred<u64> = Fred::classic(params(4.0, 8.0, 0.001, 0.1), 2.0, None, 1);
        let a = |s| (s, 1, 0);
        let b = |s| (s, 2, 0);
        assert_eq!(offer(&mut q, 0, &[a(0), a(1), a(2), a(3), a(4), b(5), a(6)]), vec![4, 6]);
        assert_eq!(strikes(&q, 1), vec![2]);
        assert_eq!(q.dequeue(0).map(|p| p.seq), Some(0));
        assert_eq!(q.dequeue(0).map(|p| p.seq), Some(1));
        // A holds 2 < max_q = 4, but with two strikes it may not exceed avgcq (about 0): dropped.
        // B, with no strikes, is not held to it.
        assert_eq!(offer(&mut q, 0, &[a(7), b(8)]), vec![7]);
        assert_eq!(strikes(&q, 1), vec![3]);
        // Once A's last packet leaves its state (and strikes) go: it is accepted again.
        assert_eq!((q.dequeue(0).unwrap().seq, q.dequeue(0).unwrap().seq), (2, 3));
        assert!(!q.rule.flows.contains_key(&1));
        assert_eq!(offer(&mut q, 0, &[a(9)]), Vec::<u64>::new());
        assert_eq!(strikes(&q, 1), vec![0]);
        assert_eq!((q.rule.nactive[0], q.len_packets()), (2, 3));
    }

    #[test]
    fn between_the_thresholds_only_robust_flows_are_dropped_at_random() {
        // max_p 1 and avg held near 17.5 (w_q tiny): p_b = 0.75, so with count >= 1 RED's
        // p_a = p_b / (1 - count p_b) is 1 and the outcome is exact.
        let mut q: Fred<u64> = Fred::classic(params(10.0, 20.0, 1e-12, 1.0), 2.0, None, 3);
        (0..8).for_each(|s| stuff(&mut q, pkt(s, 1, 0))); // flow 1: 8 queued, robust (>= avgcq 8.75 soon)
        stuff(&mut q, pkt(8, 2, 0)); // flow 2: 1 queued, fragile
        q.rule.levels[0].avg = 17.5;
        // avgcq = 17.5 / 2 = 8.75: flow 2 (1, 2, 3 queued) is below max(min_q, avgcq) each
        // time and never dropped, though its arrivals advance count from -1 to 2; flow 1 at 8
        // is below avgcq too. Flow 1 reaches 9 >= 8.75 after one more accepted packet.
        assert_eq!(offer(&mut q, 0, &[(20, 2, 0), (21, 2, 0), (22, 2, 0), (23, 1, 0)]), Vec::<u64>::new());
        assert_eq!(q.rule.levels[0].count, 3);
        // Now flow 1 is robust: count 4 makes p_a = 1. Dropped, count back to 0; a random drop
        // is not a strike.
        assert_eq!(offer(&mut q, 0, &[(24, 1, 0)]), vec![24]);
        assert_eq!((q.rule.levels[0].count, strikes(&q, 1)), (0, vec![0]));
        // Flow 2 is still fragile (4 queued < 8.75): passes even right after a drop.
        assert_eq!(offer(&mut q, 0, &[(25, 2, 0)]), Vec::<u64>::new());
    }

    #[test]
    fn above_max_th_everything_is_dropped_but_only_big_flows_are_struck() {
        let mut q: Fred<u64> = Fred::classic(params(2.0, 4.0, 1e-12, 0.1), 2.0, None, 1);
        (0..3).for_each(|s| stuff(&mut q, pkt(s, 1, 0))); // flow 1: 3 queued >= max_q = 2
        stuff(&mut q, pkt(3, 2, 0)); // flow 2: 1 queued, below max_q and 2 avgcq
        q.rule.levels[0].avg = 5.0;
        assert_eq!(offer(&mut q, 0, &[(10, 1, 0), (11, 2, 0), (12, 3, 0)]), vec![10, 11, 12]);
        assert_eq!((strikes(&q, 1), strikes(&q, 2), strikes(&q, 3)), (vec![1], vec![0], vec![]));
    }

    #[test]
    fn average_is_computed_on_arrival_only_with_the_idle_decay() {
        let mut q: Fred<u64> = Fred::classic(params(50.0, 80.0, 0.5, 0.1), 2.0, None, 1);
        assert!(offer(&mut q, 0, &[(0, 1, 0), (1, 2, 0), (2, 3, 0)]).is_empty()); // q = 0, 1, 2
        assert_eq!(q.averages(), vec![0.5 * 0.5 + 0.5 * 2.0]);
        for _ in 0..3 {
            q.dequeue(2_000_000);
        }
        assert_eq!(q.averages(), vec![1.25]); // departures leave it alone
                                              // Idle from 2 ms to 6 ms: 4 typical transmission times, avg *= 0.5^4.
        assert!(offer(&mut q, 6_000_000, &[(3, 1, 0)]).is_empty());
        assert_eq!(q.averages(), vec![1.25 / 16.0]);
        assert!(q.rule.flows.len() == 1 && q.rule.nactive == vec![1]);
    }

    #[test]
    fn frio_in_measures_count_in_packets_out_measures_all() {
        let p = params(40.0, 70.0, 1.0, 0.1);
        let mut q: Fred<u64> = Fred::frio([p, params(3.0, 6.0, 1.0, 0.1)], 2.0, None, 1);
        let drops = offer(&mut q, 0, &[(0, 1, DSCP_AF11), (1, 1, 0), (2, 1, 0), (3, 2, DSCP_AF11)]);
        assert!(drops.is_empty());
        assert_eq!(q.rule.flows[&1].qlen, vec![1, 3]);
        assert_eq!(q.rule.flows[&2].qlen, vec![1, 1]);
        assert_eq!(q.rule.nactive, vec![2, 2]);
        // w_q = 1: averages become the counts at the last arrival (IN: 1 IN packet; OUT: 3).
        assert_eq!(q.averages(), vec![1.0, 3.0]);
        // Flow 1 holds 3 packets in the OUT count, = OUT's max_q (min_th 3): an OUT arrival is
        // dropped and struck; an IN arrival of the same flow (1 IN packet < 40) is kept.
        assert_eq!(offer(&mut q, 0, &[(4, 1, 0), (5, 1, DSCP_AF11)]), vec![4]);
        assert_eq!(strikes(&q, 1), vec![0, 1]);
        // Departures: the IN packet 0 leaves both counts, packet 1 only the OUT one.
        q.dequeue(0);
        q.dequeue(0);
        assert_eq!(q.rule.flows[&1].qlen, vec![1, 2]);
    }

    #[test]
    fn frio_shares_the_instantaneous_queue_where_fred_shares_the_average() {
        // The same OUT-only trace through FRED and through FRIO with FRED's parameters for
        // OUT. Flow 1 earns two strikes, then, holding 2 packets, arrives again when the queue
        // is 8 packets over 3 active flows.
        let p = params(4.0, 8.0, 0.001, 0.1);
        let run = |mut q: Fred<u64>| {
            let mut arrivals: Vec<(u64, u64, u8)> = (0..6).map(|s| (s, 1, 0)).collect();
            arrivals.extend((6..9).map(|s| (s, 2, 0)));
            arrivals.extend((9..12).map(|s| (s, 3, 0)));
            assert_eq!(offer(&mut q, 0, &arrivals), vec![4, 5]);
            q.dequeue(0);
            q.dequeue(0);
            offer(&mut q, 0, &[(12, 1, 0)])
        };
        // FRED: avgcq = avg / 3, about 0: flow 1 (2 >= avgcq, 2 strikes) is dropped.
        assert_eq!(run(Fred::classic(p, 2.0, None, 1)), vec![12]);
        // FRIO: avgcq = 8 / 3: 2 packets are within the share, the packet is kept.
        assert_eq!(run(Fred::frio([params(40.0, 70.0, 0.001, 0.1), p], 2.0, None, 1)), Vec::<u64>::new());
    }

    #[test]
    fn frio_takes_table_1_in_bytes() {
        // Table 1 (good), as the config gives it; w_q = 1 so the averages are the queued bytes.
        let c: FrioConfig = serde_json::from_str(&crate::testkit::params(
            "frio",
            r#"{"w_q": 1.0, "levels": [
                {"min_th": {"bytes": 51200}, "max_th": {"bytes": 501760}, "max_p": 0.005},
                {"min_th": {"bytes": 10240}, "max_th": {"bytes": 204800}, "max_p": 0.25}]}"#,
        ))
        .unwrap();
        let (params, unit) = level_params("frio", &c.levels, 2, c.w_q, c.mean_pkt_bytes, 10_000_000).unwrap();
        assert_eq!(unit, Unit::Bytes);
        let mut q: Fred<u64> =
            Fred::frio([params[0], params[1]], min_q(c.min_q, unit).unwrap(), None, 1).measured_in(Unit::Bytes, 1000);
        // 30 IN packets and 180 OUT packets of 1000 bytes, one per flow (no per-flow limit bites).
        (0..30).for_each(|f| stuff(&mut q, pkt(f, f, DSCP_AF11)));
        (30..210).for_each(|f| stuff(&mut q, pkt(f, f, 0)));
        // A new flow's OUT packet: 210 KB queued >= 200 KB, dropped; its IN packet: 30 KB < 50 KB.
        assert_eq!(offer(&mut q, 0, &[(500, 500, 0), (501, 501, DSCP_AF11)]), vec![500]);
        assert_eq!(q.averages(), vec![30_000.0, 210_000.0]); // the dropped OUT packet is not queued
    }

    #[test]
    fn in_byte_mode_a_flow_is_held_to_its_bytes() {
        // max_q = min_th = 3000 bytes (the average stays near 0): a flow of small packets may
        // queue 30 of 100 bytes, a flow of large ones 2 of 1500. In packets (min_th 3) the
        // small flow is cut at 3 packets.
        let run = |q: &mut Fred<u64>| {
            let mut d = Vec::new();
            for s in 0..40 {
                let small = Queued { handle: s, info: PacketInfo::new(100, 0, 1), arrival: 0, seq: s };
                q.enqueue(small, 0, &mut d);
            }
            for s in 100..104 {
                let large = Queued { handle: s, info: PacketInfo::new(1500, 0, 2), arrival: 0, seq: s };
                q.enqueue(large, 0, &mut d);
            }
            let small = d.iter().filter(|x| x.pkt.seq < 100).count();
            (40 - small, 4 - (d.len() - small))
        };
        let mut bytes: Fred<u64> =
            Fred::classic(params(3000.0, 9000.0, 1e-6, 0.1), 3000.0, None, 1).measured_in(Unit::Bytes, 1000);
        assert_eq!(run(&mut bytes), (30, 2));
        assert_eq!(bytes.rule.flows[&1].qlen, vec![3000]);
        assert_eq!(bytes.rule.flows[&2].qlen, vec![3000]);
        let mut packets: Fred<u64> = Fred::classic(params(3.0, 9.0, 1e-6, 0.1), 2.0, None, 1);
        assert_eq!(run(&mut packets), (3, 3));
        // Departures give the bytes back, and the flow's state goes with its last one.
        while bytes.dequeue(0).is_some() {}
        assert!(bytes.rule.flows.is_empty() && bytes.rule.nactive == vec![0]);
    }

    #[test]
    fn the_buffer_limit_still_applies_without_a_strike() {
        let mut q: Fred<u64> = Fred::classic(params(4.0, 8.0, 0.001, 0.1), 2.0, Some(Buffer::Packets(2)), 1);
        assert_eq!(offer(&mut q, 0, &[(0, 1, 0), (1, 2, 0), (2, 3, 0)]), vec![2]);
        assert_eq!(strikes(&q, 3), Vec::<u32>::new());
        assert_eq!(q.drain().len(), 2);
        assert!(q.rule.flows.is_empty() && q.rule.nactive == vec![0]);
    }
}
