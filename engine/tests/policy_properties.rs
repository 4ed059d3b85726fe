//! Properties every policy must keep, checked on many random traces through the replay path:
//! the buffer limit is never exceeded, every packet has exactly one fate (sent, refused,
//! evicted, lost, policed: bytes are conserved, in the fates and in the engine's own counters),
//! and departures are never closer than the link rate allows. Each policy runs alone, behind the
//! loss wrapper, and behind edge functions.

use catnip_engine::config::{Buffer, Config};
use catnip_engine::link::Link;
use catnip_engine::packet::CLASSES;
use catnip_engine::replay::{replay, TracePacket};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const RATE: u64 = 1_500_000;

fn policies() -> Vec<&'static str> {
    vec![
        r#"{"kind": "droptail"}"#,
        r#"{"kind": "catnip_good"}"#,
        r#"{"kind": "catnip_bad"}"#,
        r#"{"kind": "red", "min_th": 2, "max_th": 6, "w_q": 0.2, "max_p": 0.1}"#,
        r#"{"kind": "red", "min_th": {"bytes": 2000}, "max_th": {"bytes": 6000}, "w_q": 0.2, "max_p": 0.1}"#,
        r#"{"kind": "catnip_red", "min_th": 2, "max_th": 6, "w_q": 0.2, "max_p": 0.1}"#,
        r#"{"kind": "catnip_red", "min_th": {"bytes": 2000}, "max_th": {"bytes": 6000}, "w_q": 0.2, "max_p": 0.1}"#,
        r#"{"kind": "rio", "w_q": 0.2, "levels": [{"min_th": 4, "max_th": 8, "max_p": 0.1}, {"min_th": 2, "max_th": 6, "max_p": 0.1}]}"#,
        r#"{"kind": "rio", "w_q": 0.2, "levels": [{"min_th": {"bytes": 4000}, "max_th": {"bytes": 8000}, "max_p": 0.005},
                                                  {"min_th": {"bytes": 1000}, "max_th": {"bytes": 4000}, "max_p": 0.25}]}"#,
        r#"{"kind": "red3", "w_q": 0.2, "levels": [{"min_th": 5, "max_th": 9, "max_p": 0.1},
            {"min_th": 3, "max_th": 7, "max_p": 0.1}, {"min_th": 1, "max_th": 5, "max_p": 0.1}]}"#,
        r#"{"kind": "fred", "min_th": 2, "max_th": 6, "w_q": 0.2, "max_p": 0.1, "min_q": 2}"#,
        r#"{"kind": "fred", "min_th": {"bytes": 2000}, "max_th": {"bytes": 6000}, "w_q": 0.2, "max_p": 0.1}"#,
        r#"{"kind": "frio", "w_q": 0.2, "levels": [{"min_th": 4, "max_th": 8, "max_p": 0.1}, {"min_th": 2, "max_th": 6, "max_p": 0.1}]}"#,
        r#"{"kind": "frio", "w_q": 0.2, "min_q": {"bytes": 1500}, "levels": [{"min_th": {"bytes": 4000}, "max_th": {"bytes": 8000}, "max_p": 0.1},
                                                                             {"min_th": {"bytes": 2000}, "max_th": {"bytes": 6000}, "max_p": 0.1}]}"#,
        r#"{"kind": "wrr", "weights": [1, 3]}"#,
        r#"{"kind": "wrr", "weights": [2, 5, 3]}"#,
        r#"{"kind": "bernoulli", "loss_p": 0.05}"#,
        r#"{"kind": "catnip_loss", "loss_p": 0.05, "loss_p_high": 0.0}"#,
    ]
}

/// What goes around the policy: nothing, the loss wrapper, edge functions, both.
fn extras() -> Vec<&'static str> {
    vec![
        "",
        r#", "loss": {"p": 0.05, "p_high": 0.01}"#,
        r#", "edge": [{"kind": "mark", "rules": [{"proto": 6, "src": "10.0.0.0/30", "dscp": 10},
                                                {"dport": [80, 80], "sport": [1004, 1005], "dscp": 12}], "default": 14},
                      {"kind": "police", "rate_bps": 400000, "bucket_bytes": 3000, "dscp": [10], "per": "src",
                       "exceed": {"action": "remark", "dscp": 12}}]"#,
        r#", "edge": [{"kind": "police", "rate_bps": 1000000, "bucket_bytes": 3000, "per": "flow", "exceed": {"action": "drop"}},
                      {"kind": "shape", "rate_bps": 1200000, "bucket_bytes": 1500, "buffer": {"packets": 6}}],
             "loss": {"p": 0.02}"#,
        r#", "edge": [{"kind": "token_marker", "interval_us": 100000, "pool_bytes": 6000}]"#,
        r#", "edge": [{"kind": "tcpf", "interval_us": 100000, "pool_bytes": 6000}]"#,
    ]
}

fn trace(rng: &mut ChaCha8Rng) -> Vec<TracePacket> {
    let mut t: f64 = 0.0;
    (0..400)
        .map(|_| {
            // Bursts and gaps: sometimes back to back, sometimes idle long enough to drain.
            t += if rng.gen_bool(0.7) { rng.gen_range(0.0..400.0) } else { rng.gen_range(0.0..20_000.0) };
            let flow = rng.gen_range(0..8u64);
            TracePacket {
                time_us: t.round(),
                size: *[40u32, 552, 1500].get(rng.gen_range(0..3)).unwrap(),
                dscp: *[10u8, 12, 14, 0].get(rng.gen_range(0..4)).unwrap(),
                flow,
                proto: 6,
                src: 0x0a00_0000 + flow as u32,
                dst: 0x0a01_0001,
                ports: Some((1000 + flow as u16, 80)),
                ..Default::default()
            }
        })
        .collect()
}

