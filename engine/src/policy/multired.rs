//! RED with drop precedences: RIO (Clark and Fang; TCP-friendly marking paper, section 5) and
//! the 3-level RED of the service-differentiation paper (section 4.2, Fig. 5).
//!
//! Level 0 has the highest precedence (AF11: RIO's IN, HIGH); the last level the lowest (RIO's
//! OUT, LOW). Each level has its own thresholds, max_p and drop-spacing count, and an average
//! queue that counts the queued packets at its level or higher: RIO's IN average counts IN
//! packets, its OUT average counts all. An arrival updates the averages whose counted set
//! contains it (an IN arrival both, an OUT arrival only the OUT average, as in RIO), then is
//! judged by its own level's average with RED's rule (see red.rs). The buffer limit still applies.
//! With thresholds in bytes every average counts bytes instead of packets (byte mode).

use super::fifo::{Admission, Buffered, Fifo, FifoPolicy};
use super::red::{early_drop, next_average, red_params, RedParams};
use super::{Dropped, LinkEnv, PolicyParams, QueuePolicy, Queued};
use crate::packet::Class;
use crate::params::{one_unit, Buffer, Threshold, Unit};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::Deserialize;

/// One drop-precedence level of RIO, 3-level RED or FRIO.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LevelConfig {
    pub min_th: Threshold,
    pub max_th: Threshold,
    pub max_p: f64,
}

/// `{"kind": "rio" | "red3", "w_q": w, "levels": [...], "mean_pkt_bytes": 1000}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LevelsConfig {
    pub w_q: f64,
    /// Highest precedence first: 2 for RIO, 3 for 3-level RED.
    pub levels: Vec<LevelConfig>,
    pub mean_pkt_bytes: u32,
}

/// RIO: two levels, IN (AF11) then OUT.
#[derive(Debug, Clone, Deserialize)]
#[serde(transparent)]
pub struct RioConfig(pub LevelsConfig);

/// 3-level RED: AF11, AF12, then AF13 and unmarked.
#[derive(Debug, Clone, Deserialize)]
#[serde(transparent)]
pub struct Red3Config(pub LevelsConfig);

/// Per-level RED parameters (shared `w_q`), checked: the count `want`, one unit for every
/// level's thresholds, each level's ranges. Shared with FRIO.
pub fn level_params(
    kind: &str,
    levels: &[LevelConfig],
    want: usize,
    w_q: f64,
    mean_pkt_bytes: u32,
    rate_bps: u64,
) -> Result<(Vec<RedParams>, Unit), String> {
    if levels.len() != want {
        return Err(format!("{kind} needs levels: {want} of {{min_th, max_th, max_p}}, highest precedence first"));
    }
    let named: Vec<(String, Threshold)> = levels
        .iter()
        .enumerate()
        .flat_map(|(i, l)| [(format!("levels[{i}].min_th"), l.min_th), (format!("levels[{i}].max_th"), l.max_th)])
        .collect();
    let unit = one_unit(&named)?;
    let mut params = Vec::new();
    for (i, l) in levels.iter().enumerate() {
        let (p, _) = red_params(&[("min_th", l.min_th), ("max_th", l.max_th)], w_q, l.max_p, mean_pkt_bytes, rate_bps)
            .map_err(|e| format!("levels[{i}]: {e}"))?;
        params.push(p);
    }
    Ok((params, unit))
}

impl LevelsConfig {
    fn multired<H: 'static>(
        &self,
        kind: &str,
        want: usize,
        classify: fn(Class) -> usize,
        env: &LinkEnv,
    ) -> Result<Box<dyn QueuePolicy<H>>, String> {
        let (params, unit) = level_params(kind, &self.levels, want, self.w_q, self.mean_pkt_bytes, env.rate_bps)?;
        Ok(Box::new(MultiRed::<H>::new(params, classify, unit, env.buffer, env.seed)))
    }
}

impl PolicyParams for RioConfig {
    fn build<H: 'static>(&self, env: &LinkEnv) -> Result<Box<dyn QueuePolicy<H>>, String> {
        self.0.multired("rio", 2, rio_level, env)
    }
}

