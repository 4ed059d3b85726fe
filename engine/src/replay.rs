//! Offline replay: drive one link with a packet trace instead of NFQUEUE.
//!
//! TRACE.csv: a header line naming the columns `time_us,size,dscp,flow` and optionally
//! `proto,src,dst,sport,dport` (in any order; an empty cell: unknown, no ports), the link's arrivals
//! in time order (`rev` rows, below, may step back: an engine's arrival log keeps the live order).
//! A trace without a header line has the four first columns in that order.
//! FATES.csv: `id,time_us,size,dscp,flow,fate,fate_us,by,dscp_out,fates_version` where fate is `sent`
//! (fate_us = delivery), `dropped` (fate_us = when) or `evicted` (fate_us = when); `by` is, for
//! an eviction, the id of the arrival that pushed the packet out, and for drops `loss` (random
//! loss), `police` (a policer), `shape` (a full shaper buffer), empty when the policy refused it;
//! `dscp_out` is the DSCP the packet left (or was dropped) with; `fates_version` is FATES_VERSION.
//!
//! For the TCP-aware markers (edge/tcpf.rs) a trace may also carry `dir,flags,seq,ack,payload`:
//! `dir` is `fwd` (the replayed link's direction; empty means fwd) or `rev` (the other way, where
//! the ACKs come back: shown to the engine's ACK observers as if crossing another link of the
//! same router, and given no row in FATES.csv, whose `id` stays the trace's packet index);
//! `flags` the TCP flags byte, `seq`/`ack` the sequence and ACK numbers, `payload` the TCP
//! payload length. The four go together and need `proto,src,dst,sport,dport`.

use crate::link::{AckFeed, DropCause, Fate, Link};
use crate::packet::{PacketInfo, TcpInfo};
use anyhow::{bail, Context, Result};
use std::io::{BufRead, Write};
use std::net::Ipv4Addr;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct TracePacket {
    pub time_us: f64,
    pub size: u32,
    pub dscp: u8,
    pub flow: u64,
    pub proto: u8,
    pub src: u32,
    pub dst: u32,
    pub ports: Option<(u16, u16)>,
    /// The TCP header's fields, when the trace has them.
    pub tcp: Option<TcpInfo>,
    /// `dir` = `rev`: the other direction, only observed (its ACKs feed the TCP-aware markers).
    pub reverse: bool,
}

impl TracePacket {
    pub fn info(&self) -> PacketInfo {
        let info =
            PacketInfo::new(self.size, self.dscp, self.flow).with_addresses(self.proto, self.src, self.dst, self.ports);
        match self.tcp {
            Some(tcp) => info.with_tcp(tcp),
            None => info,
        }
    }
}

const REQUIRED: [&str; 4] = ["time_us", "size", "dscp", "flow"];
const OPTIONAL: [&str; 10] = ["proto", "src", "dst", "sport", "dport", "dir", "flags", "seq", "ack", "payload"];

/// A header line's column index of each field, REQUIRED then OPTIONAL (None: absent), or None
/// for the old four columns, whatever their header says.
fn trace_columns(f: &[&str]) -> Result<Option<Vec<Option<usize>>>> {
    if f.len() == 4 && !f.iter().any(|c| OPTIONAL.contains(c)) {
        return Ok(None);
    }
    let columns: Vec<Option<usize>> =
        REQUIRED.iter().chain(OPTIONAL.iter()).map(|name| f.iter().position(|c| c == name)).collect();
    if let Some(i) = (0..4).find(|i| columns[*i].is_none()) {
        bail!("trace header: no column {:?} (need time_us,size,dscp,flow)", REQUIRED[i]);
    }
    if let Some(unknown) = f.iter().find(|c| !REQUIRED.contains(c) && !OPTIONAL.contains(c)) {
        bail!("trace header: unknown column {unknown:?}");
    }
    Ok(Some(columns))
}

/// One data line of a trace: its fields, the columns the header gave and its line number.
struct TraceRow<'a> {
    f: &'a [&'a str],
    columns: &'a [Option<usize>],
    line: usize,
}

