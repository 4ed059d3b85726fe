//! The source scheduler/shaper of Nouredine and Tobagi, "Improving the performance of interactive
//! TCP applications using service differentiation", Computer Networks 40 (2002), section 6.2,
//! Fig. 11: a user's per-connection queues and the scheduler that serves them onto the user's
//! access link, keeping the marked aggregate within the user's HIGH and MED token-bucket
//! profiles. It sits on the host->router link, whose transmitter is the user's interface.
//!
//! - One FIFO per connection (the packet's 5-tuple hash): "Having one queue per connection
//!   prevents sending packets from one connection out of order".
//! - Connections belong to application classes by port (a source or destination port in one of
//!   the class's ranges; no match: the last class), served in class order ("in decreasing order
//!   of scheduling priority").
//! - Marking levels by DSCP as in 3-level RED (multired.rs): AF11 HIGH, AF12 MED, the rest LOW.
//! - Within a class: HIGH heads first, then MED, then LOW; round robin among the class's
//!   connections whose head is at that level (equal weights, section 6.3: "a simple round robin
//!   scheduler would have been adequate"). A HIGH or MED head needs the tokens of its level's
//!   bucket (one per link, that is per user: the SLA of section 4.3); LOW only needs the link.
//! - "If any HIGH priority packet can be sent from a connection at Class 1, given the state of
//!   the shaper, it is dispatched": within a class and level, the first connection in turn order
//!   whose head the tokens cover goes; one whose head lacks them keeps its turn.
//! - Blocking: "If a packet is blocked waiting for a token of a certain marking priority at one
//!   class, no packet can be sent with the same marking priority at lower classes" (lower
//!   classes only: the same class's heads are "any" of the rule above).
//! - Downgrade (footnote 7): a head "queued for a time longer than" `downgrade_after` (200 ms)
//!   since it joined its connection's queue is remarked MED (AF12) if it was HIGH; another
//!   `downgrade_after` at MED and it is remarked LOW (AF13): a HIGH packet is MED from arrival +
//!   200 ms and LOW from arrival + 400 ms, an AF12 packet LOW from arrival + 200 ms. Only heads
//!   are remarked; a packet that becomes the head past its deadlines takes them at once. It
//!   leaves with that DSCP.
//! - The link's buffer bounds everything held (tail drop on arrival).
//!
//! Not work-conserving: when every head waits for tokens the link idles; [`QueuePolicy::wake_at`]
//! gives the exact virtual time a token or a downgrade falls due, and the link starts the next
//! transmission then. Downgrades are applied in deadline order at their own virtual times, however
//! late the link asks, so the round-robin order is the one a timer would give.

use super::multired::three_level;
use super::{Dropped, LinkEnv, PolicyParams, QueuePolicy, Queued};
use crate::edge::bucket::{check_bucket, cost, BucketSpec, Tokens};
use crate::packet::{DSCP_AF12, DSCP_AF13};
use crate::params::Buffer;
use serde::Deserialize;
use std::collections::{HashMap, VecDeque};

/// One token bucket of the profile: `{"rate_bps": r, "bucket_bytes": b}`.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BucketConfig {
    pub rate_bps: u64,
    pub bucket_bytes: u64,
}

/// `{"kind": "source_scheduler", "high": BUCKET, "med": BUCKET, "classes": [[[lo, hi], ...], ...],
/// "downgrade_after_us": 200000}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceSchedulerConfig {
    pub high: BucketConfig,
    pub med: BucketConfig,
    /// Each class's port ranges, highest scheduling priority first.
    pub classes: Vec<Vec<[u32; 2]>>,
    /// A head queued this long at HIGH is remarked MED, as long again at MED LOW (footnote 7's
    /// 200 ms is the schema's default: spec/policy.py).
    pub downgrade_after_us: u64,
}

/// Longer than any run: a bound that keeps deadlines far from overflowing the ns clock.
const MAX_DOWNGRADE_AFTER_US: u64 = 3_600_000_000;

impl SourceSchedulerConfig {
    /// The port ranges of each class, checked.
    fn port_ranges(&self) -> Result<Vec<Vec<(u16, u16)>>, String> {
        if self.classes.is_empty() {
            return Err("classes: need at least one class (a list of port ranges [lo, hi])".into());
        }
        let mut classes = Vec::new();
        for (i, ranges) in self.classes.iter().enumerate() {
            if ranges.is_empty() {
                return Err(format!("classes[{i}]: a class needs at least one port range"));
            }
            let mut checked = Vec::new();
            for (j, &[lo, hi]) in ranges.iter().enumerate() {
                if lo > hi || hi > 65535 {
                    return Err(format!("classes[{i}][{j}]: need lo <= hi <= 65535 (got [{lo}, {hi}])"));
                }
                checked.push((lo as u16, hi as u16));
            }
            classes.push(checked);
        }
        Ok(classes)
    }
}

