//! Properties every policy must keep, checked on many random traces through the replay path:
//! the buffer limit is never exceeded, every packet has exactly one fate (sent, refused or
//! evicted: bytes are conserved), and departures are never closer than the link rate allows.

use catnip_engine::config::{Buffer, LevelConfig, LinkConfig, PolicyConfig};
use catnip_engine::link::Link;
use catnip_engine::replay::{replay, TracePacket};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const RATE: u64 = 1_500_000;

fn policies() -> Vec<PolicyConfig> {
    let base = |kind: &str| PolicyConfig { kind: kind.into(), ..Default::default() };
    let red = |kind: &str| PolicyConfig {
        kind: kind.into(),
        min_th: Some(2.0),
        max_th: Some(6.0),
        w_q: Some(0.2),
        max_p: Some(0.1),
        ..Default::default()
    };
    let level = |min_th, max_th| LevelConfig { min_th, max_th, max_p: 0.1 };
    vec![
        base("droptail"),
        base("catnip_good"),
        base("catnip_bad"),
        red("red"),
        red("catnip_red"),
        PolicyConfig { w_q: Some(0.2), levels: Some(vec![level(4.0, 8.0), level(2.0, 6.0)]), ..base("rio") },
        PolicyConfig {
            w_q: Some(0.2),
            levels: Some(vec![level(5.0, 9.0), level(3.0, 7.0), level(1.0, 5.0)]),
            ..base("red3")
        },
        PolicyConfig { min_q: Some(2.0), ..red("fred") },
        PolicyConfig { w_q: Some(0.2), levels: Some(vec![level(4.0, 8.0), level(2.0, 6.0)]), ..base("frio") },
        PolicyConfig { weights: Some(vec![1, 3]), ..base("wrr") },
        PolicyConfig { weights: Some(vec![2, 5, 3]), ..base("wrr") },
        PolicyConfig { loss_p: Some(0.05), ..base("bernoulli") },
        PolicyConfig { loss_p: Some(0.05), loss_p_high: Some(0.0), ..base("catnip_loss") },
    ]
}

fn trace(rng: &mut ChaCha8Rng) -> Vec<TracePacket> {
    let mut t: f64 = 0.0;
    (0..400)
        .map(|_| {
            // Bursts and gaps: sometimes back to back, sometimes idle long enough to drain.
            t += if rng.gen_bool(0.7) { rng.gen_range(0.0..400.0) } else { rng.gen_range(0.0..20_000.0) };
            TracePacket {
                time_us: t.round(),
                size: *[40u32, 552, 1500].get(rng.gen_range(0..3)).unwrap(),
                dscp: *[10u8, 12, 14, 0].get(rng.gen_range(0..4)).unwrap(),
                flow: rng.gen_range(0..8),
            }
        })
        .collect()
}

#[test]
fn every_policy_keeps_buffer_conservation_and_rate() {
    for policy in policies() {
        for (seed, buffer) in (0..40).zip([Buffer::Packets(10), Buffer::Bytes(8_000)].iter().cycle()) {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let packets = trace(&mut rng);
            let config = LinkConfig {
                name: "p".into(),
                queue_num: 0,
                rate_bps: RATE,
                delay_us: 3000,
                buffer: Some(*buffer),
                policy: policy.clone(),
            };
            let mut link: Link<usize> = Link::new(&config, seed).unwrap();
            let fates = replay(&mut link, &packets);
            let who = format!("{} seed {seed} buffer {buffer:?}", policy.kind);

            // Buffer: never above the limit.
            match buffer {
                Buffer::Packets(n) => assert!(link.stats.max_queue_pkts as u64 <= *n, "{who}"),
                Buffer::Bytes(n) => assert!(link.stats.max_queue_bytes as u64 <= *n, "{who}"),
            }
            // Conservation: one fate each; sent + dropped bytes = arrived bytes.
            assert_eq!(fates.len(), packets.len(), "{who}");
            let bytes = |f: &dyn Fn(&str) -> bool| -> u64 {
                packets.iter().zip(&fates).filter(|(_, r)| f(r.fate)).map(|(p, _)| u64::from(p.size)).sum()
            };
            let arrived: u64 = packets.iter().map(|p| u64::from(p.size)).sum();
            assert_eq!(bytes(&|f| f == "sent") + bytes(&|f| f != "sent"), arrived, "{who}");
            let sent_stats: u64 = link.stats.sent.total_packets();
            assert_eq!(sent_stats as usize, fates.iter().filter(|r| r.fate == "sent").count(), "{who}");
            // Rate: consecutive deliveries at least one serialization time apart, never before
            // arrival + serialization + delay.
            let mut sent: Vec<(u64, u64, u32)> = packets
                .iter()
                .zip(&fates)
                .filter(|(_, r)| r.fate == "sent")
                .map(|(p, r)| (r.fate_ns, (p.time_us * 1000.0) as u64, p.size))
                .collect();
            sent.sort();
            for w in sent.windows(2) {
                let tx = u64::from(w[1].2) * 8 * 1_000_000_000 / RATE;
                assert!(w[1].0 + 1 >= w[0].0 + tx, "{who}: departures too close");
            }
            for (at, arrival, size) in &sent {
                let tx = u64::from(*size) * 8 * 1_000_000_000 / RATE;
                assert!(*at + 1 >= arrival + tx + 3_000_000, "{who}: delivered before it could have been");
            }
        }
    }
}
