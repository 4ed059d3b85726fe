//! Counters kept per link and for the engine, and their JSON form (STATS.jsonl).

use crate::packet::{Class, PacketInfo, CLASSES};
use serde_json::{json, Map, Value};

/// Packets and bytes per priority class.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassCounts([[u64; 2]; 4]);

impl ClassCounts {
    pub fn add(&mut self, info: &PacketInfo) {
        let c = &mut self.0[info.class.index()];
        c[0] += 1;
        c[1] += u64::from(info.len);
    }

    pub fn packets(&self, class: Class) -> u64 {
        self.0[class.index()][0]
    }

    pub fn total_packets(&self) -> u64 {
        self.0.iter().map(|c| c[0]).sum()
    }

    pub fn total_bytes(&self) -> u64 {
        self.0.iter().map(|c| c[1]).sum()
    }

    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        for class in CLASSES {
            m.insert(class.name().into(), json!(self.0[class.index()]));
        }
        Value::Object(m)
    }
}

/// Lateness of verdicts against their schedule, with a histogram for percentiles.
#[derive(Clone, Copy, Debug)]
pub struct Lateness {
    pub events: u64,
    pub late_events: u64,
    pub max_late_ns: u64,
    hist: [u64; HIST_BUCKETS],
}

impl Default for Lateness {
    fn default() -> Self {
        Lateness { events: 0, late_events: 0, max_late_ns: 0, hist: [0; HIST_BUCKETS] }
    }
}

/// Log-linear buckets of whole microseconds: exact below 8 us, then 8 buckets per power of two
/// (a bucket spans at most 12.5% of its value), up to 2^27 us.
const SUB: u32 = 8;
const HIST_BUCKETS: usize = (SUB + SUB * 24) as usize;

fn bucket(us: u64) -> usize {
    if us < u64::from(SUB) {
        return us as usize;
    }
    let e = 63 - us.leading_zeros(); // floor(log2 us) >= 3
    let sub = (us >> (e - 3)) & u64::from(SUB - 1);
    ((SUB + (e - 3) * SUB) as u64 + sub).min(HIST_BUCKETS as u64 - 1) as usize
}

/// The smallest value (us) a bucket holds.
fn bucket_floor(i: usize) -> u64 {
    let i = i as u64;
    if i < u64::from(SUB) {
        return i;
    }
    let e = (i - u64::from(SUB)) / u64::from(SUB) + 3;
    let sub = (i - u64::from(SUB)) % u64::from(SUB);
    (8 + sub) << (e - 3)
}

impl Lateness {
    pub fn record(&mut self, late_ns: u64, threshold_ns: u64) {
        self.events += 1;
        if late_ns > threshold_ns {
            self.late_events += 1;
        }
        self.max_late_ns = self.max_late_ns.max(late_ns);
        self.hist[bucket(late_ns / 1000)] += 1;
    }

    /// The q-quantile of lateness in microseconds (the floor of its bucket), None without events.
    pub fn quantile_us(&self, q: f64) -> Option<u64> {
        if self.events == 0 {
            return None;
        }
        let rank = ((q * self.events as f64).ceil() as u64).clamp(1, self.events);
        let mut seen = 0;
        for (i, n) in self.hist.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Some(bucket_floor(i));
            }
        }
        None
    }
}

/// What makes verdicts late, to tell the engine's own delay from the kernel's work: a verdict
/// is released somewhere inside the call that sends it, because the kernel forwards each
/// accepted packet onward (through the next namespaces, often up to a TCP socket) before it
/// takes the next verdict of the batch. Lateness at issue (when the call starts) is therefore a
/// lower bound of a packet's true lateness and the engine's `Lateness` (when the call returns)
/// the upper bound the real-time criterion uses; `calls` holds how long the calls took.
#[derive(Clone, Copy, Debug, Default)]
pub struct LatenessCauses {
    /// Each verdict's lateness when the call sending it started.
    pub at_issue: Lateness,
    /// Each verdict call's duration: its `late_events` are the calls longer than the threshold,
    /// its `max_late_ns` the longest call.
    pub calls: Lateness,
}