impl PolicyParams for Red3Config {
    fn build<H: 'static>(&self, env: &LinkEnv) -> Result<Box<dyn QueuePolicy<H>>, String> {
        self.0.multired("red3", 3, three_level, env)
    }
}

/// One precedence level's RED state (shared with FRIO, fred.rs).
pub(super) struct Level {
    pub params: RedParams,
    pub avg: f64,
    pub count: i64,
}

impl Level {
    pub fn new(params: RedParams) -> Level {
        Level { params, avg: 0.0, count: -1 }
    }
}

/// Update, for an arrival at `level`, the averages whose counted set contains it: those of
/// `level` and lower precedences, each over the queued packets (or bytes) at its level or higher.
pub(super) fn update_levels<H>(
    levels: &mut [Level],
    level: usize,
    fifo: &Fifo<H>,
    classify: fn(Class) -> usize,
    unit: Unit,
    idle: Option<u64>,
    now: u64,
) {
    for (l, lv) in levels.iter_mut().enumerate().skip(level) {
        let q = fifo.size_where(unit, |c| classify(c) <= l) as f64;
        lv.avg = next_average(&lv.params, lv.avg, q, idle, now);
    }
}

/// RIO's and 3-level RED's admission rule.
pub struct MultiRedRule {
    levels: Vec<Level>,
    classify: fn(Class) -> usize,
    unit: Unit,
    rng: ChaCha8Rng,
}

pub type MultiRed<H> = FifoPolicy<H, MultiRedRule>;

/// RIO: AF11 is IN (level 0), everything else OUT (level 1).
pub fn rio_level(class: Class) -> usize {
    if class == Class::High {
        0
    } else {
        1
    }
}

/// 3-level RED: AF11 HIGH, AF12 MED, AF13 and unmarked LOW.
pub fn three_level(class: Class) -> usize {
    match class {
        Class::High => 0,
        Class::Low => 1,
        Class::Lowest | Class::Other => 2,
    }
}

impl<H> MultiRed<H> {
    pub fn new(
        params: Vec<RedParams>,
        classify: fn(Class) -> usize,
        unit: Unit,
        limit: Option<Buffer>,
        seed: u64,
    ) -> MultiRed<H> {
        let rule = MultiRedRule {
            levels: params.into_iter().map(Level::new).collect(),
            classify,
            unit,
            rng: ChaCha8Rng::seed_from_u64(seed),
        };
        FifoPolicy::with_rule(limit, rule)
    }

    pub fn averages(&self) -> Vec<f64> {
        self.rule.levels.iter().map(|l| l.avg).collect()
    }
}

impl MultiRedRule {
    fn early_drop(&mut self, level: usize) -> bool {
        let lv = &mut self.levels[level];
        early_drop(&lv.params, lv.avg, &mut lv.count, &mut self.rng)
    }
}

