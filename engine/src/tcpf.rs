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

/// SYN and FIN take one sequence number each.
const TCP_SYN_FIN: u8 = 0x03;
use crate::stats::EdgeCounters;
use serde::Deserialize;
use std::collections::HashMap;

fn default_interval_us() -> u64 {
    400_000
}
fn default_pool_bytes() -> u64 {
    300_000
}
fn default_tiny_window() -> u32 {
    4
}
fn default_mss() -> u32 {
    1460
}
fn default_in_dscp() -> u8 {
    crate::packet::DSCP_AF11
}
fn default_out_dscp() -> u8 {
    crate::packet::DSCP_AF12
}
fn yes() -> bool {
    true
}
fn default_w_gain() -> f64 {
    0.125
}
fn default_e_gain() -> f64 {
    0.5
}
fn default_flow_idle_us() -> u64 {
    800_000
}

/// `{"kind": "tcpf", "interval_us": T, "pool_bytes": M, "tiny_window": K, "mss_bytes": MSS,
/// "in_dscp": 10, "out_dscp": 12, "protect_retransmissions": true,
/// "retransmissions_use_tokens": true, "w_gain": 0.125, "e_gain": 0.5, "flow_idle_us": 800000}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TcpfConfig {
    #[serde(default = "default_interval_us")]
    pub interval_us: u64,
    #[serde(default = "default_pool_bytes")]
    pub pool_bytes: u64,
    /// K: a flow whose window estimate is below K * MSS is tiny.
    #[serde(default = "default_tiny_window")]
    pub tiny_window: u32,
    #[serde(default = "default_mss")]
    pub mss_bytes: u32,
    #[serde(default = "default_in_dscp")]
    pub in_dscp: u8,
    #[serde(default = "default_out_dscp")]
    pub out_dscp: u8,
    /// Algorithm 2 (b): a retransmission is IN. False: TCPF(O).
    #[serde(default = "yes")]
    pub protect_retransmissions: bool,
    /// A protected retransmission is charged to the flow's tokens when it has enough (it is IN
    /// in any case).
    #[serde(default = "yes")]
    pub retransmissions_use_tokens: bool,
    /// EWMA gain of W(i) per sample (one sample per data packet once an ACK was seen).
    #[serde(default = "default_w_gain")]
    pub w_gain: f64,
    /// EWMA gain of E(i) per interval.
    #[serde(default = "default_e_gain")]
    pub e_gain: f64,
    /// A flow with no packet and no ACK for this long is forgotten.
    #[serde(default = "default_flow_idle_us")]
    pub flow_idle_us: u64,
}

/// `{"kind": "token_marker", "interval_us": T, "pool_bytes": M, "in_dscp": 10, "out_dscp": 12}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenMarkerConfig {
    #[serde(default = "default_interval_us")]
    pub interval_us: u64,
    #[serde(default = "default_pool_bytes")]
    pub pool_bytes: u64,
    #[serde(default = "default_in_dscp")]
    pub in_dscp: u8,
    #[serde(default = "default_out_dscp")]
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
    pub fn build(&self) -> Result<Tcpf, String> {
        check_common(self.interval_us, self.pool_bytes, self.in_dscp, self.out_dscp)?;
        if self.mss_bytes == 0 {
            return Err("mss_bytes: must be above 0".into());
        }
        for (field, g) in [("w_gain", self.w_gain), ("e_gain", self.e_gain)] {
            if !(g > 0.0 && g <= 1.0) {
                return Err(format!("{field}: must be in (0, 1] (got {g})"));
            }
        }
        if self.flow_idle_us == 0 {
            return Err("flow_idle_us: must be above 0".into());
        }
        Ok(Tcpf { c: self.clone(), flows: HashMap::new(), next_alloc: None, counters: TcpfCounters::default() })
    }
}

