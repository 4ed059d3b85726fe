//! Token markers of the TCP-friendly marking paper (Lo Monaco, Feroz, Kalyanaraman, Xia;
//! docs/tcpf-markers.md): TCPF (Algorithms 1 and 2), TCPF(O) (the same without retransmission
//! protection) and the token-bucket marker TB. Packets that get tokens leave with `in_dscp`
//! (AF11, IN), the others with `out_dscp` (AF12, OUT).
//!
//! They run in the engine, not in tc BPF: the allocation every T is then exact on the engine's
//! virtual clock, needs no agent process or BPF timer, and the whole mechanism is unit-testable
//! here on synthetic flows. The allocation is run lazily, on the first packet (or ACK) to arrive
//! at or after each boundary k*T: nothing reads a marker's state between two packets, so this
//! gives the same marks as a timer at the boundary, without waking the engine for it.
//!
//! TCPF needs the ACKs of the flows it marks. The engine feeds it every packet arriving on any
//! link direction of the same engine (router): an ACK is a TCP packet whose reversed 5-tuple is a
//! flow the marker tracks (link.rs, nfq_loop.rs).

use crate::packet::{PacketInfo, TCP_ACK};

const TCP_FIN: u8 = 0x01;
const TCP_SYN: u8 = 0x02;
const TCP_RST: u8 = 0x04;
use super::api::{AckObserver, EdgeFunction, EdgeParams, Step};
use crate::policy::Queued;
use serde::Deserialize;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

/// `{"kind": "tcpf", "interval_us": T, "pool_bytes": M, "tiny_window": K, "mss_bytes": MSS,
/// "in_dscp": 10, "out_dscp": 12, "protect_retransmissions": true,
/// "retransmissions_use_tokens": true, "w_gain": 0.125, "e_gain": 0.5, "flow_idle_us": 120000000}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TcpfConfig {
    pub interval_us: u64,
    pub pool_bytes: u64,
    /// K: a flow whose window estimate is below K * MSS is tiny.
    pub tiny_window: u32,
    pub mss_bytes: u32,
    pub in_dscp: u8,
    pub out_dscp: u8,
    /// Algorithm 2 (b): a retransmission is IN. False: TCPF(O).
    pub protect_retransmissions: bool,
    /// A protected retransmission is charged to the flow's tokens when it has enough (it is IN
    /// in any case).
    pub retransmissions_use_tokens: bool,
    /// EWMA gain of W(i) per sample (one sample per data packet once an ACK was seen).
    pub w_gain: f64,
    /// EWMA gain of E(i) per interval.
    pub e_gain: f64,
    /// A flow with no packet either way for this long is forgotten; at least [`MIN_MEMORY_US`]
    /// (refused below it at load, never raised in silence). A reset, or the ACK of the flow's FIN,
    /// ends it sooner.
    pub flow_idle_us: u64,
}

/// `{"kind": "token_marker", "interval_us": T, "pool_bytes": M, "in_dscp": 10, "out_dscp": 12}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenMarkerConfig {
    pub interval_us: u64,
    pub pool_bytes: u64,
    pub in_dscp: u8,
    pub out_dscp: u8,
}

fn check_common(interval_us: u64, pool_bytes: u64, in_dscp: u8, out_dscp: u8) -> Result<(), String> {
    if interval_us == 0 {
        return Err("interval_us: must be above 0".into());
    }
    if pool_bytes == 0 {
        return Err("pool_bytes: must be above 0".into());
    }
    for (field, d) in [("in_dscp", in_dscp), ("out_dscp", out_dscp)] {
        if d > 63 {
            return Err(format!("{field}: must be a DSCP, 0-63 (got {d})"));
        }
    }
    if in_dscp == out_dscp {
        return Err(format!("out_dscp: must differ from in_dscp (both {in_dscp})"));
    }
    Ok(())
}

impl TcpfConfig {
    /// Check the parameters and build the marker.
    pub fn marker(&self) -> Result<Tcpf, String> {
        check_common(self.interval_us, self.pool_bytes, self.in_dscp, self.out_dscp)?;
        if self.mss_bytes == 0 {
            return Err("mss_bytes: must be above 0".into());
        }
        for (field, g) in [("w_gain", self.w_gain), ("e_gain", self.e_gain)] {
            if !(g > 0.0 && g <= 1.0) {
                return Err(format!("{field}: must be in (0, 1] (got {g})"));
            }
        }
        if self.flow_idle_us < MIN_MEMORY_US {
            return Err(format!(
                "flow_idle_us: at least {MIN_MEMORY_US} (TCP's maximum RTO: a flow backing off is silent \
                 that long and still resumes), got {}",
                self.flow_idle_us
            ));
        }
        Ok(Tcpf {
            c: self.clone(),
            flows: HashMap::new(),
            next_alloc: None,
            interval: Interval::default(),
            debt: 0,
            counters: TcpfCounters::default(),
        })
    }
}

impl TokenMarkerConfig {
    /// Check the parameters and build the marker.
    pub fn marker(&self) -> Result<TokenMarker, String> {
        check_common(self.interval_us, self.pool_bytes, self.in_dscp, self.out_dscp)?;
        Ok(TokenMarker { c: self.clone(), tokens: 0, next_refill: None, counts: TokenCounts::default() })
    }
}

impl EdgeParams for TcpfConfig {
    fn build<H: 'static>(&self) -> Result<Box<dyn EdgeFunction<H>>, String> {
        Ok(Box::new(TcpfEdge(Rc::new(RefCell::new(self.marker()?)))))
    }

    fn may_rewrite(&self) -> bool {
        true
    }
}