impl TraceRow<'_> {
    fn at(&self, i: usize) -> Option<&str> {
        self.columns[i].map(|c| self.f[c]).filter(|v| !v.is_empty())
    }

    fn num(&self, i: usize, name: &str) -> Result<Option<u64>> {
        let n = self.line;
        self.at(i).map(|v| v.parse::<u64>().with_context(|| format!("trace line {n}: {name} {v:?}"))).transpose()
    }

    fn addr(&self, i: usize, name: &str) -> Result<u32> {
        match self.at(i) {
            None => Ok(0),
            Some(v) => {
                Ok(u32::from(v.parse::<Ipv4Addr>().with_context(|| format!("trace line {}: {name} {v:?}", self.line))?))
            }
        }
    }

    fn port(&self, i: usize, name: &str) -> Result<Option<u16>> {
        self.num(i, name)?
            .map(|p| u16::try_from(p).with_context(|| format!("trace line {}: {name} {p}", self.line)))
            .transpose()
    }

    fn word(&self, i: usize, name: &str) -> Result<Option<u32>> {
        self.num(i, name)?
            .map(|v| u32::try_from(v).with_context(|| format!("trace line {}: {name} {v} (0-4294967295)", self.line)))
            .transpose()
    }

    fn required(&self, i: usize) -> &str {
        self.f[self.columns[i].unwrap()]
    }

    fn tcp(&self) -> Result<Option<TcpInfo>> {
        let n = self.line;
        Ok(match (self.num(10, "flags")?, self.word(11, "seq")?, self.word(12, "ack")?, self.word(13, "payload")?) {
            (Some(flags), Some(seq), Some(ack), Some(payload)) => Some(TcpInfo {
                flags: u8::try_from(flags).with_context(|| format!("trace line {n}: flags {flags} (0-255)"))?,
                seq,
                ack,
                payload,
            }),
            (None, None, None, None) => None,
            _ => bail!("trace line {n}: flags, seq, ack and payload go together"),
        })
    }

    fn packet(&self) -> Result<TracePacket> {
        let n = self.line;
        let proto = self.num(4, "proto")?.unwrap_or(0);
        let reverse = match self.at(9) {
            None | Some("fwd") => false,
            Some("rev") => true,
            Some(other) => bail!("trace line {n}: dir {other:?} (allowed: fwd, rev, or empty for fwd)"),
        };
        let tcp = self.tcp()?;
        Ok(TracePacket {
            time_us: self
                .required(0)
                .parse()
                .with_context(|| format!("trace line {n}: time_us {:?}", self.required(0)))?,
            size: self.required(1).parse().with_context(|| format!("trace line {n}: size"))?,
            dscp: self.required(2).parse().with_context(|| format!("trace line {n}: dscp"))?,
            flow: self.required(3).parse().with_context(|| format!("trace line {n}: flow"))?,
            proto: u8::try_from(proto).with_context(|| format!("trace line {n}: proto {proto}"))?,
            src: self.addr(5, "src")?,
            dst: self.addr(6, "dst")?,
            ports: match (self.port(7, "sport")?, self.port(8, "dport")?) {
                (Some(s), Some(d)) => Some((s, d)),
                (None, None) => None,
                _ => bail!("trace line {n}: sport and dport go together"),
            },
            tcp,
            reverse,
        })
    }
}

pub fn read_trace(input: impl BufRead) -> Result<Vec<TracePacket>> {
    let mut packets = Vec::new();
    let mut last = f64::NEG_INFINITY;
    // Column index of each field, REQUIRED then OPTIONAL (None: absent).
    let mut columns: Vec<Option<usize>> = (0..4).map(Some).chain([None; 10]).collect();
    let mut width = 4;
    for (n, line) in input.lines().enumerate() {
        let line = line?;
        let line = line.trim();
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        if line.is_empty() {
            continue;
        }
        if n == 0 && line.starts_with("time") {
            width = f.len();
            if let Some(c) = trace_columns(&f)? {
                columns = c;
            }
            continue;
        }
        if f.len() != width {
            bail!("trace line {}: expected {width} columns (time_us,size,dscp,flow...), got {line:?}", n + 1);
        }
        let p = TraceRow { f: &f, columns: &columns, line: n + 1 }.packet()?;
        if p.tcp.is_some() && (p.proto != 6 || p.ports.is_none()) {
            bail!("trace line {}: TCP fields need proto 6 and sport, dport", n + 1);
        }
        // The link's own arrivals go forward in time; a `rev` row may be earlier than the row
        // before it, as in an engine's arrival log (arrival_log.rs), which keeps the live order.
        if p.time_us.is_nan() || p.time_us < 0.0 || (!p.reverse && p.time_us < last) {
            bail!("trace line {}: time {} is not in non-decreasing order", n + 1, p.time_us);
        }
        if p.size == 0 || p.dscp > 63 {
            bail!("trace line {}: size must be > 0 and dscp 0-63", n + 1);
        }
        if !p.reverse {
            last = p.time_us;
        }
        packets.push(p);
    }
    Ok(packets)
}