impl TokenMarkerConfig {
    pub fn build(&self) -> Result<TokenMarker, String> {
        check_common(self.interval_us, self.pool_bytes, self.in_dscp, self.out_dscp)?;
        Ok(TokenMarker { c: self.clone(), tokens: 0, next_refill: None })
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

/// Per-flow state of Algorithms 1 and 2 (bytes unless said otherwise).
#[derive(Debug, Clone)]
pub struct Flow {
    /// The highest sequence sent: max of seq + payload (+ 1 for SYN or FIN) over the flow's packets.
    pub snd_max: u32,
    /// The highest ACK seen in the reverse direction.
    pub ack_max: Option<u32>,
    /// W(i), once an ACK was seen (till then the flow counts as tiny).
    pub w: Option<f64>,
    /// E(i), once the flow went through an allocation.
    pub e: Option<f64>,
    /// Bytes sent since the last allocation.
    pub sent: u64,
    /// in_count(i): IN tokens left for this interval.
    pub in_count: i64,
    /// S(i): OUT packets between two IN packets.
    pub s: f64,
    /// count(i): packets since the last IN, less the S(i) of each IN.
    pub count: f64,
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

pub struct Tcpf {
    c: TcpfConfig,
    pub flows: HashMap<FlowKey, Flow>,
    /// The next allocation boundary (ns); None before the first packet.
    next_alloc: Option<u64>,
    pub counters: TcpfCounters,
}

/// Max-min fair (water-filling) split of `capacity` over `demands`: every demand below the fair
/// share is met, the rest share what is left equally.
pub fn max_min_alloc(capacity: f64, demands: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..demands.len()).collect();
    order.sort_by(|a, b| demands[*a].total_cmp(&demands[*b]));
    let mut out = vec![0.0; demands.len()];
    let mut left = capacity.max(0.0);
    for (k, &i) in order.iter().enumerate() {
        let share = left / (order.len() - k) as f64;
        out[i] = demands[i].max(0.0).min(share);
        left -= out[i];
    }
    out
}

impl Tcpf {
    fn interval_ns(&self) -> u64 {
        self.c.interval_us * 1000
    }

    /// Run every allocation due at or before `now` (boundaries at exact multiples of T from the
    /// first packet). A long idle gap runs only the last one: E(i) of the flows that survive the
    /// idle expiry has decayed by (1 - e_gain) per missed interval.
    fn catch_up(&mut self, now: u64) {
        let t = self.interval_ns();
        let next = *self.next_alloc.get_or_insert(now + t);
        if now < next {
            return;
        }
        let missed = (now - next) / t; // whole intervals after the first due boundary
        for f in self.flows.values_mut() {
            if let Some(e) = f.e.as_mut() {
                *e *= (1.0 - self.c.e_gain).powi(missed.min(1000) as i32);
            }
        }
        let at = next + missed * t;
        self.allocate(at);
        self.next_alloc = Some(at + t);
    }

    /// Algorithm 1 at time `now`.
    pub fn allocate(&mut self, now: u64) {
        let idle = self.c.flow_idle_us * 1000;
        self.flows.retain(|_, f| now.saturating_sub(f.last_seen) < idle);
        let g = self.c.e_gain;
        for f in self.flows.values_mut() {
            // A new flow's first estimate is what it sent so far (reading notes 2.1.c item 3).
            let sample = f.sent as f64;
            f.e = Some(match f.e {
                None => sample,
                Some(e) => (1.0 - g) * e + g * sample,
            });
            f.sent = 0;
        }
        let tiny_below = f64::from(self.c.tiny_window) * f64::from(self.c.mss_bytes);
        let m = self.c.pool_bytes as f64;
        let keys: Vec<FlowKey> = self.flows.keys().copied().collect();
        let is_tiny = |f: &Flow| f.w.is_none_or(|w| w < tiny_below);
        // Step I.
        let mut available = m;
        let (mut tiny, mut other) = (Vec::new(), Vec::new());
        for k in &keys {
            let f = &self.flows[k];
            if is_tiny(f) {
                available -= f.e.unwrap_or(0.0);
                tiny.push(*k);
            } else {
                other.push(*k);
            }
        }
        // Step II: (c) the tiny flows share M max-min, the others get nothing; (d) the tiny
        // flows get their estimate, the others share what is left max-min.
        let (shared, pool, rest) = if available <= 0.0 { (&tiny, m, &other) } else { (&other, available, &tiny) };
        let demands: Vec<f64> = shared.iter().map(|k| self.flows[k].e.unwrap_or(0.0)).collect();
        let alloc = max_min_alloc(pool, &demands);
        for (k, a) in shared.iter().zip(alloc) {
            let f = self.flows.get_mut(k).unwrap();
            Self::give(f, a);
        }
        for k in rest {
            let f = self.flows.get_mut(k).unwrap();
            let a = if available <= 0.0 { 0.0 } else { f.e.unwrap_or(0.0) };
            Self::give(f, a);
        }
        self.counters.allocations += 1;
        self.counters.flows = self.flows.len() as u64;
    }

    /// in_count(i) = a (whole bytes, rounded down so the allocations never add up to more than
    /// the pool); S(i) = E(i) / in_count(i) - 1 packets (reading notes 2.1.c item 1: bytes over
    /// bytes, so packets per IN packet for equal sizes), 0 when the allocation covers E(i).
    fn give(f: &mut Flow, a: f64) {
        f.in_count = a.floor() as i64;
        let e = f.e.unwrap_or(0.0);
        f.s = if f.in_count > 0 { (e / f.in_count as f64 - 1.0).max(0.0) } else { 0.0 };
    }

    /// A packet arriving on any link of this engine: if it ACKs a tracked flow, note the ACK.
    pub fn observe(&mut self, p: &PacketInfo, now: u64) {
        let (Some(tcp), Some((src, dst, sport, dport))) = (p.tcp, key(p)) else { return };
        if tcp.flags & TCP_ACK == 0 {
            return;
        }
        if let Some(f) = self.flows.get_mut(&(dst, src, dport, sport)) {
            if f.ack_max.is_none_or(|a| seq_lt(a, tcp.ack)) {
                f.ack_max = Some(tcp.ack);
            }
            f.last_seen = now;
            self.counters.acks += 1;
        }
    }

    /// Algorithm 2: the DSCP of a packet on the marked direction.
    pub fn mark(&mut self, p: &PacketInfo, now: u64) -> u8 {
        self.catch_up(now);
        let len = i64::from(p.len);
        let (Some(tcp), Some(k)) = (p.tcp, key(p)) else {
            return self.out(p); // not TCP (or its header was not copied): no tokens
        };
        let f = self.flows.entry(k).or_insert_with(|| Flow {
            snd_max: tcp.seq,
            ack_max: None,
            w: None,
            e: None,
            sent: 0,
            in_count: 0,
            s: 0.0,
            count: 0.0,
            last_seen: now,
        });
        f.last_seen = now;
        f.sent += u64::from(p.len);
        let length = tcp.payload + u32::from(tcp.flags & TCP_SYN_FIN != 0);
        let end = tcp.seq.wrapping_add(length);
        let retransmission = length > 0 && seq_lt(tcp.seq, f.snd_max);
        if seq_lt(f.snd_max, end) {
            f.snd_max = end;
        }
        if let Some(ack) = f.ack_max {
            // W(i): the running average of highest seq sent - highest ACK seen.
            let sample = f64::from(f.snd_max.wrapping_sub(ack) as i32).max(0.0);
            let g = self.c.w_gain;
            f.w = Some(f.w.map_or(sample, |w| (1.0 - g) * w + g * sample));
        }
        self.counters.flows = self.flows.len() as u64;
        let f = self.flows.get_mut(&k).unwrap();
        if retransmission {
            self.counters.retrans_seen += 1;
            if self.c.protect_retransmissions {
                // (b): IN whatever the tokens; charged to them when it can be (2.1.c item 2).
                if self.c.retransmissions_use_tokens && f.in_count >= len {
                    f.in_count -= len;
                    self.counters.pool_spent += len as u64;
                }
                self.counters.retrans_protected += 1;
                return self.inn(p);
            }
        }
        // (c): tokens left (a packet takes its length in tokens, so the pool is a hard limit).
        if f.in_count >= len {
            if f.count >= f.s {
                f.count -= f.s;
                f.in_count -= len;
                self.counters.pool_spent += len as u64;
                return self.inn(p);
            }
            f.count += 1.0;
        }
        self.out(p)
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

    pub fn edge_counters(&self) -> EdgeCounters {
        EdgeCounters::Tcpf(self.counters)
    }
}

/// The TB marker: one pool for every packet of the direction, refilled to `pool_bytes` at every
/// boundary k*T (from the first packet), spent first come first served.
pub struct TokenMarker {
    c: TokenMarkerConfig,
    tokens: u64,
    next_refill: Option<u64>,
}

impl TokenMarker {
    /// IN (true) if the pool holds the packet's length in tokens.
    pub fn mark(&mut self, p: &PacketInfo, now: u64, counters: &mut EdgeCounters) -> u8 {
        let EdgeCounters::TokenMarker { in_packets, in_bytes, out_packets, out_bytes, refills, pool_spent } = counters
        else {
            unreachable!("a token marker's counters are its own")
        };
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
        let c: TcpfConfig = serde_json::from_str(json).unwrap();
        c.build().unwrap()
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
        // A flow of 2 packets per 100 ms RTT (W = 2000 < 4 * 1460) next to a big one that would
        // take the whole pool (40 packets per RTT: 160 KB per 400 ms against a 100 KB pool).
        let mut m = tcpf(r#"{"pool_bytes": 100000}"#);
        let (mut s_tiny, mut s_big) = (0u32, 0u32);
        let mut tiny = Vec::new();
        let mut big = Vec::new();
        for round in 0..40u64 {
            let t = round * 100 * MS;
            for k in 0..40u64 {
                big.push(m.mark(&data(2, s_big, 1000), t + k * 10_000));
                s_big = s_big.wrapping_add(1000);
                if k < 2 {
                    tiny.push((t, m.mark(&data(1, s_tiny, 1000), t + k * 10_000 + 1)));
                    s_tiny = s_tiny.wrapping_add(1000);
                }
            }
            m.observe(&ack(1, s_tiny), t + 50 * MS);
            m.observe(&ack(2, s_big), t + 50 * MS);
        }
        // After its first allocation (400 ms) every packet of the tiny flow is IN.
        assert!(tiny.iter().filter(|(t, _)| *t >= 400 * MS).all(|(_, d)| *d == IN), "{tiny:?}");
        // The big flow got the rest: some IN, some OUT.
        let big_in = big.iter().filter(|d| **d == IN).count();
        assert!(big_in > 0 && big_in < big.len());
        assert!(m.flows[&(0x0a00_0001, 0x0b00_0001, 1001, 80)].w.unwrap() < 4.0 * 1460.0);
    }

    #[test]
    fn a_retransmission_is_in_under_tcpf_and_may_be_out_under_tcpf_o() {
        for protect in [true, false] {
            // A pool too small for anything but the tiny flows: the big flow gets no tokens.
            let mut m = tcpf(&format!(r#"{{"pool_bytes": 1000, "protect_retransmissions": {protect}}}"#));
            let mut next = 0;
            steady(&mut m, 1, 20, 100 * MS, 1000 * MS, &mut next);
            // A retransmission of the first window's segment, then new data.
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
            assert_eq!(m.mark(&syn(100), t + 2), 12);
            assert_eq!(m.mark(&syn(100), t + 3), if protect { IN } else { 12 });
            assert_eq!(m.mark(&data(7, 101, 0), t + 4), 12);
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
    fn the_pool_is_never_overspent_in_an_interval() {
        // Ten flows of different windows and a pool far below their sum, with retransmissions
        // not charged (they are IN on top of the pool, so they are left out of the sum).
        let mut m = tcpf(r#"{"pool_bytes": 50000}"#);
        let mut seqs = [0u32; 10];
        let mut per_interval: HashMap<u64, u64> = HashMap::new();
        let mut t = 0;
        while t < 5000 * MS {
            for f in 0..10u32 {
                for _ in 0..=(f * 3) {
                    let p = data(f + 1, seqs[f as usize], 1000);
                    seqs[f as usize] = seqs[f as usize].wrapping_add(1000);
                    if m.mark(&p, t) == IN {
                        *per_interval.entry(t / (400 * MS)).or_default() += u64::from(p.len);
                    }
                    t += 50_000;
                }
                m.observe(&ack(f + 1, seqs[f as usize]), t);
            }
        }
        assert!(per_interval.len() > 5);
        // The first allocation is 400 ms after the first packet (t = 0): intervals align with t.
        for (k, bytes) in &per_interval {
            assert!(*bytes <= 50_000, "interval {k}: {bytes} IN bytes from a pool of 50000");
        }
        assert!(per_interval.values().any(|b| *b > 35_000), "the pool is used: {per_interval:?}");
        assert_eq!(m.counters.pool_spent, per_interval.values().sum::<u64>());
    }

    #[test]
    fn max_min_split_against_a_hand_computation() {
        // 100 over demands 10, 20, 50, 80: 10 and 20 met, 70 left for two: 35 each.
        assert_eq!(max_min_alloc(100.0, &[50.0, 10.0, 80.0, 20.0]), vec![35.0, 10.0, 35.0, 20.0]);
        // Enough for all: every demand met.
        assert_eq!(max_min_alloc(100.0, &[30.0, 20.0]), vec![30.0, 20.0]);
        // Equal demands above the share: equal split.
        assert_eq!(max_min_alloc(90.0, &[50.0, 50.0, 50.0]), vec![30.0, 30.0, 30.0]);
        // The marker's allocation (step d.2): pool 100 KB, one tiny flow with E = 10 KB, three
        // others with E = 20, 60, 100 KB: available 90 KB -> 20, 35, 35 KB.
        let mut m = tcpf(r#"{"pool_bytes": 100000}"#);
        let e = [10_000.0, 20_000.0, 60_000.0, 100_000.0];
        for (i, e) in e.iter().enumerate() {
            let k = (i as u32 + 1, 0, 1, 1);
            let w = if i == 0 { 1000.0 } else { 50_000.0 };
            m.flows.insert(
                k,
                Flow {
                    snd_max: 0,
                    ack_max: Some(0),
                    w: Some(w),
                    e: Some(*e),
                    sent: *e as u64, // with e_gain 0.5 the estimate stays at e
                    in_count: 0,
                    s: 0.0,
                    count: 0.0,
                    last_seen: 0,
                },
            );
        }
        m.allocate(1);
        let got: Vec<(i64, f64)> =
            (1..=4).map(|i| (m.flows[&(i, 0, 1, 1)].in_count, m.flows[&(i, 0, 1, 1)].s)).collect();
        assert_eq!(got[0], (10_000, 0.0));
        assert_eq!(got[1], (20_000, 0.0));
        assert_eq!(got[2].0, 35_000);
        assert!((got[2].1 - (60.0 / 35.0 - 1.0)).abs() < 1e-9);
        assert_eq!(got[3].0, 35_000);
        // Step (c): tiny flows alone take more than the pool: they share it, the others get 0.
        let mut m = tcpf(r#"{"pool_bytes": 15000}"#);
        for (i, e) in [(1u32, 10_000.0), (2, 20_000.0), (3, 5_000.0)] {
            let w = if i == 3 { 50_000.0 } else { 1000.0 };
            m.flows.insert(
                (i, 0, 1, 1),
                Flow {
                    snd_max: 0,
                    ack_max: Some(0),
                    w: Some(w),
                    e: Some(e),
                    sent: e as u64,
                    in_count: 0,
                    s: 0.0,
                    count: 0.0,
                    last_seen: 0,
                },
            );
        }
        m.allocate(1);
        let got: Vec<i64> = (1..=3).map(|i| m.flows[&(i, 0, 1, 1)].in_count).collect();
        assert_eq!(got, vec![7500, 7500, 0]);
        assert!((m.flows[&(2, 0, 1, 1)].s - (20.0 / 7.5 - 1.0)).abs() < 1e-9);
    }

    #[test]
    fn the_token_marker_refills_exactly_each_interval() {
        let c: TokenMarkerConfig = serde_json::from_str(r#"{"interval_us": 400000, "pool_bytes": 5000}"#).unwrap();
        let mut tb = c.build().unwrap();
        let mut counters = EdgeCounters::TokenMarker {
            in_packets: 0,
            in_bytes: 0,
            out_packets: 0,
            out_bytes: 0,
            refills: 0,
            pool_spent: 0,
        };
        // 1000-byte packets every 10 ms from t = 7 ms: 5 IN per interval, then OUT until the
        // boundary at 7 + 400 k ms, whatever the flow (no TCP awareness).
        let mut per_interval = vec![0u64; 10];
        for k in 0..400u64 {
            let t = 7 * MS + k * 10 * MS;
            let p = data(1 + (k % 3) as u32, 0, 960);
            if tb.mark(&p, t, &mut counters) == IN {
                per_interval[((t - 7 * MS) / (400 * MS)) as usize] += 1;
            }
        }
        assert_eq!(per_interval, vec![5; 10]);
        // Idle for 1.3 s: one refill, to the pool and no more.
        let t = 7 * MS + 5300 * MS;
        let marks: Vec<u8> = (0..7).map(|i| tb.mark(&data(1, 0, 960), t + i, &mut counters)).collect();
        assert_eq!(marks, vec![IN, IN, IN, IN, IN, 12, 12]);
        // Tokens left at a boundary are not carried over: one packet in the next interval, seven
        // in the one after, of which five are IN.
        assert_eq!(tb.mark(&data(1, 0, 960), 7 * MS + 5600 * MS, &mut counters), IN);
        let t = 7 * MS + 6000 * MS;
        let marks: Vec<u8> = (0..7).map(|i| tb.mark(&data(2, 0, 960), t + i, &mut counters)).collect();
        assert_eq!(marks, vec![IN, IN, IN, IN, IN, 12, 12]);
        let EdgeCounters::TokenMarker { in_packets, refills, pool_spent, .. } = counters else { panic!() };
        assert_eq!((in_packets, refills, pool_spent), (61, 13, 61_000));
    }

    #[test]
    fn idle_flows_are_forgotten_and_bad_parameters_are_named() {
        let mut m = tcpf(r#"{"flow_idle_us": 800000}"#);
        m.mark(&data(1, 0, 1000), 0);
        m.mark(&data(2, 0, 1000), 0);
        m.mark(&data(2, 1000, 1000), 700 * MS);
        m.mark(&data(2, 2000, 1000), 1300 * MS); // allocation at 1200 ms: flow 1 idle 1.2 s
        assert_eq!(m.flows.len(), 1);
        for (json, want) in [
            (r#"{"interval_us": 0}"#, "interval_us: must be above 0"),
            (r#"{"pool_bytes": 0}"#, "pool_bytes: must be above 0"),
            (r#"{"w_gain": 0}"#, "w_gain: must be in (0, 1]"),
            (r#"{"e_gain": 1.5}"#, "e_gain: must be in (0, 1]"),
            (r#"{"in_dscp": 12}"#, "out_dscp: must differ"),
            (r#"{"mss_bytes": 0}"#, "mss_bytes: must be above 0"),
        ] {
            let c: TcpfConfig = serde_json::from_str(json).unwrap();
            let e = c.build().err().unwrap();
            assert!(e.starts_with(want), "{json}: {e}");
        }
    }
}