impl EdgeParams for TokenMarkerConfig {
    fn build<H: 'static>(&self) -> Result<Box<dyn EdgeFunction<H>>, String> {
        Ok(Box::new(self.marker()?))
    }

    fn may_rewrite(&self) -> bool {
        true
    }
}

/// A TCPF marker on a link, shared with the link's engine, which feeds it the ACKs crossing its
/// other links.
struct TcpfEdge(Rc<RefCell<Tcpf>>);

impl<H> EdgeFunction<H> for TcpfEdge {
    fn apply(&mut self, mut pkt: Queued<H>, now: u64) -> Step<H> {
        let dscp = self.0.borrow_mut().mark(&pkt.info, now);
        pkt.info.set_dscp(dscp);
        Step::Next(pkt)
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        self.0.borrow().counter_values()
    }

    fn ack_observer(&self) -> Option<Rc<RefCell<dyn AckObserver>>> {
        Some(self.0.clone())
    }
}

impl AckObserver for Tcpf {
    fn observe(&mut self, p: &PacketInfo, now: u64) {
        Tcpf::observe(self, p, now)
    }
}

/// A TCP connection's direction: (source, destination, source port, destination port).
type FlowKey = (u32, u32, u16, u16);

fn key(p: &PacketInfo) -> Option<FlowKey> {
    let (sport, dport) = p.ports?;
    (p.proto == 6).then_some((p.src, p.dst, sport, dport))
}

/// a < b in sequence space (RFC 793 arithmetic, wrapping at 2^32).
fn seq_lt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

/// a - b in sequence space, 0 when a is not after b.
fn seq_after_by(a: u32, b: u32) -> u32 {
    let d = a.wrapping_sub(b);
    if (d as i32) <= 0 {
        0
    } else {
        d
    }
}

/// How long a silent flow is remembered, at least: as long as TCP can be silent and still resume
/// (its retransmission timer backed off to the maximum RTO: RFC 6298 (2.5) allows a cap of no less
/// than 60 s, Linux's TCP_RTO_MAX is 120 s). Forgetting sooner made a retransmission after a
/// backed-off timeout look like a new flow's first packet (issue 44: 800 ms).
pub const MIN_MEMORY_US: u64 = 120_000_000;

/// Per-flow state of Algorithms 1 and 2 (bytes unless said otherwise).
#[derive(Debug, Clone)]
pub struct Flow {
    /// The highest sequence sent + 1: max of seq + payload (+ 1 each for SYN and FIN).
    pub snd_max: u32,
    /// The highest ACK seen in the reverse direction (the flow's first sequence number until one is).
    pub snd_una: u32,
    /// W(i), from the first packet carrying data.
    pub w: Option<f64>,
    /// E(i), once the flow went through an allocation (None: a new flow).
    pub e: Option<f64>,
    /// Bytes sent since the last allocation.
    pub sent: u64,
    /// in_count(i): IN tokens left for this interval (below 0: spent beyond them).
    pub in_count: i64,
    /// S(i): OUT packets between two IN packets.
    pub s: f64,
    /// count(i): packets since the last IN, less the S(i) of each IN.
    pub count: f64,
    /// Classed tiny at the last allocation while the pool covered the tiny flows (step (d)).
    pub protected_tiny: bool,
    /// The sequence number after the flow's FIN, once it sent one.
    pub fin_end: Option<u32>,
    pub last_seen: u64,
}

/// A TCPF marker's counters (stats.rs prints them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpfCounters {
    pub in_packets: u64,
    pub in_bytes: u64,
    pub out_packets: u64,
    pub out_bytes: u64,
    /// Retransmissions marked IN by Algorithm 2 (b).
    pub retrans_protected: u64,
    /// Retransmissions seen (TCPF(O) marks them by the tokens like any packet).
    pub retrans_seen: u64,
    pub allocations: u64,
    /// Tokens spent (bytes), over all intervals.
    pub pool_spent: u64,
    /// ACKs matched to a tracked flow.
    pub acks: u64,
    /// Flows tracked now.
    pub flows: u64,
}

/// The pool of the current interval.
#[derive(Debug, Clone, Copy, Default)]
pub struct Interval {
    /// M less the debt carried in.
    pub pool: i64,
    /// The sum of the in_count(i) given.
    pub allocated: i64,
    /// Bytes charged beyond the flows' tokens (in_count(i) taken below 0).
    pub over: i64,
}

pub struct Tcpf {
    c: TcpfConfig,
    pub flows: HashMap<FlowKey, Flow>,
    /// The next allocation boundary (ns); None before the first packet.
    next_alloc: Option<u64>,
    pub interval: Interval,
    /// Tokens spent beyond an interval's pool, taken from the next ones.
    pub debt: i64,
    pub counters: TcpfCounters,
}

/// Max-min fair (water-filling) split of `capacity` whole bytes over `demands`: each round the
/// demands that fit the equal share are met and leave; when none fits, the others get the share,
/// floor(capacity left / flows left) each (tokens are whole bytes, so the split never exceeds
/// the capacity).
pub fn max_min_alloc(capacity: i64, demands: &[i64]) -> Vec<i64> {
    let mut order: Vec<usize> = (0..demands.len()).collect();
    order.sort_by_key(|i| demands[*i]);
    let mut out = vec![0; demands.len()];
    let mut left = capacity.max(0);
    for (k, &i) in order.iter().enumerate() {
        let share = left / (order.len() - k) as i64;
        if demands[i] > share {
            // The smallest demand left does not fit: neither do the others.
            for &j in &order[k..] {
                out[j] = share;
            }
            break;
        }
        out[i] = demands[i].max(0);
        left -= out[i];
    }
    out
}

