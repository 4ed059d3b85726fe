//! One emulated link direction: edge functions -> random loss -> buffer (policy) -> transmitter
//! at the link rate -> constant propagation delay -> delivery.
//!
//! Time is in nanoseconds on the driver's clock. The schedule is virtual: a transmission
//! starts at max(arrival, end of the previous transmission), computed from those times and
//! never from when the driver happened to wake up, so a late wake-up delays a verdict but
//! never shifts the packets after it. A shaper's releases are on the same virtual schedule.

use crate::config::{Buffer, LinkConfig, PolicyConfig};
use crate::edge::AckObserver;
use crate::edge::{Stage, Step};
use crate::packet::PacketInfo;
use crate::policy::{Cause, DropTailConfig, Dropped, LinkEnv, QueuePolicy, Queued};
use crate::stats::{LinkSnapshot, LinkStats};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

/// The TCP-aware markers of one engine's links. Every packet arriving on any of those links is
/// shown to each of them, so a marker on the data direction sees the ACKs of its flows wherever
/// they cross the same router (for a router link, on the way back to the senders: the reverse
/// direction of the link itself is owned by the router at its other end).
pub struct AckFeed(Vec<Rc<RefCell<dyn AckObserver>>>);

impl AckFeed {
    pub fn of<H>(links: &[Link<H>]) -> AckFeed {
        AckFeed(links.iter().flat_map(|l| l.edge.iter().filter_map(Stage::ack_observer)).collect())
    }

    pub fn observe(&self, info: &PacketInfo, now: u64) {
        for m in &self.0 {
            m.borrow_mut().observe(info, now);
        }
    }
}

/// Why a packet was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropCause {
    /// Refused by the policy on arrival.
    Refused,
    /// Evicted from the queue by the arrival with sequence `by`.
    Evicted { by: u64 },
    /// Lost at random (the loss wrapper).
    Lost,
    /// Out of profile at a policer that drops.
    Policed,
    /// A shaper's buffer was full.
    ShaperFull,
}

/// What became of a packet.
#[derive(Debug)]
pub enum Fate<H> {
    /// Release it now; `at` is when the schedule said it reaches the far end. `info.dscp` is
    /// the DSCP it leaves with.
    Deliver { handle: H, at: u64, info: PacketInfo },
    /// Dropped at `at`.
    Drop { handle: H, at: u64, info: PacketInfo, seq: u64, cause: DropCause },
}

pub struct Link<H> {
    pub name: String,
    rate_bps: u64,
    delay_ns: u64,
    edge: Vec<Stage<H>>,
    policy: Box<dyn QueuePolicy<H>>,
    /// The packet being serialized and when its last bit leaves.
    on_wire: Option<(Queued<H>, u64)>,
    /// Packets in flight, in delivery order (constant delay keeps it FIFO).
    delay_line: VecDeque<(u64, Queued<H>)>,
    next_seq: u64,
    pub stats: LinkStats,
    dropped: Vec<Dropped<H>>,
}