impl PolicyParams for SourceSchedulerConfig {
    fn build<H: 'static>(&self, env: &LinkEnv) -> Result<Box<dyn QueuePolicy<H>>, String> {
        Ok(Box::new(SourceScheduler::<H>::new(self, env)?))
    }

    /// It remarks the heads it downgrades.
    fn may_rewrite(&self) -> bool {
        true
    }

    /// It holds packets until their bucket has tokens.
    fn idles_while_holding(&self) -> bool {
        true
    }
}

/// Marking levels, in the order they are served within a class.
const HIGH: usize = 0;
const MED: usize = 1;
const LOW: usize = 2;
const LEVELS: usize = 3;

/// The DSCP a head is remarked with when it is downgraded from `level` (HIGH or MED).
const DOWNGRADE_DSCP: [u8; 2] = [DSCP_AF12, DSCP_AF13];

/// One connection's queue.
struct Conn<H> {
    queue: VecDeque<Queued<H>>,
    /// When each queued packet joined the queue (ns): the downgrade clock, "queued for a time".
    queued_at: VecDeque<u64>,
    /// Remarks the head has had (0 to 2).
    remarks: u64,
}

impl<H> Conn<H> {
    fn head_level(&self) -> usize {
        three_level(self.queue.front().expect("a connection in a ring has a head").info.class)
    }

    /// When the head, at HIGH or MED, is due for its next remark.
    fn deadline(&self, downgrade_ns: u64) -> u64 {
        self.queued_at[0] + (self.remarks + 1) * downgrade_ns
    }
}

/// HIGH's or MED's bucket.
struct Bucket {
    spec: BucketSpec,
    tokens: Tokens,
}

/// What the scheduler did, for the stats (`policy_counters`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SourceCounters {
    pub downgraded_high_to_med: u64,
    pub downgraded_med_to_low: u64,
    /// Packets sent at each level (the level they left with).
    pub sent: [u64; LEVELS],
}

pub struct SourceScheduler<H> {
    classes: Vec<Vec<(u16, u16)>>,
    buckets: [Bucket; 2],
    downgrade_ns: u64,
    limit: Option<Buffer>,
    /// Connections holding packets, by flow; a connection leaves when its queue empties.
    conns: HashMap<u64, Conn<H>>,
    /// Per class and level: the connections whose head is at that level, in round-robin order.
    rings: Vec<[VecDeque<u64>; LEVELS]>,
    packets: usize,
    bytes: usize,
    pub counters: SourceCounters,
}

impl<H> SourceScheduler<H> {
    pub fn new(config: &SourceSchedulerConfig, env: &LinkEnv) -> Result<SourceScheduler<H>, String> {
        let bucket = |name: &str, b: BucketConfig| {
            check_bucket(b.rate_bps, b.bucket_bytes).map_err(|e| format!("{name}.{e}"))?;
            let spec = BucketSpec::new(b.rate_bps, b.bucket_bytes);
            Ok::<Bucket, String>(Bucket { spec, tokens: spec.full(0) })
        };
        let buckets = [bucket("high", config.high)?, bucket("med", config.med)?];
        let classes = config.port_ranges()?;
        if !(1..=MAX_DOWNGRADE_AFTER_US).contains(&config.downgrade_after_us) {
            return Err(format!(
                "downgrade_after_us: must be 1 to {MAX_DOWNGRADE_AFTER_US} (an hour), got {}",
                config.downgrade_after_us
            ));
        }
        if env.rate_bps == 0 {
            return Err("needs the link's rate_bps above 0: source_scheduler is the scheduler of the link's \
                        transmitter (the user's access rate)"
                .into());
        }
        Ok(SourceScheduler {
            rings: classes.iter().map(|_| Default::default()).collect(),
            classes,
            buckets,
            downgrade_ns: config.downgrade_after_us * 1000,
            limit: env.buffer,
            conns: HashMap::new(),
            packets: 0,
            bytes: 0,
            counters: SourceCounters::default(),
        })
    }

    /// The first class with a port range holding the packet's source or destination port; the
    /// last class if none does (or the packet has no ports).
    fn class_of(&self, ports: Option<(u16, u16)>) -> usize {
        let within = |port: u16| move |&(lo, hi): &(u16, u16)| lo <= port && port <= hi;
        ports
            .and_then(|(s, d)| self.classes.iter().position(|c| c.iter().any(within(s)) || c.iter().any(within(d))))
            .unwrap_or(self.classes.len() - 1)
    }

    fn fits(&self, len: usize) -> bool {
        match self.limit {
            None => true,
            Some(Buffer::Packets(n)) => (self.packets as u64) < n,
            Some(Buffer::Bytes(n)) => (self.bytes + len) as u64 <= n,
        }
    }