impl Tcpf {
    fn interval_ns(&self) -> u64 {
        self.c.interval_us * 1000
    }

    /// How long a silent flow is remembered: `flow_idle_us` (at least [`MIN_MEMORY_US`]).
    pub fn memory_us(&self) -> u64 {
        self.c.flow_idle_us
    }

    /// Run every allocation due at or before `now`, each at its own boundary (multiples of T from
    /// the first packet seen), so E(i) decays, the debt is repaid and idle flows are forgotten as a
    /// timer would. Once no flow and no debt is left the boundaries in between change nothing.
    fn catch_up(&mut self, now: u64) {
        let t = self.interval_ns();
        let mut next = match self.next_alloc {
            None => {
                self.next_alloc = Some(now + t);
                self.interval = Interval { pool: self.c.pool_bytes as i64, allocated: 0, over: 0 };
                return;
            }
            Some(next) => next,
        };
        while now >= next {
            if self.flows.is_empty() && self.debt == 0 && self.interval.over == 0 && now - next >= t {
                next += (now - next) / t * t; // nothing to decay, forget or repay on the way
            }
            self.forget_silent(next);
            self.allocate(next);
            next += t;
        }
        self.next_alloc = Some(next);
    }

    fn forget_silent(&mut self, now: u64) {
        let memory = self.memory_us() * 1000;
        self.flows.retain(|_, f| now.saturating_sub(f.last_seen) < memory);
    }

    /// Algorithm 1 at time `now`.
    pub fn allocate(&mut self, _now: u64) {
        // Mismatches are "handled across the interval of the token allocation process" (section
        // 4): what tiny and new flows spent beyond their tokens, and beyond the tokens nobody was
        // given, is a debt on the next intervals' pools, so that over time the pool is M per T.
        let last = self.interval;
        self.debt += (last.over - (last.pool - last.allocated)).max(0);
        let pool = self.c.pool_bytes as i64;
        let m = pool - self.debt.min(pool);
        self.debt -= pool - m;
        let g = self.c.e_gain;
        for f in self.flows.values_mut() {
            // E(i), an EWMA per interval; a new flow's first estimate is what it sent so far.
            let sent = f.sent as f64;
            f.e = Some(match f.e {
                None => sent,
                Some(e) => e + g * (sent - e),
            });
            f.sent = 0;
        }
        let tiny_below = f64::from(self.c.tiny_window) * f64::from(self.c.mss_bytes);
        let mut keys: Vec<FlowKey> = self.flows.keys().copied().collect();
        keys.sort_unstable();
        let demand = |f: &Flow| f.e.unwrap_or(0.0).floor() as i64;
        // Step I: tiny flows (W < K * MSS; a flow with no W yet counts as tiny: TCP's first window
        // is at most 4 MSS, RFC 3390) take E(i) first.
        let is_tiny = |f: &Flow| f.w.is_none_or(|w| w < tiny_below);
        let (tiny, other): (Vec<FlowKey>, Vec<FlowKey>) = keys.iter().partition(|k| is_tiny(&self.flows[*k]));
        let available = m - tiny.iter().map(|k| demand(&self.flows[k])).sum::<i64>();
        // Step II: (c) the tiny flows share M max-min, the others get nothing; (d) the tiny flows
        // get their estimate, the others share what is left max-min.
        let step_d = available > 0;
        let (shared, capacity, rest) = if step_d { (&other, available, &tiny) } else { (&tiny, m, &other) };
        let demands: Vec<i64> = shared.iter().map(|k| demand(&self.flows[k])).collect();
        let mut allocated = 0;
        for (k, a) in shared.iter().zip(max_min_alloc(capacity, &demands)) {
            allocated += a;
            Self::give(self.flows.get_mut(k).unwrap(), a, false);
        }
        for k in rest {
            let f = self.flows.get_mut(k).unwrap();
            let a = if step_d { demand(f) } else { 0 };
            allocated += a;
            Self::give(f, a, step_d);
        }
        self.interval = Interval { pool: m, allocated, over: 0 };
        self.counters.allocations += 1;
        self.counters.flows = self.flows.len() as u64;
    }

    /// in_count(i) = a whole bytes; S(i) = E(i) / in_count(i) - 1 packets (bytes over bytes, so
    /// packets per IN packet for equal sizes; real, so count(i) -= S(i) carries the remainder).
    fn give(f: &mut Flow, a: i64, protected_tiny: bool) {
        f.in_count = a;
        let e = f.e.unwrap_or(0.0).floor() as i64;
        f.s = if a > 0 { e as f64 / a as f64 - 1.0 } else { 0.0 };
        f.protected_tiny = protected_tiny;
    }