impl<H: 'static> Link<H> {
    pub fn new(config: &LinkConfig, seed: u64) -> Result<Link<H>, String> {
        let env = LinkEnv { buffer: config.buffer, rate_bps: config.rate_bps, seed };
        let mut policy = config.policy.build(&env)?;
        config.check_loss_wrapping()?;
        if let Some(loss) = &config.loss {
            policy = loss.wrap(policy, seed).map_err(|e| format!("loss: {e}"))?;
        }
        let edge = config
            .edge
            .iter()
            .enumerate()
            .map(|(i, e)| e.build().map_err(|e| format!("edge[{i}]: {e}")))
            .collect::<Result<Vec<Stage<H>>, String>>()?;
        let stats = LinkStats::default();
        Ok(Link {
            name: config.name.clone(),
            rate_bps: config.rate_bps,
            delay_ns: config.delay_us * 1000,
            edge,
            policy,
            on_wire: None,
            delay_line: VecDeque::new(),
            next_seq: 0,
            stats,
            dropped: Vec::new(),
        })
    }

    /// A link with the DropTail policy, for tests.
    pub fn droptail(name: &str, rate_bps: u64, delay_us: u64, buffer: Option<Buffer>) -> Link<H> {
        let config = LinkConfig::new(name, rate_bps, delay_us, buffer, PolicyConfig::Droptail(DropTailConfig {}));
        Link::new(&config, 0).expect("droptail always builds")
    }

    /// Serialization time of `len` bytes at the link rate, rounded to the nearest ns.
    fn tx_time(&self, len: u32) -> u64 {
        ((u128::from(len) * 8 * 1_000_000_000 + u128::from(self.rate_bps) / 2) / u128::from(self.rate_bps)) as u64
    }

    /// Take an arriving packet at time `now` (call `advance(now, ..)` first). Returns its
    /// sequence number on this link.
    pub fn arrive(&mut self, handle: H, info: PacketInfo, now: u64, out: &mut Vec<Fate<H>>) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.through_edge(0, Queued { handle, info, arrival: now, seq }, now, out);
        seq
    }

    /// Apply the edge functions from `from` on, then hand the packet to the policy.
    fn through_edge(&mut self, from: usize, mut pkt: Queued<H>, now: u64, out: &mut Vec<Fate<H>>) {
        for i in from..self.edge.len() {
            match self.edge[i].apply(pkt, now) {
                Step::Next(p) => pkt = p,
                Step::Held => return,
                Step::Drop(p, policed) => {
                    self.stats.arrived.add(&p.info);
                    self.stats.dropped.add(&p.info);
                    let cause = if policed { DropCause::Policed } else { DropCause::ShaperFull };
                    out.push(Fate::Drop { handle: p.handle, at: now, info: p.info, seq: p.seq, cause });
                    return;
                }
            }
        }
        self.enqueue(pkt, now, out);
    }

    /// Offer the packet to the policy (through the loss wrapper, if any).
    fn enqueue(&mut self, pkt: Queued<H>, now: u64, out: &mut Vec<Fate<H>>) {
        self.stats.arrived.add(&pkt.info);
        let seq = pkt.seq;
        self.policy.enqueue(pkt, now, &mut self.dropped);
        self.record_drops(now, seq, out);
        if self.rate_bps == 0 {
            // No transmitter (the sender's qdisc serialized it): the policy still decides, which
            // matters for the loss models; survivors go straight into the delay line.
            while let Some(p) = self.policy.dequeue(now) {
                self.stats.sent.add(&p.info);
                self.delay_line.push_back((now + self.delay_ns, p));
            }
            return;
        }
        self.note_occupancy();
        if self.on_wire.is_none() {
            self.start_next(now);
        }
    }

    fn record_drops(&mut self, now: u64, seq: u64, out: &mut Vec<Fate<H>>) {
        for d in self.dropped.drain(..) {
            self.stats.dropped.add(&d.pkt.info);
            let cause = match d.cause {
                Cause::Refused => DropCause::Refused,
                Cause::Evicted => DropCause::Evicted { by: seq },
                Cause::Lost => {
                    self.stats.lost.add(&d.pkt.info);
                    DropCause::Lost
                }
            };
            out.push(Fate::Drop { handle: d.pkt.handle, at: now, info: d.pkt.info, seq: d.pkt.seq, cause });
        }
    }

    fn note_occupancy(&mut self) {
        let s = &mut self.stats;
        s.max_queue_pkts = s.max_queue_pkts.max(self.policy.len_packets());
        s.max_queue_bytes = s.max_queue_bytes.max(self.policy.len_bytes());
    }

    fn start_next(&mut self, start: u64) {
        if let Some(pkt) = self.policy.dequeue(start) {
            let end = start + self.tx_time(pkt.info.len);
            self.on_wire = Some((pkt, end));
        }
    }

    /// The transmitter's next event: the end of the packet on the wire or, while the wire is
    /// idle, the time the policy asks to be woken (a policy waiting for tokens, see
    /// [`QueuePolicy::wake_at`]). A link without a rate has no transmitter.
    fn transmitter_event(&self) -> Option<u64> {
        match &self.on_wire {
            Some((_, end)) => Some(*end),
            None if self.rate_bps > 0 => self.policy.wake_at(),
            None => None,
        }
    }

    /// The earliest shaper release: (time, edge function index).
    fn next_release(&self) -> Option<(u64, usize)> {
        self.edge.iter().enumerate().filter_map(|(i, s)| s.next_release().map(|t| (t, i))).min()
    }

    /// Run the schedule up to `now`, event by event in time order: due packets are delivered,
    /// finished transmissions enter the delay line (and the next packet starts at the virtual
    /// end time), an idle transmitter whose policy asked to be woken starts at that virtual time,
    /// shapers release packets (at their virtual release times) to what follows them.
    pub fn advance(&mut self, now: u64, out: &mut Vec<Fate<H>>) {
        loop {
            let transmitter = self.transmitter_event().filter(|t| *t <= now);
            let head = self.delay_line.front().map(|(at, _)| *at).filter(|at| *at <= now);
            let release = self.next_release().filter(|(t, _)| *t <= now);
            let next_other = match (transmitter, release) {
                (Some(a), Some((b, _))) => Some(a.min(b)),
                (a, b) => a.or(b.map(|r| r.0)),
            };
            match (transmitter, head, release) {
                // A packet due for delivery at or before the other events goes first.
                (_, Some(at), _) if next_other.is_none_or(|t| at <= t) => {
                    let (at, pkt) = self.delay_line.pop_front().unwrap();
                    out.push(Fate::Deliver { handle: pkt.handle, at, info: pkt.info });
                }
                // Then a transmission ending (or an idle transmitter woken) at or before a release.
                (Some(t), _, _) if release.is_none_or(|(r, _)| t <= r) => {
                    match self.on_wire.take() {
                        Some((pkt, _)) => {
                            self.stats.sent.add(&pkt.info);
                            self.delay_line.push_back((t + self.delay_ns, pkt));
                            self.start_next(t);
                        }
                        None => {
                            self.start_next(t);
                            // A wake with nothing to send must move the wake on, or this loops.
                            assert!(
                                self.on_wire.is_some() || self.policy.wake_at().is_none_or(|w| w > t),
                                "link {}: the policy asked to be woken at {t} ns but had nothing to send then",
                                self.name
                            );
                        }
                    }
                }
                (_, _, Some((t, i))) => {
                    let pkt = self.edge[i].release(t);
                    self.through_edge(i + 1, pkt, t, out);
                }
                _ => return,
            }
        }
    }

    /// When `advance` next has something to do.
    pub fn next_event(&self) -> Option<u64> {
        let head = self.delay_line.front().map(|(at, _)| *at);
        let release = self.next_release().map(|r| r.0);
        [self.transmitter_event(), head, release].into_iter().flatten().min()
    }

    /// The counters now; the policy's and the edge functions' are read from them (a TCPF marker
    /// also counts the ACKs it is shown between this link's arrivals).
    pub fn snapshot(&self) -> LinkSnapshot {
        let mut snap = self.stats.snapshot(self.queue_packets(), self.queue_bytes());
        snap.policy_counters = self.policy.counters();
        snap.edge = self.edge.iter().map(Stage::counters).collect();
        snap
    }

    pub fn queue_packets(&self) -> usize {
        self.policy.len_packets()
    }

    pub fn queue_bytes(&self) -> usize {
        self.policy.len_bytes()
    }

    /// Every packet still held (delay line, wire, queue, shapers), for release at shutdown.
    pub fn drain(&mut self) -> Vec<(H, PacketInfo)> {
        let mut held: Vec<Queued<H>> = self.delay_line.drain(..).map(|(_, p)| p).collect();
        held.extend(self.on_wire.take().map(|(p, _)| p));
        held.extend(self.policy.drain());
        for stage in self.edge.iter_mut() {
            held.extend(stage.drain());
        }
        held.into_iter().map(|p| (p.handle, p.info)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::Class;
    use crate::stats::EdgeCounters;

    const MS: u64 = 1_000_000;
    const US: u64 = 1_000;

    fn info(len: u32) -> PacketInfo {
        PacketInfo::new(len, 0, 0)
    }

    /// Feed arrivals (time, len) and run to the end; returns (id, fate, time) per packet.
    fn simulate(link: &mut Link<usize>, arrivals: &[(u64, u32)]) -> Vec<(usize, &'static str, u64)> {
        let mut out = Vec::new();
        for (i, &(t, len)) in arrivals.iter().enumerate() {
            link.advance(t, &mut out);
            link.arrive(i, info(len), t, &mut out);
        }
        link.advance(u64::MAX, &mut out);
        let mut fates: Vec<_> = out
            .into_iter()
            .map(|f| match f {
                Fate::Deliver { handle, at, .. } => (handle, "sent", at),
                Fate::Drop { handle, at, .. } => (handle, "dropped", at),
            })
            .collect();
        fates.sort();
        fates
    }

    #[test]
    fn a_link_without_a_rate_still_applies_its_loss_model() {
        let policy = PolicyConfig::Bernoulli(crate::policy::BernoulliConfig { loss_p: 0.25 });
        let config = LinkConfig::new("l", 0, 1000, None, policy);
        let mut link: Link<usize> = Link::new(&config, 7).unwrap();
        let arrivals: Vec<(u64, u32)> = (0..4000).map(|i| (i * US, 100)).collect();
        let fates = simulate(&mut link, &arrivals);
        let lost = fates.iter().filter(|f| f.1 == "dropped").count();
        assert!((900..1100).contains(&lost), "lost {lost} of 4000 at p = 0.25");
        // Survivors leave exactly one delay after they arrived.
        assert!(fates.iter().filter(|f| f.1 == "sent").all(|f| f.2 == f.0 as u64 * US + MS));
        assert_eq!(link.stats.sent.total_packets() + link.stats.dropped.total_packets(), 4000);
    }

    /// A 100 Mbit/s link with 1 ms of delay (buffer 100 packets unless `json` says).
    fn link_from(json: &str) -> Link<usize> {
        let buffer = if json.contains(r#""buffer""#) { "" } else { r#""buffer": {"packets": 100},"# };
        let text = format!(
            r#"{{"seed": 4, "links": [{{"name": "l", "queue_num": 0, "rate_bps": 100000000, "delay_us": 1000,
                {buffer} {json}}}]}}"#
        );
        let config = crate::config::Config::parse(&crate::testkit::filled(&text)).unwrap();
        Link::new(&config.links[0], config.seed).unwrap()
    }

    /// Feed arrivals (time, len, dscp, src) and run to the end; every fate, in arrival order.
    fn run(link: &mut Link<usize>, arrivals: &[(u64, u32, u8, u32)]) -> Vec<Fate<usize>> {
        let mut out = Vec::new();
        for (i, &(t, len, dscp, src)) in arrivals.iter().enumerate() {
            link.advance(t, &mut out);
            link.arrive(i, PacketInfo::new(len, dscp, 0).with_addresses(6, src, 1, Some((1, 80))), t, &mut out);
        }
        link.advance(u64::MAX, &mut out);
        out.sort_by_key(|f| match f {
            Fate::Deliver { handle, .. } | Fate::Drop { handle, .. } => *handle,
        });
        out
    }

    #[test]
    fn the_policy_and_the_stats_see_the_class_the_edge_functions_left() {
        // Everything from 10.0.0.0/8 becomes AF11, the rest AF12; CATNIP-Good then protects
        // the AF11 packets however they arrived, and the stats count them as high.
        let mut link = link_from(
            r#""buffer": {"packets": 10}, "policy": {"kind": "catnip_good"},
               "edge": [{"kind": "mark", "rules": [{"src": "10.0.0.0/8", "dscp": 10}], "default": 12}]"#,
        );
        let arrivals: Vec<(u64, u32, u8, u32)> =
            (0..40).map(|i| (0, 1500, 0, if i % 4 == 0 { 0x0a00_0001 } else { 0x0b00_0001 })).collect();
        let fates = run(&mut link, &arrivals);
        for (i, f) in fates.iter().enumerate() {
            match f {
                Fate::Deliver { info, .. } => assert_eq!(info.dscp, if i % 4 == 0 { 10 } else { 12 }),
                Fate::Drop { info, cause, .. } => {
                    assert_eq!(info.dscp, 12, "packet {i}: an AF11 packet was dropped ({cause:?})");
                }
            }
        }
        let s = &link.stats;
        assert_eq!((s.arrived.packets(Class::High), s.sent.packets(Class::High)), (10, 10));
        assert_eq!((s.arrived.packets(Class::Other), s.arrived.packets(Class::Low)), (0, 30));
        assert_eq!(link.snapshot().edge, vec![EdgeCounters::new("mark", &[("remarked", 40)])]);
    }

    #[test]
    fn link_loss_counts_lost_among_dropped() {
        let mut link = link_from(r#""policy": {"kind": "droptail"}, "loss": {"p": 0.2, "p_high": 0.0}"#);
        let arrivals: Vec<(u64, u32, u8, u32)> =
            (0..5000).map(|i| (i * 200_000, 100, [10, 12][i as usize % 2], 0)).collect();
        let fates = run(&mut link, &arrivals);
        let lost: Vec<usize> = fates
            .iter()
            .filter_map(|f| match f {
                Fate::Drop { handle, cause: DropCause::Lost, .. } => Some(*handle),
                _ => None,
            })
            .collect();
        assert!(lost.iter().all(|i| i % 2 == 1), "AF11 has p_high = 0");
        assert!((400..600).contains(&lost.len()), "{}", lost.len());
        let s = &link.stats;
        assert_eq!((s.lost.total_packets(), s.dropped.total_packets()), (lost.len() as u64, lost.len() as u64));
        assert_eq!((s.lost.packets(Class::High), s.lost.packets(Class::Low)), (0, lost.len() as u64));
    }

    #[test]
    fn a_shaper_on_a_fast_link_sets_the_pace_exactly_however_late_the_wake_up() {
        // 100 Mbit/s link (1500 bytes: 120 us), shaper 1.5 Mbit/s (8 ms) with a 3000-byte
        // bucket and 5 packets of buffer: 12 packets at once. Two go at once, five wait 8 ms
        // apart, five are dropped by the shaper.
        let json = r#""policy": {"kind": "droptail"},
            "edge": [{"kind": "shape", "rate_bps": 1500000, "bucket_bytes": 3000, "buffer": {"packets": 5}}]"#;
        let arrivals: Vec<(u64, u32, u8, u32)> = (0..12).map(|_| (0, 1500, 0, 0)).collect();
        let mut on_time = link_from(json);
        let mut out = Vec::new();
        for (i, a) in arrivals.iter().enumerate() {
            on_time.arrive(i, PacketInfo::new(a.1, 0, 0), 0, &mut out);
        }
        assert_eq!(on_time.next_event(), Some(120 * US));
        for t in (0..100).map(|k| k * MS) {
            on_time.advance(t, &mut out);
        }
        let mut late = link_from(json);
        let fates = run(&mut late, &arrivals); // one wake-up at the end
        let times = |v: &[Fate<usize>]| -> Vec<u64> {
            let mut t: Vec<u64> =
                v.iter().filter_map(|f| if let Fate::Deliver { at, .. } = f { Some(*at) } else { None }).collect();
            t.sort();
            t
        };
        let want: Vec<u64> =
            [120 * US, 240 * US].into_iter().chain((1..=5).map(|k| k * 8 * MS + 120 * US)).map(|t| t + MS).collect();
        assert_eq!(times(&out), want);
        assert_eq!(times(&fates), want);
        let shaped = fates.iter().filter(|f| matches!(f, Fate::Drop { cause: DropCause::ShaperFull, .. })).count();
        assert_eq!(shaped, 5);
        assert_eq!(
            late.snapshot().edge,
            vec![EdgeCounters::new("shape", &[("held", 5), ("dropped", 5), ("queue_pkts", 0)])]
        );
        assert_eq!((late.stats.arrived.total_packets(), late.stats.dropped.total_packets()), (12, 5));
    }

    #[test]
    fn a_policer_that_drops_reports_police() {
        let mut link = link_from(
            r#""policy": {"kind": "droptail"},
               "edge": [{"kind": "police", "rate_bps": 8000, "bucket_bytes": 2000, "per": "src", "exceed": {"action": "drop"}}]"#,
        );
        // Two sources, 1000 bytes each at once: each gets its own bucket of 2000.
        let arrivals: Vec<(u64, u32, u8, u32)> = (0..6).map(|i| (0, 1000, 0, 1 + (i % 2) as u32)).collect();
        let fates = run(&mut link, &arrivals);
        let policed: Vec<bool> =
            fates.iter().map(|f| matches!(f, Fate::Drop { cause: DropCause::Policed, .. })).collect();
        assert_eq!(policed, vec![false, false, false, false, true, true]);
        assert_eq!(link.snapshot().edge, vec![EdgeCounters::new("police", &[("in", 4), ("out", 2), ("dropped", 2)])]);
        assert_eq!(link.stats.dropped.total_packets(), 2);
    }

    #[test]
    fn a_tcpf_marker_sees_the_acks_crossing_another_link_of_its_engine() {
        use crate::packet::{TcpInfo, TCP_ACK};
        // The data direction with a TCPF marker, and the link the ACKs cross on the way back.
        let text = r#"{"links": [
            {"name": "r1>r2", "queue_num": 0, "rate_bps": 0, "delay_us": 0, "buffer": null,
             "policy": {"kind": "droptail"}, "edge": [{"kind": "tcpf", "pool_bytes": 20000}]},
            {"name": "r1>s1", "queue_num": 1, "rate_bps": 0, "delay_us": 0, "buffer": null,
             "policy": {"kind": "droptail"}}]}"#;
        let config = crate::config::Config::parse(&crate::testkit::filled(text)).unwrap();
        let mut links: Vec<Link<usize>> = config.links.iter().map(|l| Link::new(l, 0).unwrap()).collect();
        let feed = AckFeed::of(&links);
        let (s1, d1) = (0x0a01_0001, 0x0a02_0001);
        let mut out = Vec::new();
        let mut seq = 0u32;
        // 20 packets of 1000 bytes per 100 ms for 2 s, each window ACKed on the other link.
        for round in 0..20u64 {
            let t = round * 100 * MS;
            for k in 0..20u64 {
                let info = PacketInfo::new(1040, 0, 1)
                    .with_addresses(6, s1, d1, Some((40000, 5201)))
                    .with_tcp(TcpInfo { seq, ack: 1, flags: TCP_ACK, payload: 1000 });
                seq = seq.wrapping_add(1000);
                feed.observe(&info, t + k);
                links[0].arrive(0, info, t + k, &mut out);
            }
            let ack = PacketInfo::new(40, 0, 2).with_addresses(6, d1, s1, Some((5201, 40000))).with_tcp(TcpInfo {
                seq: 1,
                ack: seq,
                flags: TCP_ACK,
                payload: 0,
            });
            feed.observe(&ack, t + 50 * MS);
            links[1].arrive(0, ack, t + 50 * MS, &mut out);
        }
        let c = links[0].snapshot().edge[0].clone();
        assert_eq!((c.kind, c.get("acks")), ("tcpf", 20));
        // The flow sends 80 KB per interval against a 20 KB pool: about a quarter IN.
        assert!(c.get("in") > 60 && c.get("in") < 130, "{c:?}");
        assert_eq!(c.get("in") + c.get("out"), 400);
    }

    /// Deliveries as (id, time, dscp).
    fn deliveries(out: &[Fate<usize>]) -> Vec<(usize, u64, u8)> {
        out.iter()
            .filter_map(|f| match f {
                Fate::Deliver { handle, at, info } => Some((*handle, *at, info.dscp)),
                Fate::Drop { .. } => None,
            })
            .collect()
    }

    #[test]
    fn an_idle_link_wakes_when_its_policy_asks_at_the_exact_virtual_time() {
        // A source scheduler with HIGH at 1 Mbit/s and a 1500-byte bucket on the 100 Mbit/s link
        // (1500 B: 120 us, then 1 ms of delay): three AF11 packets at once leave at 0, then at
        // 12 ms and 24 ms, when the tokens are there, with the wire idle in between.
        let json = r#""policy": {"kind": "source_scheduler", "high": {"rate_bps": 1000000, "bucket_bytes": 1500},
            "med": {"rate_bps": 1000000, "bucket_bytes": 1500}, "classes": [[[80, 80]]]}"#;
        let af11 = || PacketInfo::new(1500, 10, 7).with_addresses(6, 1, 2, Some((40000, 80)));
        let want: Vec<(usize, u64, u8)> =
            [0, 12 * MS, 24 * MS].iter().enumerate().map(|(i, t)| (i, t + 120 * US + MS, 10)).collect();
        let mut on_time = link_from(json);
        let mut out = Vec::new();
        for i in 0..3 {
            on_time.arrive(i, af11(), 0, &mut out);
        }
        assert_eq!(on_time.next_event(), Some(120 * US));
        on_time.advance(120 * US, &mut out);
        assert_eq!(on_time.next_event(), Some(MS + 120 * US)); // the delivery
        on_time.advance(MS + 120 * US, &mut out);
        // Idle wire, two packets held: the next event is the policy's wake-up, the token time.
        assert_eq!((on_time.queue_packets(), on_time.next_event()), (2, Some(12 * MS)));
        for t in (1..100).map(|k| k * 300 * US) {
            on_time.advance(t, &mut out);
        }
        assert_eq!(deliveries(&out), want);
        assert_eq!(on_time.next_event(), None);
        // Driven once, long after: the transmissions still start at the wake-up times.
        let mut late = link_from(json);
        let mut out = Vec::new();
        for i in 0..3 {
            late.arrive(i, af11(), 0, &mut out);
        }
        late.advance(500 * MS, &mut out);
        assert_eq!(deliveries(&out), want);
        // The loss wrapper would hide the wake-up time: refused.
        let config = crate::config::LinkConfig {
            loss: Some(crate::policy::LossConfig { p: 0.1, p_high: 0.1 }),
            ..config_of(json)
        };
        assert!(Link::<usize>::new(&config, 0).err().unwrap().starts_with("loss: policy source_scheduler cannot take"));
    }

    /// The config of a 100 Mbit/s link with 1 ms of delay and no buffer limit.
    fn config_of(json: &str) -> LinkConfig {
        let text = format!(
            r#"{{"links": [{{"name": "l", "queue_num": 0, "rate_bps": 100000000, "delay_us": 1000, "buffer": null, {json}}}]}}"#
        );
        crate::config::Config::parse(&crate::testkit::filled(&text)).unwrap().links.remove(0)
    }

    #[test]
    fn a_1500_byte_packet_takes_8_ms_at_1_5_mbit() {
        let mut link = Link::droptail("l", 1_500_000, 0, None);
        assert_eq!(simulate(&mut link, &[(0, 1500)]), vec![(0, "sent", 8 * MS)]);
    }

    #[test]
    fn back_to_back_packets_are_spaced_exactly_and_delayed() {
        let mut link = Link::droptail("l", 1_500_000, 5000, None);
        let fates = simulate(&mut link, &[(0, 1500), (0, 1500), (1 * MS, 1500)]);
        assert_eq!(fates, vec![(0, "sent", 13 * MS), (1, "sent", 21 * MS), (2, "sent", 29 * MS)]);
    }

    #[test]
    fn an_idle_link_starts_at_the_arrival_time() {
        let mut link = Link::droptail("l", 10_000_000, 2000, None);
        // 1000 bytes at 10 Mbit/s: 800 us on the wire, plus 2 ms.
        let fates = simulate(&mut link, &[(0, 1000), (5 * MS, 1000)]);
        assert_eq!(fates, vec![(0, "sent", 2800 * US), (1, "sent", 5 * MS + 2800 * US)]);
    }

    #[test]
    fn the_packet_on_the_wire_is_not_in_the_buffer() {
        // Buffer of 2: one on the wire plus two waiting fit; the fourth is refused.
        let mut link = Link::droptail("l", 1_500_000, 0, Some(Buffer::Packets(2)));
        let fates = simulate(&mut link, &[(0, 1500), (0, 1500), (0, 1500), (0, 1500)]);
        assert_eq!(fates[3], (3, "dropped", 0));
        assert_eq!(fates[2], (2, "sent", 24 * MS));
        assert_eq!(link.stats.max_queue_pkts, 2);
        assert_eq!(link.stats.dropped.total_packets(), 1);
        assert_eq!(link.stats.sent.total_packets(), 3);
    }

    #[test]
    fn queue_never_exceeds_its_limit_under_overload() {
        let mut link = Link::droptail("l", 1_500_000, 0, Some(Buffer::Bytes(64 * 1024)));
        let arrivals: Vec<(u64, u32)> = (0..5000).map(|i| (i * 100 * US, 1500)).collect();
        let fates = simulate(&mut link, &arrivals);
        assert!(link.stats.max_queue_bytes <= 64 * 1024);
        assert!(link.stats.max_queue_bytes > 60 * 1024);
        let sent: Vec<u64> = fates.iter().filter(|f| f.1 == "sent").map(|f| f.2).collect();
        // Saturated: deliveries exactly 8 ms apart, however the arrivals fell.
        assert!(sent.windows(2).all(|w| w[1] - w[0] == 8 * MS));
    }

    #[test]
    fn a_late_advance_does_not_shift_the_schedule() {
        let mut on_time = Link::droptail("l", 1_500_000, 1000, None);
        let mut late = Link::droptail("l", 1_500_000, 1000, None);
        let mut a = Vec::new();
        let mut b = Vec::new();
        for i in 0..3 {
            on_time.arrive(i, info(1500), 0, &mut a);
            late.arrive(i, info(1500), 0, &mut b);
        }
        for t in (0..40).map(|k| k * MS) {
            on_time.advance(t, &mut a);
        }
        late.advance(40 * MS, &mut b); // one very late wake-up
        let times = |v: &Vec<Fate<usize>>| -> Vec<u64> {
            v.iter().filter_map(|f| if let Fate::Deliver { at, .. } = f { Some(*at) } else { None }).collect()
        };
        assert_eq!(times(&a), vec![9 * MS, 17 * MS, 25 * MS]);
        assert_eq!(times(&a), times(&b));
    }

    #[test]
    fn a_rate_of_zero_is_a_pure_delay_line() {
        let mut link = Link::droptail("l", 0, 7000, Some(Buffer::Packets(1)));
        let fates = simulate(&mut link, &[(0, 1500), (0, 1500), (0, 1500)]);
        assert!(fates.iter().all(|f| f.1 == "sent" && f.2 == 7 * MS));
        assert_eq!(link.next_event(), None);
    }

    #[test]
    fn drain_returns_everything_held() {
        let mut link = Link::droptail("l", 1_500_000, 10_000, None);
        let mut out = Vec::new();
        for i in 0..4 {
            link.arrive(i, info(1500), 0, &mut out);
        }
        link.advance(9 * MS, &mut out);
        let mut held: Vec<usize> = link.drain().into_iter().map(|h| h.0).collect();
        held.sort();
        assert_eq!(held, vec![0, 1, 2, 3]);
        assert!(out.is_empty());
    }
}