    /// The earliest downgrade due at or before `now`: (deadline, class, level, flow). Ties go to
    /// the first in class, level and ring order, so the order never depends on hashing.
    fn next_downgrade(&self, now: u64) -> Option<(u64, usize, usize, u64)> {
        let mut first: Option<(u64, usize, usize, u64)> = None;
        for (c, rings) in self.rings.iter().enumerate() {
            for (level, ring) in rings.iter().enumerate().take(LOW) {
                for &flow in ring {
                    let due = self.conns[&flow].deadline(self.downgrade_ns);
                    if due <= now && first.is_none_or(|f| due < f.0) {
                        first = Some((due, c, level, flow));
                    }
                }
            }
        }
        first
    }

    /// Apply every downgrade due by `now`, each at its own deadline, in deadline order: the head
    /// is remarked one level down and its connection joins the back of that level's ring.
    fn downgrade_until(&mut self, now: u64) {
        while let Some((due, c, level, flow)) = self.next_downgrade(now) {
            let ring = &mut self.rings[c][level];
            let at = ring.iter().position(|&f| f == flow).expect("the connection is in its ring");
            ring.remove(at);
            debug_assert!(due <= now);
            self.remark(flow);
            let level = self.conns[&flow].head_level();
            self.rings[c][level].push_back(flow);
        }
    }

    /// Remark the head of `flow` one level down (HIGH or MED to the next).
    fn remark(&mut self, flow: u64) {
        let conn = self.conns.get_mut(&flow).expect("a ring holds live connections");
        let level = conn.head_level();
        conn.queue.front_mut().expect("a connection in a ring has a head").info.set_dscp(DOWNGRADE_DSCP[level]);
        conn.remarks += 1;
        if level == HIGH {
            self.counters.downgraded_high_to_med += 1;
        } else {
            self.counters.downgraded_med_to_low += 1;
        }
    }

    /// `flow`'s next packet is its head from `now` on: remarked for the time it has already been
    /// queued, it joins the back of its level's ring.
    fn seat_head(&mut self, c: usize, flow: u64, now: u64) {
        let conn = self.conns.get_mut(&flow).expect("a ring holds live connections");
        conn.remarks = 0;
        while self.conns[&flow].head_level() != LOW && self.conns[&flow].deadline(self.downgrade_ns) <= now {
            self.remark(flow);
        }
        let level = self.conns[&flow].head_level();
        self.rings[c][level].push_back(flow);
    }

    /// The position in the ring of (class `c`, `level`) of the first connection whose head may go
    /// now, having taken its tokens (HIGH and MED); LOW needs none.
    fn take_tokens(&mut self, c: usize, level: usize) -> Option<usize> {
        if level == LOW {
            return Some(0);
        }
        let b = &mut self.buckets[level];
        let conns = &self.conns;
        let k = self.rings[c][level]
            .iter()
            .position(|flow| b.tokens.credit >= b.spec.need(conns[flow].queue[0].info.len))?;
        // A packet larger than the bucket goes on a full bucket and leaves it in debt (as the
        // edge shaper does, edge/shape.rs).
        let len = self.conns[&self.rings[c][level][k]].queue[0].info.len;
        b.tokens.credit -= cost(u64::from(len));
        Some(k)
    }

    /// Send the head of the connection at position `k` of the ring of (class `c`, `level`); the
    /// connection goes to the back of the ring of its next head's level, or away if it is empty.
    fn send(&mut self, c: usize, level: usize, k: usize, now: u64) -> Queued<H> {
        let flow = self.rings[c][level].remove(k).expect("a turn means a connection");
        let conn = self.conns.get_mut(&flow).expect("a ring holds live connections");
        let pkt = conn.queue.pop_front().expect("a connection in a ring has a head");
        conn.queued_at.pop_front();
        if conn.queue.is_empty() {
            self.conns.remove(&flow);
        } else {
            self.seat_head(c, flow, now);
        }
        self.packets -= 1;
        self.bytes -= pkt.info.len as usize;
        self.counters.sent[level] += 1;
        pkt
    }

    /// The heads at `level` of the first class holding any: the ones every lower class's heads of
    /// that level wait behind (blocking rule).
    fn first_class_heads(&self, level: usize) -> impl Iterator<Item = &Queued<H>> {
        let ring = self.rings.iter().map(|r| &r[level]).find(|r| !r.is_empty());
        ring.into_iter().flatten().map(|flow| &self.conns[flow].queue[0])
    }
}

impl<H> QueuePolicy<H> for SourceScheduler<H> {
    fn enqueue(&mut self, pkt: Queued<H>, now: u64, dropped: &mut Vec<Dropped<H>>) {
        // Downgrades due before this arrival go first, so ring order is time order.
        self.downgrade_until(now);
        let len = pkt.info.len as usize;
        if !self.fits(len) {
            dropped.push(Dropped::refused(pkt));
            return;
        }
        self.packets += 1;
        self.bytes += len;
        let flow = pkt.info.flow;
        if let Some(conn) = self.conns.get_mut(&flow) {
            conn.queue.push_back(pkt);
            conn.queued_at.push_back(now);
            return;
        }
        let class = self.class_of(pkt.info.ports);
        let conn = Conn { queue: VecDeque::from([pkt]), queued_at: VecDeque::from([now]), remarks: 0 };
        self.rings[class][conn.head_level()].push_back(flow);
        self.conns.insert(flow, conn);
    }