impl LatenessCauses {
    /// The fields these add to a stats line's `engine` object.
    pub fn fields(&self) -> Map<String, Value> {
        let (i, c) = (&self.at_issue, &self.calls);
        let v = json!({
            "late_at_issue_events": i.late_events,
            "late_at_issue_p99_us": i.quantile_us(0.99),
            "max_late_at_issue_us": i.max_late_ns as f64 / 1000.0,
            "verdict_calls": c.events,
            "slow_verdict_calls": c.late_events,
            "verdict_call_p99_us": c.quantile_us(0.99),
            "max_verdict_call_us": c.max_late_ns as f64 / 1000.0,
        });
        match v {
            Value::Object(m) => m,
            _ => unreachable!("json! of braces is an object"),
        }
    }
}

/// One edge function's counters, in the link's `edge` order: its kind and its counters by name
/// (each function names its own: edge/*.rs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EdgeCounters {
    pub kind: &'static str,
    pub values: Vec<(&'static str, u64)>,
}

impl EdgeCounters {
    pub fn new(kind: &'static str, values: &[(&'static str, u64)]) -> EdgeCounters {
        EdgeCounters { kind, values: values.to_vec() }
    }

    /// The counter `name` (a missing one is a bug in the caller).
    pub fn get(&self, name: &str) -> u64 {
        match self.values.iter().find(|(n, _)| *n == name) {
            Some((_, v)) => *v,
            None => panic!("edge function {:?} has no counter {name:?}", self.kind),
        }
    }

    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("kind".into(), json!(self.kind));
        for (name, v) in &self.values {
            m.insert((*name).to_string(), json!(v));
        }
        Value::Object(m)
    }
}

/// A link's counters. A packet is counted `arrived` once through the edge functions (with the
/// class they left it), or when one of them drops it; `dropped` counts every drop (refused,
/// evicted, lost, policed, shaper buffer full) and `lost` the random losses among them.
#[derive(Clone, Debug, Default)]
pub struct LinkStats {
    pub arrived: ClassCounts,
    pub sent: ClassCounts,
    pub dropped: ClassCounts,
    pub lost: ClassCounts,
    pub max_queue_pkts: usize,
    pub max_queue_bytes: usize,
    pub lateness: Lateness,
}

impl LinkStats {
    /// The counters a stats line reports, without the lateness histogram: cheap to copy out of
    /// the real-time loop and hand to the stats writer.
    pub fn snapshot(&self, queue_pkts: usize, queue_bytes: usize) -> LinkSnapshot {
        LinkSnapshot {
            arrived: self.arrived,
            sent: self.sent,
            dropped: self.dropped,
            lost: self.lost,
            edge: Vec::new(), // the link fills them in from its edge functions
            queue_pkts,
            queue_bytes,
            max_queue_pkts: self.max_queue_pkts,
            max_queue_bytes: self.max_queue_bytes,
            late_events: self.lateness.late_events,
            max_late_ns: self.lateness.max_late_ns,
            policy_counters: Vec::new(),
        }
    }
}