/// One row of FATES.csv.
#[derive(Debug, Clone, PartialEq)]
pub struct FateRow {
    pub fate: &'static str,
    pub fate_ns: u64,
    /// `by`: the evicting arrival's id, `loss`, `police`, `shape`, or empty.
    pub by: String,
    pub dscp_out: u8,
}

/// Move the link's fates into `fates` (indexed by the trace's packet ids), refusing a second fate
/// for one packet or a fate for a packet the trace does not have.
fn settle(out: &mut Vec<Fate<usize>>, fates: &mut [Option<FateRow>]) -> Result<()> {
    for f in out.drain(..) {
        let (id, row) = match f {
            Fate::Deliver { handle, at, info } => {
                (handle, FateRow { fate: "sent", fate_ns: at, by: String::new(), dscp_out: info.dscp })
            }
            Fate::Drop { handle, at, cause, info, .. } => {
                let (fate, by) = match cause {
                    DropCause::Evicted { by } => ("evicted", by.to_string()),
                    DropCause::Refused => ("dropped", String::new()),
                    DropCause::Lost => ("dropped", "loss".into()),
                    DropCause::Policed => ("dropped", "police".into()),
                    DropCause::ShaperFull => ("dropped", "shape".into()),
                };
                (handle, FateRow { fate, fate_ns: at, by, dscp_out: info.dscp })
            }
        };
        match fates.get_mut(id) {
            None => bail!("packet {id}: a fate for a packet the trace does not have"),
            Some(Some(first)) => bail!(
                "packet {id}: a second fate ({} at {} ns after {} at {} ns)",
                row.fate,
                row.fate_ns,
                first.fate,
                first.fate_ns
            ),
            Some(slot) => *slot = Some(row),
        }
    }
    Ok(())
}

/// Run the trace through the link; one fate per packet of the link's direction (the trace's
/// `rev` packets have none), in trace order. Every packet is first shown to the link's ACK
/// observers, as nfq_loop does for every packet of its engine. A second fate for a packet, a fate
/// for a packet that never arrived, or a packet left without one is an engine bug: refused with
/// the packet named rather than overwritten (properties tests rely on it).
pub fn replay(link: &mut Link<usize>, trace: &[TracePacket]) -> Result<Vec<FateRow>> {
    let mut fates: Vec<Option<FateRow>> = vec![None; trace.len()];
    let mut out = Vec::new();
    let acks = AckFeed::of(std::slice::from_ref(&*link));
    for (id, p) in trace.iter().enumerate() {
        let now = (p.time_us * 1000.0).round() as u64;
        let info = p.info();
        if p.reverse {
            // Crossing another link of the router: only its observers matter here.
            acks.observe(&info, now);
            continue;
        }
        crate::nfq_loop::arrive(&acks, link, id, info, now, &mut out);
        settle(&mut out, &mut fates)?;
    }
    link.advance(u64::MAX, &mut out);
    settle(&mut out, &mut fates)?;
    fates
        .into_iter()
        .zip(trace)
        .enumerate()
        .filter(|(_, (_, p))| !p.reverse)
        .map(|(id, (f, _))| f.with_context(|| format!("packet {id}: no fate once the link is drained")))
        .collect()
}

/// FATES.csv's format version, written in its last column on every row: 1 had no `dscp_out`
/// and `by` only an evicting id; 2 (no version column) added `dscp_out` and `by` = `loss`,
/// `police`, `shape`; 3 is 2 with this column, so a reader can tell (docs/engine.md "Replay").
pub const FATES_VERSION: u32 = 3;