    /// A packet arriving on any link of this engine: if it belongs to a tracked flow's reverse
    /// direction, note its ACK; a reset, or the ACK of the flow's FIN, ends the flow.
    pub fn observe(&mut self, p: &PacketInfo, now: u64) {
        self.catch_up(now); // the boundaries count from the first packet the marker is shown
        let (Some(tcp), Some((src, dst, sport, dport))) = (p.tcp, key(p)) else { return };
        let k = (dst, src, dport, sport);
        let memory = self.memory_us() * 1000;
        let Some(f) = self.flows.get_mut(&k) else { return };
        if now.saturating_sub(f.last_seen) >= memory {
            self.flows.remove(&k);
            return;
        }
        f.last_seen = now;
        if tcp.flags & TCP_ACK != 0 {
            if seq_lt(f.snd_una, tcp.ack) {
                f.snd_una = tcp.ack;
            }
            self.counters.acks += 1;
        }
        if tcp.flags & TCP_RST != 0 || f.fin_end.is_some_and(|e| !seq_lt(f.snd_una, e)) {
            self.flows.remove(&k);
            self.counters.flows = self.flows.len() as u64;
        }
    }

    /// Algorithm 2: the DSCP of a packet on the marked direction.
    pub fn mark(&mut self, p: &PacketInfo, now: u64) -> u8 {
        self.catch_up(now);
        let len = i64::from(p.len);
        let (Some(tcp), Some(k)) = (p.tcp, key(p)) else {
            return self.out(p); // not TCP (or its header was not copied): no tokens
        };
        let memory = self.memory_us() * 1000;
        if self.flows.get(&k).is_some_and(|f| now.saturating_sub(f.last_seen) >= memory) {
            self.flows.remove(&k);
        }
        // (a) A new flow: nothing acknowledged yet, so its window is all it has sent.
        let f = self.flows.entry(k).or_insert_with(|| Flow {
            snd_max: tcp.seq,
            snd_una: tcp.seq,
            w: None,
            e: None,
            sent: 0,
            in_count: 0,
            s: 0.0,
            count: 0.0,
            protected_tiny: true,
            fin_end: None,
            last_seen: now,
        });
        f.last_seen = now;
        let length = tcp.payload + u32::from(tcp.flags & TCP_SYN != 0) + u32::from(tcp.flags & TCP_FIN != 0);
        let end = tcp.seq.wrapping_add(length);
        // Section 4: a retransmission has a sequence number below the largest sent.
        let retransmission = length > 0 && seq_lt(tcp.seq, f.snd_max);
        if length > 0 {
            if seq_lt(f.snd_max, end) {
                f.snd_max = end;
            }
            // W(i): the running average of (this packet's end - the highest ACK seen).
            let sample = f64::from(seq_after_by(end, f.snd_una));
            let g = self.c.w_gain;
            f.w = Some(f.w.map_or(sample, |w| w + g * (sample - w)));
        }
        if tcp.flags & TCP_FIN != 0 {
            f.fin_end = Some(end);
        }
        f.sent += u64::from(p.len);
        let dscp = self.decide(k, len, retransmission);
        if tcp.flags & TCP_RST != 0 {
            self.flows.remove(&k);
        }
        self.counters.flows = self.flows.len() as u64;
        if dscp == self.c.in_dscp {
            self.inn(p)
        } else {
            self.out(p)
        }
    }

    fn decide(&mut self, k: FlowKey, len: i64, retransmission: bool) -> u8 {
        let tiny_below = f64::from(self.c.tiny_window) * f64::from(self.c.mss_bytes);
        let f = self.flows.get_mut(&k).unwrap();
        if retransmission {
            self.counters.retrans_seen += 1;
            if self.c.protect_retransmissions {
                // (b): IN whatever the tokens ("absolute priority in the token pool"); charged to
                // them when the flow has some (reading notes 2.1.c item 2).
                if self.c.retransmissions_use_tokens && f.in_count > 0 {
                    Self::charge(f, len, &mut self.interval, &mut self.counters);
                }
                self.counters.retrans_protected += 1;
                return self.c.in_dscp;
            }
        }
        // "Tiny flows get absolute priority to tokens" (section 4), and a new flow is tiny
        // (TCP's first window is below K * MSS) until the allocation that follows it: while it
        // still is, it is IN, even past E(i), an estimate; the excess is a debt on the next pool.
        let tiny_now = f.w.is_none_or(|w| w < tiny_below);
        if (f.e.is_none() || f.protected_tiny) && tiny_now {
            Self::charge(f, len, &mut self.interval, &mut self.counters);
            return self.c.in_dscp;
        }
        // (c) "if tokens are available (in_count(i) > 0)": the paper's test, so the last IN packet
        // of an interval may take the tokens below 0 (a debt as above).
        if f.in_count > 0 {
            if f.count >= f.s {
                f.count -= f.s;
                Self::charge(f, len, &mut self.interval, &mut self.counters);
                return self.c.in_dscp;
            }
            f.count += 1.0;
        }
        self.c.out_dscp
    }

    /// "Decrease in_count(i)" (Algorithm 2 (c.1)): by the packet's length, tokens being bytes.
    fn charge(f: &mut Flow, len: i64, interval: &mut Interval, counters: &mut TcpfCounters) {
        interval.over += (len - f.in_count).max(0) - (-f.in_count).max(0);
        f.in_count -= len;
        counters.pool_spent += len as u64;
    }

    fn inn(&mut self, p: &PacketInfo) -> u8 {
        self.counters.in_packets += 1;
        self.counters.in_bytes += u64::from(p.len);
        self.c.in_dscp
    }

    fn out(&mut self, p: &PacketInfo) -> u8 {
        self.counters.out_packets += 1;
        self.counters.out_bytes += u64::from(p.len);
        self.c.out_dscp
    }