/// One link's counters at one moment (see [`LinkStats::snapshot`]).
#[derive(Clone, Debug)]
pub struct LinkSnapshot {
    pub arrived: ClassCounts,
    pub sent: ClassCounts,
    pub dropped: ClassCounts,
    pub lost: ClassCounts,
    pub edge: Vec<EdgeCounters>,
    pub queue_pkts: usize,
    pub queue_bytes: usize,
    pub max_queue_pkts: usize,
    pub max_queue_bytes: usize,
    pub late_events: u64,
    pub max_late_ns: u64,
    /// The policy's own counters (`QueuePolicy::counters`; the link fills them in), by name.
    pub policy_counters: Vec<(&'static str, u64)>,
}

impl LinkSnapshot {
    pub fn to_json(&self) -> Value {
        let mut v = json!({
            "arrived": self.arrived.to_json(),
            "sent": self.sent.to_json(),
            "dropped": self.dropped.to_json(),
            "lost": self.lost.to_json(),
            "edge": self.edge.iter().map(EdgeCounters::to_json).collect::<Vec<_>>(),
            "queue_pkts": self.queue_pkts,
            "queue_bytes": self.queue_bytes,
            "max_queue_pkts": self.max_queue_pkts,
            "max_queue_bytes": self.max_queue_bytes,
            "late_events": self.late_events,
            "max_late_us": self.max_late_ns as f64 / 1000.0,
        });
        // Only for policies that keep counters of their own, so other links' lines are as before.
        if !self.policy_counters.is_empty() {
            let counters: Map<String, Value> =
                self.policy_counters.iter().map(|(name, n)| ((*name).to_string(), json!(n))).collect();
            v["policy_counters"] = Value::Object(counters);
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lateness_quantiles_come_from_the_histogram() {
        let mut l = Lateness::default();
        assert_eq!(l.quantile_us(0.5), None);
        for us in 1..=1000u64 {
            l.record(us * 1000, 1_000_000);
        }
        // Exact below 8 us; above, within the bucket's 12.5%.
        assert_eq!(l.quantile_us(0.001), Some(1));
        assert_eq!(l.quantile_us(0.005), Some(5));
        let p50 = l.quantile_us(0.5).unwrap();
        assert!((448..=500).contains(&p50), "{p50}");
        let p99 = l.quantile_us(0.99).unwrap();
        assert!((896..=990).contains(&p99), "{p99}");
        assert_eq!((l.events, l.late_events, l.max_late_ns), (1000, 0, 1_000_000));
        for i in 0..HIST_BUCKETS {
            assert_eq!(bucket(bucket_floor(i)), i, "bucket {i}");
        }
    }

    #[test]
    fn link_record_has_the_contract_shape() {
        let mut s = LinkStats::default();
        s.arrived.add(&PacketInfo::new(1500, 10, 0));
        s.arrived.add(&PacketInfo::new(40, 46, 0));
        s.dropped.add(&PacketInfo::new(1500, 10, 0));
        s.lost.add(&PacketInfo::new(1500, 10, 0));
        let edge = vec![
            EdgeCounters::new("mark", &[("remarked", 4)]),
            EdgeCounters::new("police", &[("in", 5), ("out", 2), ("dropped", 1)]),
            EdgeCounters::new("shape", &[("held", 3), ("dropped", 0), ("queue_pkts", 2)]),
        ];
        s.lateness.record(1_500_000, 1_000_000);
        s.lateness.record(200_000, 1_000_000);
        let mut snap = s.snapshot(3, 4500);
        snap.edge = edge;
        let v = snap.to_json();
        assert_eq!(v["arrived"]["high"], json!([1, 1500]));
        assert_eq!(v["arrived"]["other"], json!([1, 40]));
        assert_eq!(v["sent"]["lowest"], json!([0, 0]));
        assert_eq!(v["dropped"]["high"], json!([1, 1500]));
        assert_eq!(v["lost"]["high"], json!([1, 1500]));
        assert_eq!(v["lost"]["low"], json!([0, 0]));
        assert_eq!(
            v["edge"],
            json!([{"kind": "mark", "remarked": 4}, {"kind": "police", "in": 5, "out": 2, "dropped": 1},
                   {"kind": "shape", "held": 3, "dropped": 0, "queue_pkts": 2}])
        );
        assert_eq!((v["queue_pkts"].as_u64(), v["queue_bytes"].as_u64()), (Some(3), Some(4500)));
        assert_eq!((v["late_events"].as_u64(), v["max_late_us"].as_f64()), (Some(1), Some(1500.0)));
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        for k in ["max_queue_pkts", "max_queue_bytes", "late_events", "max_late_us"] {
            assert!(keys.contains(&k), "{k} missing");
        }
    }

    #[test]
    fn lateness_causes_report_issue_lateness_and_call_durations() {
        let mut c = LatenessCauses::default();
        c.at_issue.record(300_000, 1_000_000); // issued on time, the call then took 1.7 ms
        c.calls.record(1_700_000, 1_000_000);
        c.calls.record(50_000, 1_000_000);
        let v = c.fields();
        assert_eq!((v["late_at_issue_events"].as_u64(), v["max_late_at_issue_us"].as_f64()), (Some(0), Some(300.0)));
        assert_eq!((v["verdict_calls"].as_u64(), v["slow_verdict_calls"].as_u64()), (Some(2), Some(1)));
        assert_eq!(v["max_verdict_call_us"].as_f64(), Some(1700.0));
        assert!(v["verdict_call_p99_us"].as_u64().unwrap() >= 1536, "{v:?}");
    }
}
