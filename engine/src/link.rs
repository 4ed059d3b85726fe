//! One emulated link direction: buffer (policy) -> transmitter at the link rate -> constant
//! propagation delay -> delivery.
//!
//! Time is in nanoseconds on the driver's clock. The schedule is virtual: a transmission
//! starts at max(arrival, end of the previous transmission), computed from those times and
//! never from when the driver happened to wake up, so a late wake-up delays a verdict but
//! never shifts the packets after it.

use crate::config::{Buffer, LinkConfig, PolicyConfig};
use crate::packet::PacketInfo;
use crate::policy::{self, Dropped, QueuePolicy, Queued};
use crate::stats::LinkStats;
use std::collections::VecDeque;

/// What became of a packet.
#[derive(Debug)]
pub enum Fate<H> {
    /// Release it now; `at` is when the schedule said it reaches the far end.
    Deliver { handle: H, at: u64, info: PacketInfo },
    /// Dropped at `at`: refused on arrival, or evicted by the arrival with sequence `by`.
    Drop { handle: H, at: u64, info: PacketInfo, seq: u64, by: Option<u64> },
}

pub struct Link<H> {
    pub name: String,
    rate_bps: u64,
    delay_ns: u64,
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
        Ok(Link {
            name: config.name.clone(),
            rate_bps: config.rate_bps,
            delay_ns: config.delay_us * 1000,
            policy: policy::build(&config.policy, config.buffer, config.rate_bps, seed)?,
            on_wire: None,
            delay_line: VecDeque::new(),
            next_seq: 0,
            stats: LinkStats::default(),
            dropped: Vec::new(),
        })
    }

    /// A link with the DropTail policy, for tests.
    pub fn droptail(name: &str, rate_bps: u64, delay_us: u64, buffer: Option<Buffer>) -> Link<H> {
        let config = LinkConfig {
            name: name.into(),
            queue_num: 0,
            rate_bps,
            delay_us,
            buffer,
            policy: PolicyConfig { kind: "droptail".into(), ..Default::default() },
        };
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
        self.stats.arrived.add(&info);
        let pkt = Queued { handle, info, arrival: now, seq };
        self.policy.enqueue(pkt, now, &mut self.dropped);
        self.record_drops(now, seq, out);
        if self.rate_bps == 0 {
            // No transmitter (the sender's qdisc serialized it): the policy still decides, which
            // matters for the loss models; survivors go straight into the delay line.
            while let Some(p) = self.policy.dequeue(now) {
                self.stats.sent.add(&p.info);
                self.delay_line.push_back((now + self.delay_ns, p));
            }
            return seq;
        }
        self.note_occupancy();
        if self.on_wire.is_none() {
            self.start_next(now);
        }
        seq
    }

    fn record_drops(&mut self, now: u64, seq: u64, out: &mut Vec<Fate<H>>) {
        for d in self.dropped.drain(..) {
            self.stats.dropped.add(&d.pkt.info);
            out.push(Fate::Drop {
                handle: d.pkt.handle,
                at: now,
                info: d.pkt.info,
                seq: d.pkt.seq,
                by: d.evicted.then_some(seq),
            });
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

    /// Run the schedule up to `now`: finished transmissions enter the delay line (and the next
    /// packet starts at the virtual end time), due packets are delivered.
    pub fn advance(&mut self, now: u64, out: &mut Vec<Fate<H>>) {
        loop {
            let wire_end = self.on_wire.as_ref().map(|(_, end)| *end).filter(|end| *end <= now);
            let head = self.delay_line.front().map(|(at, _)| *at).filter(|at| *at <= now);
            match (wire_end, head) {
                // A packet due for delivery at or before the wire's end goes first.
                (_, Some(at)) if wire_end.is_none_or(|end| at <= end) => {
                    let (at, pkt) = self.delay_line.pop_front().unwrap();
                    out.push(Fate::Deliver { handle: pkt.handle, at, info: pkt.info });
                }
                (Some(end), _) => {
                    let (pkt, _) = self.on_wire.take().unwrap();
                    self.stats.sent.add(&pkt.info);
                    self.delay_line.push_back((end + self.delay_ns, pkt));
                    self.start_next(end);
                }
                _ => return,
            }
        }
    }

    /// When `advance` next has something to do.
    pub fn next_event(&self) -> Option<u64> {
        let wire = self.on_wire.as_ref().map(|(_, end)| *end);
        let head = self.delay_line.front().map(|(at, _)| *at);
        match (wire, head) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    pub fn queue_packets(&self) -> usize {
        self.policy.len_packets()
    }

    pub fn queue_bytes(&self) -> usize {
        self.policy.len_bytes()
    }

    /// Every packet still held, for release at shutdown.
    pub fn drain(&mut self) -> Vec<H> {
        let mut held: Vec<H> = self.delay_line.drain(..).map(|(_, p)| p.handle).collect();
        held.extend(self.on_wire.take().map(|(p, _)| p.handle));
        held.extend(self.policy.drain().into_iter().map(|p| p.handle));
        held
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let config = LinkConfig {
            name: "l".into(),
            queue_num: 0,
            rate_bps: 0,
            delay_us: 1000,
            buffer: None,
            policy: PolicyConfig { kind: "bernoulli".into(), loss_p: Some(0.25), ..Default::default() },
        };
        let mut link: Link<usize> = Link::new(&config, 7).unwrap();
        let arrivals: Vec<(u64, u32)> = (0..4000).map(|i| (i * US, 100)).collect();
        let fates = simulate(&mut link, &arrivals);
        let lost = fates.iter().filter(|f| f.1 == "dropped").count();
        assert!((900..1100).contains(&lost), "lost {lost} of 4000 at p = 0.25");
        // Survivors leave exactly one delay after they arrived.
        assert!(fates.iter().filter(|f| f.1 == "sent").all(|f| f.2 == f.0 as u64 * US + MS));
        assert_eq!(link.stats.sent.total_packets() + link.stats.dropped.total_packets(), 4000);
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
        let mut held = link.drain();
        held.sort();
        assert_eq!(held, vec![0, 1, 2, 3]);
        assert!(out.is_empty());
    }
}