    /// Its counters for the stats line (stats.rs), by name.
    pub fn counter_values(&self) -> Vec<(&'static str, u64)> {
        let c = self.counters;
        vec![
            ("in", c.in_packets),
            ("in_bytes", c.in_bytes),
            ("out", c.out_packets),
            ("out_bytes", c.out_bytes),
            ("retrans_protected", c.retrans_protected),
            ("retrans_seen", c.retrans_seen),
            ("allocations", c.allocations),
            ("pool_spent", c.pool_spent),
            ("acks", c.acks),
            ("flows", c.flows),
        ]
    }
}

/// The TB marker: one pool for every packet of the direction, refilled to `pool_bytes` at every
/// boundary k*T (from the first packet), spent first come first served.
pub struct TokenMarker {
    c: TokenMarkerConfig,
    tokens: u64,
    next_refill: Option<u64>,
    pub counts: TokenCounts,
}

/// A TB marker's counters: packets and bytes IN and OUT, refills of its pool, tokens spent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokenCounts {
    pub in_packets: u64,
    pub in_bytes: u64,
    pub out_packets: u64,
    pub out_bytes: u64,
    pub refills: u64,
    pub pool_spent: u64,
}

impl<H> EdgeFunction<H> for TokenMarker {
    fn apply(&mut self, mut pkt: Queued<H>, now: u64) -> Step<H> {
        let dscp = self.mark(&pkt.info, now);
        pkt.info.set_dscp(dscp);
        Step::Next(pkt)
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let c = self.counts;
        vec![
            ("in", c.in_packets),
            ("in_bytes", c.in_bytes),
            ("out", c.out_packets),
            ("out_bytes", c.out_bytes),
            ("refills", c.refills),
            ("pool_spent", c.pool_spent),
        ]
    }
}