    fn dequeue(&mut self, now: u64) -> Option<Queued<H>> {
        self.downgrade_until(now);
        for b in &mut self.buckets {
            b.spec.refill(&mut b.tokens, now);
        }
        // Levels blocked by a higher class waiting for their tokens (LOW never is).
        let mut blocked = [false; LEVELS];
        for c in 0..self.rings.len() {
            for level in [HIGH, MED, LOW] {
                if self.rings[c][level].is_empty() || blocked[level] {
                    continue;
                }
                if let Some(k) = self.take_tokens(c, level) {
                    return Some(self.send(c, level, k, now));
                }
                blocked[level] = true;
            }
        }
        None
    }

    fn wake_at(&self) -> Option<u64> {
        let tokens = [HIGH, MED].into_iter().flat_map(|level| {
            let b = &self.buckets[level];
            self.first_class_heads(level).map(move |head| b.spec.ready_at(&b.tokens, head.info.len))
        });
        let downgrades = self
            .rings
            .iter()
            .flat_map(|r| r[HIGH].iter().chain(&r[MED]))
            .map(|flow| self.conns[flow].deadline(self.downgrade_ns));
        tokens.chain(downgrades).min()
    }

    fn len_packets(&self) -> usize {
        self.packets
    }

    fn len_bytes(&self) -> usize {
        self.bytes
    }