pub fn write_fates(mut w: impl Write, trace: &[TracePacket], fates: &[FateRow]) -> Result<()> {
    writeln!(w, "id,time_us,size,dscp,flow,fate,fate_us,by,dscp_out,fates_version")?;
    let on_link = trace.iter().enumerate().filter(|(_, p)| !p.reverse);
    for ((id, p), f) in on_link.zip(fates) {
        writeln!(
            w,
            "{id},{},{},{},{},{},{:.3},{},{},{FATES_VERSION}",
            p.time_us,
            p.size,
            p.dscp,
            p.flow,
            f.fate,
            f.fate_ns as f64 / 1000.0,
            f.by,
            f.dscp_out
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Buffer;

    const TRACE: &str =
        "time_us,size,dscp,flow\n0,1500,10,1\n0,1500,12,1\n0,1500,12,2\n1000,500,0,3\n20000,1500,10,1\n";

    #[test]
    fn hand_computed_fates() {
        // 1.5 Mbit/s: 1500 B = 8 ms; delay 5 ms; one packet may wait. #0 on the wire 0-8,
        // #1 waits, 8-16; #2 and #3 find the buffer full; #4 finds the link idle: 20-28 (+5).
        let trace = read_trace(TRACE.as_bytes()).unwrap();
        let mut link = Link::droptail("l", 1_500_000, 5000, Some(Buffer::Packets(1)));
        let fates = replay(&mut link, &trace).unwrap();
        let got: Vec<(&str, u64)> = fates.iter().map(|f| (f.fate, f.fate_ns / 1000)).collect();
        assert_eq!(got, vec![("sent", 13_000), ("sent", 21_000), ("dropped", 0), ("dropped", 1000), ("sent", 33_000)]);
        let mut csv = Vec::new();
        write_fates(&mut csv, &trace, &fates).unwrap();
        let text = String::from_utf8(csv).unwrap();
        assert!(text.starts_with(
            "id,time_us,size,dscp,flow,fate,fate_us,by,dscp_out,fates_version\n0,0,1500,10,1,sent,13000.000,,10,3\n"
        ));
    }

    #[test]
    fn extra_columns_feed_the_edge_functions_and_fates_say_who_dropped() {
        // Columns by name, in another order; a mark by destination port, a policer dropping
        // AF11 beyond 8 kbit/s with a 1000-byte bucket, loss for the rest.
        let trace = "time_us,size,dscp,flow,dport,sport,proto,src,dst\n\
                     0,1000,0,1,80,4000,6,10.0.0.1,10.0.0.2\n\
                     0,1000,0,1,80,4000,6,10.0.0.1,10.0.0.2\n\
                     0,1000,0,2,22,4001,6,10.0.0.1,10.0.0.2\n\
                     10,100,46,3,,,1,10.0.0.3,10.0.0.2\n";
        let trace = read_trace(trace.as_bytes()).unwrap();
        assert_eq!((trace[0].proto, trace[0].src, trace[0].ports), (6, 0x0a00_0001, Some((4000, 80))));
        assert_eq!((trace[3].proto, trace[3].ports), (1, None));
        let config = crate::config::Config::parse(&crate::testkit::filled(
            r#"{"seed": 2, "links": [{"name": "l", "queue_num": 0, "rate_bps": 1000000, "delay_us": 0,
                "buffer": null, "policy": {"kind": "droptail"}, "loss": {"p": 0.999999, "p_high": 0},
                "edge": [{"kind": "mark", "rules": [{"proto": 6, "dport": [80, 80], "dscp": 10}]},
                         {"kind": "police", "rate_bps": 8000, "bucket_bytes": 1000, "dscp": [10], "exceed": {"action": "drop"}}]}]}"#,
        ))
        .unwrap();
        let mut link: Link<usize> = Link::new(&config.links[0], 2).unwrap();
        let fates = replay(&mut link, &trace).unwrap();
        let got: Vec<(&str, &str, u8)> = fates.iter().map(|f| (f.fate, f.by.as_str(), f.dscp_out)).collect();
        assert_eq!(
            got,
            vec![("sent", "", 10), ("dropped", "police", 10), ("dropped", "loss", 0), ("dropped", "loss", 46)]
        );
        let mut csv = Vec::new();
        write_fates(&mut csv, &trace, &fates).unwrap();
        let text = String::from_utf8(csv).unwrap();
        assert_eq!(text.lines().nth(2), Some("1,0,1000,0,1,dropped,0.000,police,10,3"));
        assert_eq!(text.lines().nth(3), Some("2,0,1000,0,2,dropped,0.000,loss,0,3"));
        // The old four columns still read, with or without a header.
        assert_eq!(read_trace("time,size,dscp,flow\n1,2,3,4\n".as_bytes()).unwrap()[0].flow, 4);
        assert_eq!(read_trace("1,2,3,4\n".as_bytes()).unwrap()[0].dscp, 3);
        assert!(read_trace("time_us,size,dscp,flow,port\n".as_bytes())
            .unwrap_err()
            .to_string()
            .contains("unknown column \"port\""));
        assert!(read_trace("time_us,size,dscp,flow,sport\n0,1,0,0,70000\n".as_bytes()).is_err());
    }

    #[test]
    fn tcp_columns_feed_a_tcpf_marker_both_directions() {
        // Two data packets, the ACK of the first coming back (rev: observed, no fate row), a
        // retransmission of the first: IN under TCPF whatever its tokens.
        let trace = "time_us,size,dscp,flow,proto,src,dst,sport,dport,dir,flags,seq,ack,payload\n\
                     0,1040,0,1,6,10.0.0.1,10.0.0.2,4000,80,fwd,16,100,1,1000\n\
                     10,1040,0,1,6,10.0.0.1,10.0.0.2,4000,80,,16,1100,1,1000\n\
                     50,40,0,2,6,10.0.0.2,10.0.0.1,80,4000,rev,16,1,1100,0\n\
                     60,1040,0,1,6,10.0.0.1,10.0.0.2,4000,80,fwd,16,1100,1,1000\n";
        let trace = read_trace(trace.as_bytes()).unwrap();
        assert_eq!(trace[2].tcp.map(|t| t.ack), Some(1100));
        assert!(trace[2].reverse && !trace[1].reverse);
        let config = crate::config::Config::parse(&crate::testkit::filled(
            r#"{"links": [{"name": "l", "queue_num": 0, "rate_bps": 0, "delay_us": 0, "buffer": null,
                "policy": {"kind": "droptail"}, "edge": [{"kind": "tcpf", "pool_bytes": 1000}]}]}"#,
        ))
        .unwrap();
        let mut link: Link<usize> = Link::new(&config.links[0], 0).unwrap();
        let fates = replay(&mut link, &trace).unwrap();
        assert_eq!(fates.len(), 3);
        let mut csv = Vec::new();
        write_fates(&mut csv, &trace, &fates).unwrap();
        let text = String::from_utf8(csv).unwrap();
        let ids: Vec<&str> = text.lines().skip(1).map(|l| l.split(',').next().unwrap()).collect();
        assert_eq!(ids, vec!["0", "1", "3"]);
        assert_eq!(fates[2].dscp_out, 10, "the retransmission is IN");
        let c = &link.snapshot().edge[0];
        assert_eq!((c.kind, c.get("acks"), c.get("retrans_protected")), ("tcpf", 1, 1));
        for (bad, want) in [
            ("0,40,0,1,6,10.0.0.1,10.0.0.2,1,2,back,16,1,1,0", "dir \"back\" (allowed: fwd, rev"),
            ("0,40,0,1,6,10.0.0.1,10.0.0.2,1,2,fwd,16,,1,0", "flags, seq, ack and payload go together"),
            ("0,40,0,1,6,10.0.0.1,10.0.0.2,1,2,fwd,16,4294967296,1,0", "seq 4294967296"),
            ("0,40,0,1,17,10.0.0.1,10.0.0.2,1,2,fwd,16,1,1,0", "TCP fields need proto 6"),
        ] {
            let text = format!("time_us,size,dscp,flow,proto,src,dst,sport,dport,dir,flags,seq,ack,payload\n{bad}\n");
            let e = read_trace(text.as_bytes()).unwrap_err().to_string();
            assert!(e.contains(want), "{bad}: {e}");
        }
    }

    #[test]
    fn only_the_links_own_arrivals_must_go_forward_in_time() {
        let head = "time_us,size,dscp,flow,dir\n";
        // An ACK taken by the live engine after a data packet stamped later (arrival_log.rs).
        let live_order = format!("{head}10,1500,0,1,fwd\n8,40,0,2,rev\n12,1500,0,1,fwd\n");
        let trace = read_trace(live_order.as_bytes()).unwrap();
        assert_eq!(trace.iter().map(|p| p.time_us).collect::<Vec<_>>(), vec![10.0, 8.0, 12.0]);
        for bad in [format!("{head}10,1500,0,1,fwd\n8,40,0,2,rev\n9,1500,0,1,fwd\n"), format!("{head}-1,40,0,2,rev\n")]
        {
            let e = read_trace(bad.as_bytes()).unwrap_err().to_string();
            assert!(e.contains("not in non-decreasing order"), "{bad}: {e}");
        }
    }

    #[test]
    fn a_second_fate_or_an_unknown_packet_is_refused() {
        let info = PacketInfo::new(100, 0, 1);
        let mut fates = vec![None, None];
        let mut out = vec![
            Fate::Deliver { handle: 0, at: 5, info: info.clone() },
            Fate::Drop { handle: 0, at: 6, info: info.clone(), seq: 0, cause: DropCause::Refused },
        ];
        let err = settle(&mut out, &mut fates).unwrap_err().to_string();
        assert!(err.contains("packet 0: a second fate (dropped"), "{err}");
        let mut out = vec![Fate::Deliver { handle: 2, at: 5, info }];
        assert!(settle(&mut out, &mut fates).unwrap_err().to_string().contains("packet 2"));
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