fn config(policy: &str, extra: &str, buffer: Buffer, seed: u64) -> Config {
    let buffer = match buffer {
        Buffer::Packets(n) => format!(r#"{{"packets": {n}}}"#),
        Buffer::Bytes(n) => format!(r#"{{"bytes": {n}}}"#),
    };
    // The engine has no defaults: testkit writes in the parameters a policy here leaves out.
    Config::parse(&catnip_engine::testkit::filled(&format!(
        r#"{{"seed": {seed}, "links": [{{"name": "p", "queue_num": 0, "rate_bps": {RATE}, "delay_us": 3000,
            "buffer": {buffer}, "policy": {policy}{extra}}}]}}"#
    )))
    .unwrap_or_else(|e| panic!("{policy}{extra}: {e:#}"))
}

#[test]
fn every_policy_keeps_buffer_conservation_and_rate() {
    for policy in policies() {
        for extra in extras() {
            for (seed, buffer) in (0..24).zip([Buffer::Packets(10), Buffer::Bytes(8_000)].iter().cycle()) {
                check(policy, extra, *buffer, seed);
            }
        }
    }
}

fn check(policy: &str, extra: &str, buffer: Buffer, seed: u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let packets = trace(&mut rng);
    let config = config(policy, extra, buffer, seed);
    let mut link: Link<usize> = Link::new(&config.links[0], seed).unwrap();
    let who = format!("{policy}{extra} seed {seed} buffer {buffer:?}");
    // Replay refuses a second fate for a packet and a packet left without one.
    let fates = replay(&mut link, &packets).unwrap_or_else(|e| panic!("{who}: {e:#}"));

    // Buffer: never above the limit.
    match buffer {
        Buffer::Packets(n) => assert!(link.stats.max_queue_pkts as u64 <= n, "{who}"),
        Buffer::Bytes(n) => assert!(link.stats.max_queue_bytes as u64 <= n, "{who}"),
    }
    let bytes = |f: &dyn Fn(&str) -> bool| -> u64 {
        packets.iter().zip(&fates).filter(|(_, r)| f(r.fate)).map(|(p, _)| u64::from(p.size)).sum()
    };
    let arrived: u64 = packets.iter().map(|p| u64::from(p.size)).sum();

    // Conservation in the engine's own counters, once the link has drained: every arrival
    // counted once, then sent or dropped, in packets (per class) and bytes, agreeing with the
    // fates replay collected.
    let s = &link.stats;
    assert_eq!((link.queue_packets(), s.arrived.total_packets()), (0, packets.len() as u64), "{who}");
    assert_eq!(s.arrived.total_bytes(), arrived, "{who}");
    assert_eq!(s.sent.total_bytes() + s.dropped.total_bytes(), arrived, "{who}");
    assert_eq!(s.sent.total_bytes(), bytes(&|f| f == "sent"), "{who}");
    assert_eq!(s.dropped.total_bytes(), bytes(&|f| f != "sent"), "{who}");
    for class in CLASSES {
        assert_eq!(s.arrived.packets(class), s.sent.packets(class) + s.dropped.packets(class), "{who} {class:?}");
    }
    assert_eq!(s.sent.total_packets() as usize, fates.iter().filter(|r| r.fate == "sent").count(), "{who}");
    assert_eq!(s.dropped.total_packets() as usize, fates.iter().filter(|r| r.fate != "sent").count(), "{who}");
    let by = |what: &str| fates.iter().filter(|r| r.by == what).count() as u64;
    assert_eq!(s.lost.total_packets(), by("loss"), "{who}");
    let (mut policed, mut shaper_full) = (0, 0);
    for e in &link.snapshot().edge {
        match e.kind {
            "police" => {
                let (in_profile, out_profile, dropped) = (e.get("in"), e.get("out"), e.get("dropped"));
                assert!(dropped <= out_profile && in_profile + out_profile <= packets.len() as u64, "{who}");
                policed += dropped;
            }
            "shape" => {
                assert_eq!(e.get("queue_pkts"), 0, "{who}");
                shaper_full += e.get("dropped");
            }
            "mark" => {}
            // Markers see every packet once (no TCP headers in traces: tcpf marks them OUT).
            "token_marker" => assert_eq!(e.get("in") + e.get("out"), packets.len() as u64, "{who}"),
            "tcpf" => assert_eq!((e.get("in"), e.get("out")), (0, packets.len() as u64), "{who}"),
            other => panic!("{who}: edge function {other:?} has no conservation rule here"),
        }
    }
    assert_eq!((policed, shaper_full), (by("police"), by("shape")), "{who}");
    // The DSCP a packet leaves with is the class the stats counted it in.
    for class in CLASSES {
        let sent_in_class =
            fates.iter().filter(|r| r.fate == "sent" && catnip_engine::packet::Class::from_dscp(r.dscp_out) == class);
        assert_eq!(sent_in_class.count() as u64, s.sent.packets(class), "{who} {class:?}");
    }

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
