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

    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        for class in CLASSES {
            m.insert(class.name().into(), json!(self.0[class.index()]));
        }
        Value::Object(m)
    }
}

/// Lateness of verdicts against their schedule.
#[derive(Clone, Copy, Debug, Default)]
pub struct Lateness {
    pub events: u64,
    pub late_events: u64,
    pub max_late_ns: u64,
}

impl Lateness {
    pub fn record(&mut self, late_ns: u64, threshold_ns: u64) {
        self.events += 1;
        if late_ns > threshold_ns {
            self.late_events += 1;
        }
        self.max_late_ns = self.max_late_ns.max(late_ns);
    }
}

#[derive(Clone, Debug, Default)]
pub struct LinkStats {
    pub arrived: ClassCounts,
    pub sent: ClassCounts,
    pub dropped: ClassCounts,
    pub max_queue_pkts: usize,
    pub max_queue_bytes: usize,
    pub lateness: Lateness,
}

impl LinkStats {
    pub fn to_json(&self, queue_pkts: usize, queue_bytes: usize) -> Value {
        json!({
            "arrived": self.arrived.to_json(),
            "sent": self.sent.to_json(),
            "dropped": self.dropped.to_json(),
            "queue_pkts": queue_pkts,
            "queue_bytes": queue_bytes,
            "max_queue_pkts": self.max_queue_pkts,
            "max_queue_bytes": self.max_queue_bytes,
            "late_events": self.lateness.late_events,
            "max_late_us": self.lateness.max_late_ns as f64 / 1000.0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_record_has_the_contract_shape() {
        let mut s = LinkStats::default();
        s.arrived.add(&PacketInfo::new(1500, 10, 0));
        s.arrived.add(&PacketInfo::new(40, 46, 0));
        s.dropped.add(&PacketInfo::new(1500, 10, 0));
        s.lateness.record(1_500_000, 1_000_000);
        s.lateness.record(200_000, 1_000_000);
        let v = s.to_json(3, 4500);
        assert_eq!(v["arrived"]["high"], json!([1, 1500]));
        assert_eq!(v["arrived"]["other"], json!([1, 40]));
        assert_eq!(v["sent"]["lowest"], json!([0, 0]));
        assert_eq!(v["dropped"]["high"], json!([1, 1500]));
        assert_eq!((v["queue_pkts"].as_u64(), v["queue_bytes"].as_u64()), (Some(3), Some(4500)));
        assert_eq!((v["late_events"].as_u64(), v["max_late_us"].as_f64()), (Some(1), Some(1500.0)));
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        for k in ["max_queue_pkts", "max_queue_bytes", "late_events", "max_late_us"] {
            assert!(keys.contains(&k), "{k} missing");
        }
    }
}