impl<H> Admission<H> for MultiRedRule {
    fn admit(&mut self, pkt: Queued<H>, q: &mut Buffered<H>, now: u64, dropped: &mut Vec<Dropped<H>>) {
        let level = (self.classify)(pkt.info.class).min(self.levels.len() - 1);
        update_levels(&mut self.levels, level, &q.fifo, self.classify, self.unit, q.idle_since(), now);
        if !self.early_drop(level) && q.fits(pkt.info.len) {
            q.fifo.push(pkt);
        } else {
            dropped.push(Dropped::refused(pkt));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{PacketInfo, DSCP_AF11, DSCP_AF12, DSCP_AF13};

    fn p(min_th: f64, max_th: f64) -> RedParams {
        RedParams { min_th, max_th, w_q: 1.0, max_p: 0.1, typical_tx_ns: 1e6 }
    }

    fn pkt(seq: u64, dscp: u8) -> Queued<u64> {
        Queued { handle: seq, info: PacketInfo::new(500, dscp, 0), arrival: 0, seq }
    }

    #[test]
    fn rio_in_average_counts_in_packets_out_average_counts_all() {
        let mut q: MultiRed<u64> = MultiRed::new(vec![p(40.0, 70.0), p(10.0, 20.0)], rio_level, Unit::Packets, None, 1);
        for i in 0..4 {
            q.q.fifo.push(pkt(i, DSCP_AF11));
        }
        for i in 4..9 {
            q.q.fifo.push(pkt(i, DSCP_AF12));
        }
        q.q.set_busy();
        let mut d = Vec::new();
        q.enqueue(pkt(20, DSCP_AF11), 0, &mut d); // w_q = 1: averages become the counts
        assert_eq!(q.averages(), vec![4.0, 9.0]);
        q.enqueue(pkt(21, DSCP_AF12), 0, &mut d); // an OUT arrival leaves the IN average alone
        assert_eq!(q.averages(), vec![4.0, 10.0]);
        assert!(d.is_empty());
    }

    #[test]
    fn out_packets_are_dropped_where_in_packets_still_pass() {
        let mut q: MultiRed<u64> = MultiRed::new(vec![p(40.0, 70.0), p(5.0, 10.0)], rio_level, Unit::Packets, None, 1);
        for i in 0..12 {
            q.q.fifo.push(pkt(i, DSCP_AF11));
        }
        q.q.set_busy();
        let mut d = Vec::new();
        q.enqueue(pkt(30, DSCP_AF12), 0, &mut d); // OUT average 12 >= 10: dropped
        q.enqueue(pkt(31, DSCP_AF11), 0, &mut d); // IN average 12 < 40: kept
        assert_eq!(d.iter().map(|x| x.pkt.seq).collect::<Vec<_>>(), vec![30]);
        assert_eq!(q.len_packets(), 13);
    }

    /// The TCP-friendly marking paper's Table 1 as the config gives it (KB = 1024 bytes), IN
    /// first. `out_max` is 200 KB (good) or 30 KB (mistuned).
    fn table_1(w_q: f64, out_max: u64) -> MultiRed<u64> {
        let levels: Vec<LevelConfig> = serde_json::from_str(&format!(
            r#"[{{"min_th": {{"bytes": 51200}}, "max_th": {{"bytes": 501760}}, "max_p": 0.005}},
               {{"min_th": {{"bytes": 10240}}, "max_th": {{"bytes": {}}}, "max_p": 0.25}}]"#,
            out_max * 1024
        ))
        .unwrap();
        let (params, unit) = level_params("rio", &levels, 2, w_q, 1000, 10_000_000).unwrap();
        assert_eq!(unit, Unit::Bytes);
        MultiRed::new(params, rio_level, unit, Some(Buffer::Bytes(512_000)), 1)
    }

    fn sized(seq: u64, dscp: u8, len: u32) -> Queued<u64> {
        Queued { handle: seq, info: PacketInfo::new(len, dscp, 0), arrival: 0, seq }
    }

    #[test]
    fn table_1_applies_as_printed_in_bytes_with_the_idle_decay() {
        // 60 IN and 150 OUT packets of 1000 bytes queued; w_q = 1: the averages are the bytes.
        let mut q = table_1(1.0, 200);
        (0..60).for_each(|i| q.q.fifo.push(sized(i, DSCP_AF11, 1000)));
        (60..210).for_each(|i| q.q.fifo.push(sized(i, DSCP_AF12, 1000)));
        q.q.set_busy();
        let mut d = Vec::new();
        q.enqueue(sized(300, DSCP_AF11, 1000), 0, &mut d);
        assert_eq!(q.averages(), vec![60_000.0, 210_000.0]);
        // OUT: 211 KB queued >= 200 KB: dropped. IN: 61 KB, just above 50 KB: kept (p ~ 1e-4).
        q.enqueue(sized(301, DSCP_AF12, 1000), 0, &mut d);
        q.enqueue(sized(302, DSCP_AF11, 1000), 0, &mut d);
        assert_eq!(d.iter().map(|x| x.pkt.seq).collect::<Vec<_>>(), vec![301]);
        // In bytes, not packets: the same bytes in 40-byte packets weigh the same.
        let mut small = table_1(1.0, 200);
        (0..5250).for_each(|i| small.q.fifo.push(sized(i, DSCP_AF12, 40)));
        small.q.set_busy();
        small.enqueue(sized(9999, DSCP_AF12, 40), 0, &mut d);
        assert_eq!(small.averages()[1], 210_000.0);
        // Mistuned (OUT 10/30 KB): 40 OUT packets queued are enough to drop every OUT arrival.
        let mut mistuned = table_1(1.0, 30);
        (0..40).for_each(|i| mistuned.q.fifo.push(sized(i, DSCP_AF12, 1000)));
        mistuned.q.set_busy();
        let mut d = Vec::new();
        mistuned.enqueue(sized(400, DSCP_AF12, 1000), 0, &mut d);
        mistuned.enqueue(sized(401, DSCP_AF11, 1000), 0, &mut d);
        assert_eq!(d.iter().map(|x| x.pkt.seq).collect::<Vec<_>>(), vec![400]);
        // RED's idle decay, in bytes: empty since 0, an IN arrival 1 s later at 10 Mbit/s finds
        // both averages decayed by (1 - w_q)^m for the m = 1250 packets of 1000 bytes the link
        // could have sent.
        let mut idle = table_1(0.002, 200);
        idle.rule.levels[0].avg = 100_000.0;
        idle.rule.levels[1].avg = 200_000.0;
        idle.enqueue(sized(0, DSCP_AF11, 1000), 1_000_000_000, &mut Vec::new());
        let decay = 0.998f64.powf(1250.0);
        let got = idle.averages();
        assert!((got[0] - 100_000.0 * decay).abs() < 1e-6 && (got[1] - 200_000.0 * decay).abs() < 1e-6, "{got:?}");
    }

    #[test]
    fn three_levels_count_their_level_or_higher() {
        let mut q: MultiRed<u64> =
            MultiRed::new(vec![p(50.0, 60.0), p(50.0, 60.0), p(50.0, 60.0)], three_level, Unit::Packets, None, 1);
        for (i, d) in [DSCP_AF11, DSCP_AF12, DSCP_AF12, DSCP_AF13, 0].iter().enumerate() {
            q.q.fifo.push(pkt(i as u64, *d));
        }
        q.q.set_busy();
        let mut d = Vec::new();
        q.enqueue(pkt(9, DSCP_AF11), 0, &mut d);
        assert_eq!(q.averages(), vec![1.0, 3.0, 5.0]);
    }

    #[test]
    fn three_level_red_never_drops_high_before_med_before_low_at_equal_averages() {
        // Thresholds staggered as in the service-differentiation paper's Fig. 5 (HIGH's the
        // highest), same w_q and max_p for the three levels (section 4.2).
        let levels = || {
            vec![
                RedParams { min_th: 50.0, max_th: 90.0, w_q: 0.5, max_p: 0.1, typical_tx_ns: 1e6 },
                RedParams { min_th: 30.0, max_th: 70.0, w_q: 0.5, max_p: 0.1, typical_tx_ns: 1e6 },
                RedParams { min_th: 10.0, max_th: 50.0, w_q: 0.5, max_p: 0.1, typical_tx_ns: 1e6 },
            ]
        };
        let mut drops = [0u32; 3];
        for v in (0..=100).step_by(5) {
            for seed in 0..200 {
                // Same seed for the three: one policy per class, each holding v HIGH packets,
                // which every level counts, with every average at v.
                let dropped: Vec<bool> = [DSCP_AF11, DSCP_AF12, DSCP_AF13]
                    .iter()
                    .map(|&dscp| {
                        let mut q: MultiRed<u64> = MultiRed::new(levels(), three_level, Unit::Packets, None, seed);
                        (0..v).for_each(|i| q.q.fifo.push(pkt(i, DSCP_AF11)));
                        q.rule.levels.iter_mut().for_each(|l| l.avg = v as f64);
                        q.q.set_busy();
                        let mut d = Vec::new();
                        q.enqueue(pkt(1000, dscp), 0, &mut d);
                        assert!(q.averages().iter().all(|a| *a == v as f64));
                        !d.is_empty()
                    })
                    .collect();
                assert!(dropped[2] || !dropped[1], "MED dropped before LOW at avg {v}, seed {seed}");
                assert!(dropped[1] || !dropped[0], "HIGH dropped before MED at avg {v}, seed {seed}");
                (0..3).for_each(|i| drops[i] += u32::from(dropped[i]));
            }
        }
        // And the order is strict over the range: each level sees fewer drops than the next.
        assert!(drops[0] < drops[1] && drops[1] < drops[2], "{drops:?}");
    }
}
