//! Offline replay: drive one link with a packet trace instead of NFQUEUE.
//!
//! TRACE.csv: `time_us,size,dscp,flow` (header line, arrivals in time order).
//! FATES.csv: `id,time_us,size,dscp,flow,fate,fate_us,by` where fate is `sent` (fate_us =
//! delivery), `dropped` (refused on arrival) or `evicted` (by = id of the arrival that pushed it out).

use crate::link::{Fate, Link};
use crate::packet::PacketInfo;
use anyhow::{bail, Context, Result};
use std::io::{BufRead, Write};

#[derive(Debug, Clone, PartialEq)]
pub struct TracePacket {
    pub time_us: f64,
    pub size: u32,
    pub dscp: u8,
    pub flow: u64,
}

pub fn read_trace(input: impl BufRead) -> Result<Vec<TracePacket>> {
    let mut packets = Vec::new();
    let mut last = f64::NEG_INFINITY;
    for (n, line) in input.lines().enumerate() {
        let line = line?;
        let line = line.trim();
        if line.is_empty() || (n == 0 && line.starts_with("time")) {
            continue;
        }
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        if f.len() != 4 {
            bail!("trace line {}: expected time_us,size,dscp,flow, got {line:?}", n + 1);
        }
        let p = TracePacket {
            time_us: f[0].parse().with_context(|| format!("trace line {}: time_us {:?}", n + 1, f[0]))?,
            size: f[1].parse().with_context(|| format!("trace line {}: size {:?}", n + 1, f[1]))?,
            dscp: f[2].parse().with_context(|| format!("trace line {}: dscp {:?}", n + 1, f[2]))?,
            flow: f[3].parse().with_context(|| format!("trace line {}: flow {:?}", n + 1, f[3]))?,
        };
        if !(p.time_us >= last) || p.time_us < 0.0 {
            bail!("trace line {}: time {} is not in non-decreasing order", n + 1, p.time_us);
        }
        if p.size == 0 || p.dscp > 63 {
            bail!("trace line {}: size must be > 0 and dscp 0-63", n + 1);
        }
        last = p.time_us;
        packets.push(p);
    }
    Ok(packets)
}

/// One row of FATES.csv.
#[derive(Debug, Clone, PartialEq)]
pub struct FateRow {
    pub fate: &'static str,
    pub fate_ns: u64,
    pub by: Option<u64>,
}

/// Run the trace through the link; one fate per packet, indexed like the trace.
pub fn replay(link: &mut Link<usize>, trace: &[TracePacket]) -> Vec<FateRow> {
    let mut fates: Vec<Option<FateRow>> = vec![None; trace.len()];
    let mut out = Vec::new();
    let settle = |out: &mut Vec<Fate<usize>>, fates: &mut Vec<Option<FateRow>>| {
        for f in out.drain(..) {
            let (id, row) = match f {
                Fate::Deliver { handle, at, .. } => (handle, FateRow { fate: "sent", fate_ns: at, by: None }),
                Fate::Drop { handle, at, by, .. } => (
                    handle,
                    FateRow { fate: if by.is_some() { "evicted" } else { "dropped" }, fate_ns: at, by },
                ),
            };
            fates[id] = Some(row);
        }
    };
    for (id, p) in trace.iter().enumerate() {
        let now = (p.time_us * 1000.0).round() as u64;
        link.advance(now, &mut out);
        link.arrive(id, PacketInfo::new(p.size, p.dscp, p.flow), now, &mut out);
        settle(&mut out, &mut fates);
    }
    link.advance(u64::MAX, &mut out);
    settle(&mut out, &mut fates);
    fates.into_iter().map(|f| f.expect("every packet has a fate once the link is drained")).collect()
}

pub fn write_fates(mut w: impl Write, trace: &[TracePacket], fates: &[FateRow]) -> Result<()> {
    writeln!(w, "id,time_us,size,dscp,flow,fate,fate_us,by")?;
    for (id, (p, f)) in trace.iter().zip(fates).enumerate() {
        let by = f.by.map(|b| b.to_string()).unwrap_or_default();
        writeln!(
            w,
            "{id},{},{},{},{},{},{:.3},{by}",
            p.time_us, p.size, p.dscp, p.flow, f.fate, f.fate_ns as f64 / 1000.0
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Buffer;

    const TRACE: &str = "time_us,size,dscp,flow\n0,1500,10,1\n0,1500,12,1\n0,1500,12,2\n1000,500,0,3\n20000,1500,10,1\n";

    #[test]
    fn hand_computed_fates() {
        // 1.5 Mbit/s: 1500 B = 8 ms; delay 5 ms; one packet may wait. #0 on the wire 0-8,
        // #1 waits, 8-16; #2 and #3 find the buffer full; #4 finds the link idle: 20-28 (+5).
        let trace = read_trace(TRACE.as_bytes()).unwrap();
        let mut link = Link::droptail("l", 1_500_000, 5000, Some(Buffer::Packets(1)));
        let fates = replay(&mut link, &trace);
        let got: Vec<(&str, u64)> = fates.iter().map(|f| (f.fate, f.fate_ns / 1000)).collect();
        assert_eq!(
            got,
            vec![("sent", 13_000), ("sent", 21_000), ("dropped", 0), ("dropped", 1000), ("sent", 33_000)]
        );
        let mut csv = Vec::new();
        write_fates(&mut csv, &trace, &fates).unwrap();
        let text = String::from_utf8(csv).unwrap();
        assert!(text.starts_with("id,time_us,size,dscp,flow,fate,fate_us,by\n0,0,1500,10,1,sent,13000.000,\n"));
    }

    #[test]
    fn bad_traces_are_refused_with_the_line() {
        assert!(read_trace("time_us,size,dscp,flow\n5,1,0,0\n4,1,0,0\n".as_bytes())
            .unwrap_err()
            .to_string()
            .contains("line 3"));
        assert!(read_trace("1,2,3\n".as_bytes()).is_err());
        assert!(read_trace("1,0,0,0\n".as_bytes()).is_err());
    }
}