impl TokenMarker {
    /// IN (true) if the pool holds the packet's length in tokens.
    pub fn mark(&mut self, p: &PacketInfo, now: u64) -> u8 {
        let TokenCounts { in_packets, in_bytes, out_packets, out_bytes, refills, pool_spent } = &mut self.counts;
        let t = self.c.interval_us * 1000;
        match self.next_refill {
            None => {
                self.tokens = self.c.pool_bytes;
                self.next_refill = Some(now + t);
                *refills += 1;
            }
            Some(next) if now >= next => {
                self.tokens = self.c.pool_bytes;
                self.next_refill = Some(next + (now - next) / t * t + t);
                *refills += 1;
            }
            _ => {}
        }
        let len = u64::from(p.len);
        if self.tokens >= len {
            self.tokens -= len;
            *in_packets += 1;
            *in_bytes += len;
            *pool_spent += len;
            self.c.in_dscp
        } else {
            *out_packets += 1;
            *out_bytes += len;
            self.c.out_dscp
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::TcpInfo;

    const MS: u64 = 1_000_000;

    fn tcpf(json: &str) -> Tcpf {
        let c: TcpfConfig = serde_json::from_str(&crate::testkit::params("tcpf", json)).unwrap();
        c.marker().unwrap()
    }

    /// A data packet of flow `f` (source 10.0.0.f, port 1000 + f) with `payload` bytes at `seq`.
    fn data(f: u32, seq: u32, payload: u32) -> PacketInfo {
        PacketInfo::new(payload + 40, 0, u64::from(f))
            .with_addresses(6, 0x0a00_0000 + f, 0x0b00_0001, Some((1000 + f as u16, 80)))
            .with_tcp(TcpInfo { seq, ack: 1, flags: TCP_ACK, payload })
    }

    fn ack(f: u32, ack: u32) -> PacketInfo {
        PacketInfo::new(40, 0, 0)
            .with_addresses(6, 0x0b00_0001, 0x0a00_0000 + f, Some((80, 1000 + f as u16)))
            .with_tcp(TcpInfo { seq: 1, ack, flags: TCP_ACK, payload: 0 })
    }

    const IN: u8 = 10;

    /// A window-limited sender: every `rtt`, `window` packets of 1000 bytes back to back (1 us
    /// apart) from `start`, ACKed at once. Returns the marks of the packets sent in [from, to).
    fn steady(m: &mut Tcpf, f: u32, window: u32, rtt: u64, until: u64, next: &mut u32) -> Vec<(u64, u8)> {
        let mut marks = Vec::new();
        let mut t = 0;
        while t < until {
            for k in 0..window {
                let at = t + u64::from(k) * 1000 + u64::from(f);
                marks.push((at, m.mark(&data(f, *next, 1000), at)));
                *next = next.wrapping_add(1000);
            }
            m.observe(&ack(f, *next), t + rtt / 2);
            t += rtt;
        }
        marks
    }

    #[test]
    fn a_tiny_flow_is_always_in() {
        // A flow of 1-2 packets at irregular gaps of 20-350 ms (a window of at most 2000 bytes,
        // below 4 * 1460), from its first packet on, next to a big flow that would take the whole
        // pool (40 packets per 100 ms: 160 KB per 400 ms against a 100 KB pool).
        let mut m = tcpf(r#"{"pool_bytes": 100000}"#);
        let (mut s_tiny, mut s_big) = (0u32, 0u32);
        let (mut tiny, mut big) = (Vec::new(), Vec::new());
        let mut next_tiny = 3 * MS;
        let mut lcg = 12345u64;
        for round in 0..60u64 {
            let t = round * 100 * MS;
            for k in 0..40u64 {
                big.push(m.mark(&data(2, s_big, 1000), t + k * 2 * MS));
                s_big = s_big.wrapping_add(1000);
            }
            m.observe(&ack(2, s_big), t + 90 * MS);
            while next_tiny < t + 100 * MS {
                lcg = lcg.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                for j in 0..1 + (lcg >> 40) % 2 {
                    tiny.push(m.mark(&data(1, s_tiny, 1000), next_tiny + j));
                    s_tiny = s_tiny.wrapping_add(1000);
                }
                m.observe(&ack(1, s_tiny), next_tiny + 30 * MS);
                next_tiny += (20 + (lcg >> 33) % 331) * MS;
            }
        }
        assert!(tiny.len() > 30);
        assert!(tiny.iter().all(|d| *d == IN), "{tiny:?}");
        // The big flow got the rest: some IN, some OUT.
        let big_in = big.iter().filter(|d| **d == IN).count();
        assert!(big_in > 0 && big_in < big.len());
        assert!(m.flows[&(0x0a00_0001, 0x0b00_0001, 1001, 80)].w.unwrap() < 4.0 * 1460.0);
    }

    #[test]
    fn a_retransmission_is_in_under_tcpf_and_may_be_out_under_tcpf_o() {
        for protect in [true, false] {
            let mut m = tcpf(&format!(r#"{{"pool_bytes": 1000, "protect_retransmissions": {protect}}}"#));
            let mut next = 0;
            steady(&mut m, 1, 20, 100 * MS, 1000 * MS, &mut next);
            // The flow is established (not tiny) and has spent its tokens.
            let k = (0x0a00_0001, 0x0b00_0001, 1001, 80);
            m.flows.get_mut(&k).unwrap().in_count = 0;
            let t = 1000 * MS + 10;
            let rtx = m.mark(&data(1, 5000, 1000), t);
            let new = m.mark(&data(1, next, 1000), t + 1);
            assert_eq!(new, 12, "no tokens: new data is OUT");
            if protect {
                assert_eq!(rtx, IN);
                assert_eq!(m.counters.retrans_protected, 1);
            } else {
                assert_eq!(rtx, 12, "TCPF(O) marks a retransmission like any packet");
                assert_eq!((m.counters.retrans_protected, m.counters.retrans_seen), (0, 1));
            }
            // A SYN sent again is a retransmission (it takes a sequence number); a pure ACK is not.
            let syn = |seq| {
                let p = data(7, seq, 0);
                p.with_tcp(TcpInfo { flags: 0x02, ..p.tcp.unwrap() })
            };
            m.mark(&syn(100), t + 2);
            m.mark(&syn(100), t + 3);
            m.mark(&data(7, 101, 0), t + 4);
            assert_eq!(m.counters.retrans_seen, 2);
        }
    }

    #[test]
    fn in_packets_of_a_large_flow_are_spread_through_its_window() {
        // One flow of 40 packets of 1040 bytes per 100 ms: E = 160 packets per 400 ms, a pool of
        // 40 packets: in_count = 41600 bytes and S = 160/40 - 1 = 3: IN, OUT, OUT, OUT, IN...
        let mut m = tcpf(r#"{"pool_bytes": 41600}"#);
        let mut next = 0;
        let marks = steady(&mut m, 1, 40, 100 * MS, 4000 * MS, &mut next);
        let late: Vec<u8> = marks.iter().filter(|(t, _)| *t >= 2000 * MS).map(|m| m.1).collect();
        let f = &m.flows[&(0x0a00_0001, 0x0b00_0001, 1001, 80)];
        assert!((f.s - 3.0).abs() < 0.01, "S = {}", f.s);
        // Every interval: 40 IN (the tokens) of 160, never two IN in a row, and the gaps of OUT
        // between INs are 3 packets (the last IN of a window may be followed by the next window).
        for interval in late.chunks(160) {
            let ins: Vec<usize> = interval.iter().enumerate().filter(|(_, d)| **d == IN).map(|(i, _)| i).collect();
            assert_eq!(ins.len(), 40, "{interval:?}");
            assert!(ins.windows(2).all(|w| w[1] - w[0] == 4), "{ins:?}");
        }
        // Not bunched: within each 40-packet window the INs cover it from start to end.
        for window in late.chunks(40) {
            let ins: Vec<usize> = window.iter().enumerate().filter(|(_, d)| **d == IN).map(|(i, _)| i).collect();
            assert!(ins.first().unwrap() < &4 && ins.last().unwrap() >= &36, "{ins:?}");
        }
    }

    #[test]
    fn the_pool_is_m_per_interval_over_time() {
        // Ten flows of different windows, two of them tiny, and a pool far below their sum. The
        // tokens spent by the end of interval k are at most (k + 1) M plus the debt still owed,
        // which the next pools repay; once the flows are established no interval takes more
        // than M plus one packet per flow (Algorithm 2 tests in_count(i) > 0, not >= the length).
        let pool = 100_000u64;
        let mut m = tcpf(&format!(r#"{{"pool_bytes": {pool}}}"#));
        let mut seqs = [0u32; 10];
        let mut per_interval: HashMap<u64, u64> = HashMap::new();
        let mut owed_at: HashMap<u64, i64> = HashMap::new();
        let mut t = 0;
        while t < 8000 * MS {
            for f in 0..10u32 {
                // A window of 3f + 1 packets: each packet's ACK comes back a window later.
                let window = (f * 3 + 1) * 1000;
                for _ in 0..=(f * 3) {
                    let seq = seqs[f as usize];
                    if seq >= window {
                        m.observe(&ack(f + 1, seq - window + 1000), t);
                    }
                    seqs[f as usize] = seq.wrapping_add(1000);
                    let before = m.counters.pool_spent;
                    m.mark(&data(f + 1, seq, 1000), t);
                    *per_interval.entry(t / (400 * MS)).or_default() += m.counters.pool_spent - before;
                    let iv = m.interval;
                    owed_at.insert(t / (400 * MS), m.debt + (iv.over - (iv.pool - iv.allocated)).max(0));
                    t += 500_000;
                }
            }
        }
        let n = per_interval.len() as u64;
        assert!(n > 10);
        let mut total = 0;
        for k in 0..n {
            total += per_interval[&k];
            assert!(total as i64 <= ((k + 1) * pool) as i64 + owed_at[&k], "interval {k}: {total}");
            if k >= 3 {
                assert!(per_interval[&k] <= pool + 10 * 1040, "interval {k}: {}", per_interval[&k]);
            }
        }
        assert!((2..n - 1).all(|k| per_interval[&k] > pool * 7 / 10), "the pool is used: {per_interval:?}");
    }

    fn flow(w: f64, e: f64) -> Flow {
        Flow {
            snd_max: 0,
            snd_una: 0,
            w: Some(w),
            e: Some(e),
            sent: e as u64, // with e_gain 0.5 the estimate stays at e
            in_count: 0,
            s: 0.0,
            count: 0.0,
            protected_tiny: false,
            fin_end: None,
            last_seen: 0,
        }
    }

    #[test]
    fn max_min_split_against_a_hand_computation() {
        // 100 over demands 10, 20, 50, 80: 10 and 20 met, 70 left for two: 35 each.
        assert_eq!(max_min_alloc(100, &[50, 10, 80, 20]), vec![35, 10, 35, 20]);
        // Enough for all: every demand met.
        assert_eq!(max_min_alloc(100, &[30, 20]), vec![30, 20]);
        // Equal demands above the share: equal split; whole bytes, never more than the capacity.
        assert_eq!(max_min_alloc(90, &[50, 50, 50]), vec![30, 30, 30]);
        assert_eq!(max_min_alloc(100, &[50, 50, 50]), vec![33, 33, 33]);
        // The marker's allocation (step d.2): pool 100 KB, one tiny flow with E = 10 KB, three
        // others with E = 20, 60, 100 KB: available 90 KB -> 20, 35, 35 KB.
        let mut m = tcpf(r#"{"pool_bytes": 100000}"#);
        for (i, e) in [10_000.0, 20_000.0, 60_000.0, 100_000.0].iter().enumerate() {
            let w = if i == 0 { 1000.0 } else { 50_000.0 };
            m.flows.insert((i as u32 + 1, 0, 1, 1), flow(w, *e));
        }
        m.allocate(1);
        let got: Vec<(i64, f64, bool)> = (1..=4)
            .map(|i| {
                let f = &m.flows[&(i, 0, 1, 1)];
                (f.in_count, f.s, f.protected_tiny)
            })
            .collect();
        assert_eq!(got[0], (10_000, 0.0, true), "(d.1): a tiny flow gets E(i), S = 0");
        assert_eq!(got[1], (20_000, 0.0, false));
        assert_eq!(got[2].0, 35_000);
        assert!((got[2].1 - (60.0 / 35.0 - 1.0)).abs() < 1e-9);
        assert_eq!(got[3].0, 35_000);
        assert_eq!((m.interval.pool, m.interval.allocated), (100_000, 100_000));
        // Step (c): tiny flows alone take more than the pool: they share it, the others get 0.
        let mut m = tcpf(r#"{"pool_bytes": 15000}"#);
        for (i, e) in [(1u32, 10_000.0), (2, 20_000.0), (3, 5_000.0)] {
            let w = if i == 3 { 50_000.0 } else { 1000.0 };
            m.flows.insert((i, 0, 1, 1), flow(w, e));
        }
        m.allocate(1);
        let got: Vec<(i64, bool)> =
            (1..=3).map(|i| (m.flows[&(i, 0, 1, 1)].in_count, m.flows[&(i, 0, 1, 1)].protected_tiny)).collect();
        assert_eq!(got, vec![(7500, false), (7500, false), (0, false)]);
        assert!((m.flows[&(2, 0, 1, 1)].s - (20.0 / 7.5 - 1.0)).abs() < 1e-9);
    }

    #[test]
    fn the_token_marker_refills_exactly_each_interval() {
        let json = crate::testkit::params("token_marker", r#"{"interval_us": 400000, "pool_bytes": 5000}"#);
        let c: TokenMarkerConfig = serde_json::from_str(&json).unwrap();
        let mut tb = c.marker().unwrap();
        // 1000-byte packets every 10 ms from t = 7 ms: 5 IN per interval, then OUT until the
        // boundary at 7 + 400 k ms, whatever the flow (no TCP awareness).
        let mut per_interval = vec![0u64; 10];
        for k in 0..400u64 {
            let t = 7 * MS + k * 10 * MS;
            let p = data(1 + (k % 3) as u32, 0, 960);
            if tb.mark(&p, t) == IN {
                per_interval[((t - 7 * MS) / (400 * MS)) as usize] += 1;
            }
        }
        assert_eq!(per_interval, vec![5; 10]);
        // Idle for 1.3 s: one refill, to the pool and no more.
        let t = 7 * MS + 5300 * MS;
        let marks: Vec<u8> = (0..7).map(|i| tb.mark(&data(1, 0, 960), t + i)).collect();
        assert_eq!(marks, vec![IN, IN, IN, IN, IN, 12, 12]);
        // Tokens left at a boundary are not carried over: one packet in the next interval, seven
        // in the one after, of which five are IN.
        assert_eq!(tb.mark(&data(1, 0, 960), 7 * MS + 5600 * MS), IN);
        let t = 7 * MS + 6000 * MS;
        let marks: Vec<u8> = (0..7).map(|i| tb.mark(&data(2, 0, 960), t + i)).collect();
        assert_eq!(marks, vec![IN, IN, IN, IN, IN, 12, 12]);
        let TokenCounts { in_packets, refills, pool_spent, .. } = tb.counts;
        assert_eq!((in_packets, refills, pool_spent), (61, 13, 61_000));
    }

    #[test]
    fn flows_are_remembered_through_a_backed_off_timeout_and_end_on_rst_or_fin() {
        let mut m = tcpf(r#"{"pool_bytes": 1000}"#);
        assert_eq!(m.memory_us(), MIN_MEMORY_US);
        let mut next = 0;
        steady(&mut m, 1, 20, 100 * MS, 1000 * MS, &mut next);
        // Silent 1 s then 2 s (a timeout backed off once): the resend of the first unACKed
        // segment is still a retransmission, so IN, and so is the go-back-N after it.
        let k = (0x0a00_0001, 0x0b00_0001, 1001, 80);
        let una = m.flows[&k].snd_una;
        for i in 0..5 {
            m.mark(&data(1, una + i * 1000, 1000), 1000 * MS + u64::from(i));
        }
        assert_eq!(m.mark(&data(1, una, 1000), 2000 * MS), IN);
        assert_eq!(m.mark(&data(1, una, 1000), 4000 * MS), IN);
        assert_eq!(m.mark(&data(1, una + 1000, 1000), 4100 * MS), IN);
        assert_eq!(m.counters.retrans_protected, 3);
        // Silent past the maximum RTO: forgotten at the next boundary.
        m.mark(&data(2, 0, 1000), 4000 * MS + 130_000 * MS);
        assert!(!m.flows.contains_key(&k) && m.flows.len() == 1);
        // A reset ends a flow; so does the ACK of its FIN.
        let fin = |seq| {
            let p = data(3, seq, 0);
            p.with_tcp(TcpInfo { flags: TCP_FIN | TCP_ACK, ..p.tcp.unwrap() })
        };
        let t = 135_000 * MS;
        m.mark(&data(3, 0, 1000), t);
        m.mark(&fin(1000), t + 1);
        m.observe(&ack(3, 1000), t + 2);
        assert!(m.flows.contains_key(&(0x0a00_0003, 0x0b00_0001, 1003, 80)), "FIN not ACKed yet");
        m.observe(&ack(3, 1001), t + 3);
        assert!(!m.flows.contains_key(&(0x0a00_0003, 0x0b00_0001, 1003, 80)));
        let rst = data(2, 1000, 0);
        m.mark(&rst.with_tcp(TcpInfo { flags: TCP_RST, ..rst.tcp.unwrap() }), t + 4);
        assert!(m.flows.is_empty());
    }

    #[test]
    fn algorithm_2_tests_tokens_above_zero_and_the_excess_is_a_debt() {
        // An established flow (not tiny) with 500 bytes of tokens left: Algorithm 2 (c) asks
        // in_count(i) > 0, so a 1040-byte packet is IN and takes them to -540; the next is OUT.
        let mut m = tcpf(r#"{"pool_bytes": 100000}"#);
        let mut next = 0;
        steady(&mut m, 1, 20, 100 * MS, 1000 * MS, &mut next);
        let k = (0x0a00_0001, 0x0b00_0001, 1001, 80);
        let f = m.flows.get_mut(&k).unwrap();
        assert!(!f.protected_tiny && f.w.unwrap() > 4.0 * 1460.0);
        (f.in_count, f.s, f.count) = (500, 0.0, 0.0);
        let over = m.interval.over;
        assert_eq!(m.mark(&data(1, next, 1000), 1000 * MS + 5), IN);
        assert_eq!(m.mark(&data(1, next + 1000, 1000), 1000 * MS + 6), 12);
        assert_eq!((m.flows[&k].in_count, m.interval.over - over), (-540, 540));
    }

    #[test]
    fn bad_parameters_are_named() {
        for (json, want) in [
            (r#"{"interval_us": 0}"#, "interval_us: must be above 0"),
            (r#"{"pool_bytes": 0}"#, "pool_bytes: must be above 0"),
            (r#"{"w_gain": 0}"#, "w_gain: must be in (0, 1]"),
            (r#"{"e_gain": 1.5}"#, "e_gain: must be in (0, 1]"),
            (r#"{"in_dscp": 12}"#, "out_dscp: must differ"),
            (r#"{"mss_bytes": 0}"#, "mss_bytes: must be above 0"),
            (r#"{"flow_idle_us": 0}"#, "flow_idle_us: at least 120000000"),
            (r#"{"flow_idle_us": 800000}"#, "flow_idle_us: at least 120000000"),
        ] {
            let c: TcpfConfig = serde_json::from_str(&crate::testkit::params("tcpf", json)).unwrap();
            let e = c.marker().err().unwrap();
            assert!(e.starts_with(want), "{json}: {e}");
        }
    }
}