    fn drain(&mut self) -> Vec<Queued<H>> {
        let mut held = Vec::with_capacity(self.packets);
        for flow in self.rings.iter_mut().flat_map(|r| r.iter_mut()).flat_map(|ring| ring.drain(..)) {
            held.extend(self.conns.remove(&flow).expect("a ring holds live connections").queue);
        }
        self.packets = 0;
        self.bytes = 0;
        held
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let c = &self.counters;
        vec![
            ("downgraded_high_to_med", c.downgraded_high_to_med),
            ("downgraded_med_to_low", c.downgraded_med_to_low),
            ("sent_high", c.sent[HIGH]),
            ("sent_med", c.sent[MED]),
            ("sent_low", c.sent[LOW]),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, PolicyConfig};
    use crate::link::{Fate, Link};
    use crate::packet::{PacketInfo, DSCP_AF11};
    use crate::policy::Cause;
    use crate::stats::LinkSnapshot;

    const MS: u64 = 1_000_000;

    /// Classes as in the paper's section 5 (Telnet, HTTP, FTP) by server port.
    const CLASSES: &str = "[[[2323, 2323]], [[80, 80]], [[2121, 2121]]]";
    const TELNET: u16 = 2323;
    const HTTP: u16 = 80;
    const FTP: u16 = 2121;

    fn config(high: (u64, u64), med: (u64, u64), classes: &str) -> SourceSchedulerConfig {
        let text = format!(
            r#"{{"high": {{"rate_bps": {}, "bucket_bytes": {}}}, "med": {{"rate_bps": {}, "bucket_bytes": {}}},
                "classes": {classes}}}"#,
            high.0, high.1, med.0, med.1
        );
        serde_json::from_str(&crate::testkit::params("source_scheduler", &text)).unwrap()
    }

    fn scheduler(high: (u64, u64), med: (u64, u64), buffer: Option<Buffer>) -> SourceScheduler<u64> {
        let env = LinkEnv { buffer, rate_bps: 10_000_000, seed: 0 };
        SourceScheduler::new(&config(high, med, CLASSES), &env).unwrap()
    }

    /// A packet of connection `conn` (client port 40000 + conn) to server port `server`.
    fn info(conn: u16, server: u16, dscp: u8, len: u32) -> PacketInfo {
        let ports = (40000 + conn, server);
        PacketInfo::new(len, dscp, u64::from(conn)).with_addresses(6, 0x0a00_0001, 0x0a01_0001, Some(ports))
    }

    fn pkt(seq: u64, info: PacketInfo) -> Queued<u64> {
        Queued { handle: seq, info, arrival: 0, seq }
    }

    /// Offer `(seq, info)` at `now`; the seqs refused.
    fn offer(q: &mut SourceScheduler<u64>, now: u64, pkts: &[(u64, PacketInfo)]) -> Vec<u64> {
        let mut dropped = Vec::new();
        for &(seq, info) in pkts {
            q.enqueue(pkt(seq, info), now, &mut dropped);
        }
        assert!(dropped.iter().all(|d| d.cause == Cause::Refused));
        dropped.iter().map(|d| d.pkt.seq).collect()
    }

    fn order(q: &mut SourceScheduler<u64>, now: u64) -> Vec<u64> {
        std::iter::from_fn(|| q.dequeue(now).map(|p| p.seq)).collect()
    }

    /// A link at `rate_bps` (no delay, unlimited buffer) with the given policy.
    fn link(rate_bps: u64, policy: &str) -> Link<u64> {
        let text = format!(
            r#"{{"links": [{{"name": "h1>r1", "queue_num": 0, "rate_bps": {rate_bps}, "delay_us": 0,
                "buffer": null, "policy": {{"kind": "source_scheduler", {policy}}}}}]}}"#
        );
        Link::new(&Config::parse(&crate::testkit::filled(&text)).unwrap().links[0], 0).unwrap()
    }

    /// A delivery: (seq, time, dscp it left with).
    type Delivery = (u64, u64, u8);

    /// Deliveries in delivery order.
    fn delivered(out: &[Fate<u64>]) -> Vec<Delivery> {
        out.iter()
            .map(|f| match f {
                Fate::Deliver { handle, at, info } => (*handle, *at, info.dscp),
                Fate::Drop { handle, .. } => panic!("packet {handle} dropped"),
            })
            .collect()
    }

    #[test]
    fn high_sent_never_exceeds_rate_times_t_plus_bucket_and_reaches_it_under_backlog() {
        // The paper's HIGH profile (section 5: 250 Kbps, 6000 B) on a 10 Mbit/s access link:
        // three Telnet-class connections offer 2 Mbit/s of AF11 for 2 s. Downgrades after 10 s:
        // with footnote 7's 200 ms, a backlog queued that long goes on as MED and LOW.
        let mut l = link(
            10_000_000,
            r#""high": {"rate_bps": 250000, "bucket_bytes": 6000},
            "med": {"rate_bps": 500000, "bucket_bytes": 6000}, "classes": [[[2323, 2323]], [[80, 80]]],
            "downgrade_after_us": 10000000"#,
        );
        let mut out = Vec::new();
        for k in 0..500u64 {
            let t = k * 4 * MS;
            l.advance(t, &mut out);
            l.arrive(k, info((k % 3) as u16, TELNET, DSCP_AF11, 1000), t, &mut out);
        }
        let end = 2000 * MS;
        l.advance(end, &mut out);
        // 1000 bytes take 800 us at 10 Mbit/s: a packet started 800 us before it arrived.
        let mut high_bytes = 0u64;
        for &(_, at, dscp) in &delivered(&out) {
            let start = at - 800_000;
            if dscp == DSCP_AF11 {
                high_bytes += 1000;
                let bound = 250_000 * start / 8_000_000_000 + 6000;
                assert!(high_bytes <= bound, "{high_bytes} bytes of HIGH by {start} ns > {bound}");
            }
        }
        // Under backlog the bucket is the limit: 6000 + 250 kbit/s * 2 s / 8 = 68500 bytes.
        assert_eq!(high_bytes, 68_000);
        // No packet was queued 10 s: none was downgraded.
        assert_eq!(l.snapshot().policy_counters[..2], [("downgraded_high_to_med", 0), ("downgraded_med_to_low", 0)]);
    }

    /// Two HIGH packets of an HTTP-class connection behind 50 LOW packets of the Telnet class, on
    /// a 10 Mbit/s link (1500 B: 1.2 ms), with 1 kbit/s of HIGH and MED tokens (1500-byte
    /// buckets); with `med_drained`, another HTTP connection's AF12 packet too. Deliveries of
    /// the HTTP packets, and the link's stats.
    fn blocked_high_head(med_drained: bool) -> (Vec<Delivery>, LinkSnapshot) {
        let mut l = link(
            10_000_000,
            r#""high": {"rate_bps": 1000, "bucket_bytes": 1500},
            "med": {"rate_bps": 1000, "bucket_bytes": 1500}, "classes": [[[2323, 2323]], [[80, 80]]]"#,
        );
        let mut out = Vec::new();
        // Class 0 sends 50 LOW packets first (60 ms); class 1's HIGH a1 takes the whole HIGH
        // bucket when its turn comes, at 60 ms, and a2 becomes the head then.
        for k in 0..50 {
            l.arrive(100 + k, info(9, TELNET, 0, 1500), 0, &mut out);
        }
        l.arrive(1, info(1, HTTP, DSCP_AF11, 1500), 0, &mut out);
        l.arrive(2, info(1, HTTP, DSCP_AF11, 1500), 0, &mut out);
        if med_drained {
            l.arrive(3, info(2, HTTP, DSCP_AF12, 1500), 0, &mut out);
        }
        l.advance(10_000 * MS, &mut out);
        (delivered(&out).into_iter().filter(|d| d.0 < 100).collect(), l.snapshot())
    }

    #[test]
    fn a_high_head_without_tokens_is_remarked_med_after_200_ms_and_low_after_400_ms() {
        // a1 leaves at 60 ms (+1.2 ms on the wire); a2 is the head from 60 ms on and has no HIGH
        // tokens (12 s away): queued since 0, it is MED at 200 ms, and with MED tokens there, it
        // leaves then as AF12.
        let (d, stats) = blocked_high_head(false);
        assert_eq!(d, vec![(1, 61_200_000, DSCP_AF11), (2, 201_200_000, DSCP_AF12)]);
        assert_eq!(stats.policy_counters[..2], [("downgraded_high_to_med", 1), ("downgraded_med_to_low", 0)]);
        // With the MED bucket drained by another connection's AF12 packet (sent at 61.2 ms), a2
        // waits at MED too and leaves as AF13 at 400 ms, 400 ms after it was queued.
        let (d, stats) = blocked_high_head(true);
        assert_eq!(d, vec![(1, 61_200_000, DSCP_AF11), (3, 62_400_000, DSCP_AF12), (2, 401_200_000, DSCP_AF13)]);
        assert_eq!(
            stats.policy_counters,
            vec![
                ("downgraded_high_to_med", 1),
                ("downgraded_med_to_low", 1),
                ("sent_high", 1),
                ("sent_med", 1),
                ("sent_low", 51)
            ]
        );
        // Asked late, the policy downgrades at the deadline, not when asked: a head since 0 is
        // MED from 200 ms and LOW from 400 ms, whenever it is looked at.
        let mut q = scheduler((8000, 1500), (8000, 1500), None);
        offer(&mut q, 0, &[(1, info(1, HTTP, DSCP_AF11, 1500)), (2, info(1, HTTP, DSCP_AF11, 1500))]);
        offer(&mut q, 0, &[(3, info(2, HTTP, DSCP_AF12, 1500))]);
        assert_eq!(order(&mut q, 0), vec![1, 3]);
        assert_eq!(q.wake_at(), Some(200 * MS));
        assert_eq!(order(&mut q, 250 * MS), Vec::<u64>::new());
        assert_eq!(q.wake_at(), Some(400 * MS));
        let last = q.dequeue(400 * MS).unwrap();
        assert_eq!((last.seq, last.info.dscp, last.info.class), (2, DSCP_AF13, crate::packet::Class::Lowest));
        // The stats line carries them; the link's own counters count the DSCP it left with.
        let json = stats.to_json();
        assert_eq!(json["policy_counters"]["downgraded_med_to_low"], 1);
        assert_eq!(json["policy_counters"]["sent_low"], 51);
        let sent: Vec<&serde_json::Value> =
            ["high", "low", "lowest", "other"].iter().map(|c| &json["sent"][c][0]).collect();
        assert_eq!(sent, [1, 1, 1, 50]);
    }

    #[test]
    fn a_backlog_is_remarked_by_its_time_queued_not_once_per_head() {
        // Four HIGH packets of one connection queued at 0; both buckets 1500 B at 8 kbit/s (a
        // full bucket every 1.5 s). p1 goes on the full HIGH bucket; p2 is MED at 200 ms and takes
        // the MED bucket; p3, queued 200 ms when it becomes the head, is MED at once and LOW at
        // 400 ms; p4, queued 400 ms when it becomes the head, is LOW at once and follows p3.
        let mut l = link(
            10_000_000,
            r#""high": {"rate_bps": 8000, "bucket_bytes": 1500},
            "med": {"rate_bps": 8000, "bucket_bytes": 1500}, "classes": [[[80, 80]]]"#,
        );
        let mut out = Vec::new();
        for k in 1..=4 {
            l.arrive(k, info(1, HTTP, DSCP_AF11, 1500), 0, &mut out);
        }
        l.advance(10_000 * MS, &mut out);
        assert_eq!(
            delivered(&out),
            vec![
                (1, 1_200_000, DSCP_AF11),
                (2, 201_200_000, DSCP_AF12),
                (3, 401_200_000, DSCP_AF13),
                (4, 402_400_000, DSCP_AF13)
            ]
        );
        assert_eq!(l.snapshot().policy_counters[..2], [("downgraded_high_to_med", 3), ("downgraded_med_to_low", 2)]);
    }

    #[test]
    fn a_head_the_tokens_cover_goes_before_one_of_its_class_still_waiting() {
        // "If any HIGH priority packet can be sent from a connection at Class 1 ... it is
        // dispatched": HIGH bucket 2000 B at 8 kbit/s. a1 (1500 B) leaves 500 B; a2 (1500 B) has
        // the turn but waits for tokens; b1 (40 B), same class, fits and goes; the lower class's
        // HIGH c1 (40 B) waits behind a2 (blocking rule) until a2 has gone.
        let mut q = scheduler((8000, 2000), (1_000_000, 6000), None);
        q.downgrade_ns = 10_000 * MS; // no downgrade in this test
        offer(&mut q, 0, &[(1, info(1, TELNET, DSCP_AF11, 1500)), (2, info(1, TELNET, DSCP_AF11, 1500))]);
        assert_eq!(order(&mut q, 0), vec![1]);
        offer(&mut q, 0, &[(3, info(2, TELNET, DSCP_AF11, 40)), (4, info(3, HTTP, DSCP_AF11, 40))]);
        assert_eq!(order(&mut q, 0), vec![3]);
        // a2 needs 1040 more bytes at 1 byte/ms; c1 then 40 more.
        assert_eq!(q.wake_at(), Some(1040 * MS));
        assert_eq!(order(&mut q, 1040 * MS), vec![2]);
        assert_eq!((q.wake_at(), order(&mut q, 1080 * MS)), (Some(1080 * MS), vec![4]));
    }

    #[test]
    fn a_downgrade_due_before_an_arrival_takes_its_turn_first() {
        // HIGH: 1500 B at 0.01 byte/ms (a1 empties it at 0); MED: 1500 B at 1 byte/ms (c1, AF12,
        // empties it at 0). a2 (100 B) is a HIGH head from 0, MED from 200 ms. b1 (AF12, 100 B)
        // arrives at 250 ms while the link is busy (no dequeue in between): a2 joined the MED
        // ring at 200 ms, so with 250 B of MED tokens both go, a2 first.
        let mut q = scheduler((80, 1500), (8000, 1500), None);
        offer(&mut q, 0, &[(1, info(1, HTTP, DSCP_AF11, 1500)), (2, info(1, HTTP, DSCP_AF11, 100))]);
        offer(&mut q, 0, &[(3, info(3, HTTP, DSCP_AF12, 1500))]);
        assert_eq!(order(&mut q, 0), vec![1, 3]);
        offer(&mut q, 250 * MS, &[(4, info(2, HTTP, DSCP_AF12, 100))]);
        assert_eq!(order(&mut q, 250 * MS), vec![2, 4]);
    }

    #[test]
    fn classes_go_in_order_even_a_low_packet_before_a_lower_class_high_one() {
        let mut q = scheduler((1_000_000, 6000), (1_000_000, 6000), None);
        offer(&mut q, 0, &[(1, info(1, FTP, DSCP_AF11, 500)), (2, info(2, HTTP, DSCP_AF11, 500))]);
        offer(&mut q, 0, &[(3, info(3, TELNET, 0, 500)), (4, info(4, 5555, DSCP_AF13, 500))]);
        // A packet from the server's side (source port 80) is in the HTTP class too; an unknown
        // port (5555) is in the last class, behind FTP's HIGH.
        offer(&mut q, 0, &[(5, PacketInfo { ports: Some((HTTP, 40005)), ..info(5, 0, DSCP_AF12, 500) })]);
        assert_eq!(order(&mut q, 0), vec![3, 2, 5, 1, 4]);
        // Within a class: HIGH, then MED, then LOW.
        offer(&mut q, 0, &[(6, info(6, HTTP, 0, 500)), (7, info(7, HTTP, DSCP_AF12, 500))]);
        offer(&mut q, 0, &[(8, info(8, HTTP, DSCP_AF11, 500))]);
        assert_eq!(order(&mut q, 0), vec![8, 7, 6]);
    }

    #[test]
    fn a_level_blocked_at_one_class_is_blocked_at_the_lower_classes() {
        // HIGH bucket 2000 B at 8 kbit/s (1 byte per ms). Telnet's a1 (1500 B) takes 1500 of it;
        // a2 (1500 B) waits for 1000 more bytes. HTTP's small HIGH packet (40 B) would fit in
        // the 500 left, but must wait behind a2; HTTP's MED and LOW packets go.
        let mut q = scheduler((8000, 2000), (1_000_000, 6000), None);
        q.downgrade_ns = 10_000 * MS; // no downgrade in this test
        offer(&mut q, 0, &[(1, info(1, TELNET, DSCP_AF11, 1500)), (2, info(1, TELNET, DSCP_AF11, 1500))]);
        offer(&mut q, 0, &[(3, info(3, HTTP, DSCP_AF11, 40)), (4, info(4, HTTP, 0, 40))]);
        offer(&mut q, 0, &[(5, info(5, HTTP, DSCP_AF12, 40))]);
        assert_eq!(order(&mut q, 0), vec![1, 5, 4]);
        // a2's tokens at exactly 1 s (1000 bytes at 1 byte/ms); HTTP's 40 bytes 40 ms later.
        assert_eq!(q.wake_at(), Some(1000 * MS));
        assert_eq!(order(&mut q, 1000 * MS - 1), Vec::<u64>::new());
        assert_eq!(order(&mut q, 1000 * MS), vec![2]);
        assert_eq!(q.wake_at(), Some(1040 * MS));
        assert_eq!(order(&mut q, 1040 * MS), vec![3]);
        assert_eq!((q.len_packets(), q.wake_at()), (0, None));
    }

    #[test]
    fn low_is_work_conserving_at_the_link_rate_while_high_waits_for_tokens() {
        // A HIGH head waiting for tokens (its class first) does not hold the LOW packets back:
        // they leave back to back at 10 Mbit/s (1000 B: 800 us apart).
        let mut l = link(
            10_000_000,
            r#""high": {"rate_bps": 8000, "bucket_bytes": 1000},
            "med": {"rate_bps": 8000, "bucket_bytes": 1000}, "classes": [[[2323, 2323]], [[2121, 2121]]]"#,
        );
        let mut out = Vec::new();
        l.arrive(0, info(0, TELNET, DSCP_AF11, 1000), 0, &mut out);
        l.arrive(1, info(0, TELNET, DSCP_AF11, 1000), 0, &mut out);
        for k in 2..102 {
            l.arrive(k, info((k % 4) as u16 + 1, FTP, DSCP_AF13, 1000), 0, &mut out);
        }
        l.advance(100 * MS, &mut out);
        let d = delivered(&out);
        assert_eq!(d.len(), 101, "all but the HIGH packet waiting for tokens (1 s)");
        assert!(d.iter().enumerate().all(|(i, x)| x.1 == (i as u64 + 1) * 800_000), "{d:?}");
    }

    #[test]
    fn connections_of_a_class_take_turns() {
        let mut q = scheduler((1_000_000, 6000), (1_000_000, 6000), None);
        // Three HTTP connections, four LOW packets each, queued one connection after another.
        for (c, base) in [(1u16, 10u64), (2, 20), (3, 30)] {
            let pkts: Vec<(u64, PacketInfo)> = (0..4).map(|k| (base + k, info(c, HTTP, 0, 100))).collect();
            offer(&mut q, 0, &pkts);
        }
        assert_eq!(order(&mut q, 0), vec![10, 20, 30, 11, 21, 31, 12, 22, 32, 13, 23, 33]);
        // At HIGH too, and a connection that empties and comes back joins at the back.
        offer(&mut q, 0, &[(1, info(1, HTTP, DSCP_AF11, 100)), (2, info(2, HTTP, DSCP_AF11, 100))]);
        offer(&mut q, 0, &[(3, info(1, HTTP, DSCP_AF11, 100))]);
        assert_eq!(q.dequeue(0).map(|p| p.seq), Some(1));
        offer(&mut q, 0, &[(4, info(3, HTTP, DSCP_AF11, 100))]);
        assert_eq!(order(&mut q, 0), vec![2, 3, 4]);
    }

    #[test]
    fn an_arrival_the_buffer_cannot_hold_is_refused() {
        let info = |c| info(c, HTTP, DSCP_AF11, 1000);
        let mut q = scheduler((8000, 6000), (8000, 6000), Some(Buffer::Packets(3)));
        assert_eq!(offer(&mut q, 0, &[(1, info(1)), (2, info(2)), (3, info(1)), (4, info(3)), (5, info(2))]), [4, 5]);
        assert_eq!((q.len_packets(), q.len_bytes()), (3, 3000));
        assert_eq!(q.dequeue(0).map(|p| p.seq), Some(1));
        assert_eq!(offer(&mut q, 0, &[(6, info(3))]), Vec::<u64>::new());
        let mut q = scheduler((8000, 6000), (8000, 6000), Some(Buffer::Bytes(2500)));
        assert_eq!(offer(&mut q, 0, &[(1, info(1)), (2, info(2)), (3, info(1))]), [3]);
        assert_eq!(offer(&mut q, 0, &[(4, PacketInfo { len: 500, ..info(1) })]), Vec::<u64>::new());
        let mut drained: Vec<u64> = q.drain().into_iter().map(|p| p.seq).collect();
        drained.sort();
        assert_eq!((drained, q.len_packets(), q.len_bytes(), q.wake_at()), (vec![1, 2, 4], 0, 0, None));
    }

    #[test]
    fn bad_parameters_name_the_field() {
        let env = LinkEnv { buffer: None, rate_bps: 1_000_000, seed: 0 };
        let err = |high: (u64, u64), med: (u64, u64), classes: &str, downgrade: u64| {
            let mut c = config(high, med, classes);
            c.downgrade_after_us = downgrade;
            SourceScheduler::<u64>::new(&c, &env).err().unwrap()
        };
        let ok = (250_000, 6000);
        assert_eq!(err((0, 6000), ok, CLASSES, 1), "high.rate_bps: must be above 0");
        assert_eq!(
            err(ok, (1, 63), CLASSES, 1),
            "med.bucket_bytes: must hold one packet of 64 bytes at least (got 63)"
        );
        assert!(err(ok, ok, "[]", 1).starts_with("classes: need at least one class"));
        assert_eq!(err(ok, ok, "[[[1, 1]], []]", 1), "classes[1]: a class needs at least one port range");
        assert_eq!(err(ok, ok, "[[[1, 1], [9, 8]]]", 1), "classes[0][1]: need lo <= hi <= 65535 (got [9, 8])");
        assert_eq!(err(ok, ok, CLASSES, 0), "downgrade_after_us: must be 1 to 3600000000 (an hour), got 0");
        assert!(err(ok, ok, CLASSES, u64::MAX).starts_with("downgrade_after_us: must be 1 to 3600000000"));
        let policy = PolicyConfig::SourceScheduler(config(ok, ok, CLASSES));
        let no_rate = LinkEnv { rate_bps: 0, ..env };
        assert!(policy.build::<u64>(&no_rate).err().unwrap().starts_with("needs the link's rate_bps above 0"));
    }
}
