//! What the engine needs to know about a packet, read from the start of its IPv4 header.

/// Priority class from the DSCP field. AF11 is CATNIP's high priority (low drop
/// precedence), AF12 its low priority; AF13 is the lowest of the 3-level schemes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Class {
    High,
    Low,
    Lowest,
    Other,
}

pub const CLASSES: [Class; 4] = [Class::High, Class::Low, Class::Lowest, Class::Other];

pub const DSCP_AF11: u8 = 10;
pub const DSCP_AF12: u8 = 12;
pub const DSCP_AF13: u8 = 14;

impl Class {
    pub fn from_dscp(dscp: u8) -> Class {
        match dscp {
            DSCP_AF11 => Class::High,
            DSCP_AF12 => Class::Low,
            DSCP_AF13 => Class::Lowest,
            _ => Class::Other,
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }

    pub fn name(self) -> &'static str {
        match self {
            Class::High => "high",
            Class::Low => "low",
            Class::Lowest => "lowest",
            Class::Other => "other",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketInfo {
    /// IP total length: what serialization counts (as ns-2 and netem do).
    pub len: u32,
    /// The DSCP the packet has now (edge functions may change it; see [`PacketInfo::set_dscp`]).
    pub dscp: u8,
    pub class: Class,
    /// Hash of the 5-tuple, for per-flow policies.
    pub flow: u64,
    /// IP protocol (0 when unknown), source and destination addresses (host order).
    pub proto: u8,
    pub src: u32,
    pub dst: u32,
    /// Source and destination ports, for TCP and UDP packets that carry them.
    pub ports: Option<(u16, u16)>,
    /// The TCP header's sequence fields, for TCP packets whose header was copied (the TCP-aware
    /// markers, edge/tcpf.rs, read them).
    pub tcp: Option<TcpInfo>,
}

/// What a TCP-aware edge function reads from a TCP header (all within the first 14 bytes of it,
/// so the 80 bytes copied from the kernel hold them behind any IPv4 header without options).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpInfo {
    pub seq: u32,
    pub ack: u32,
    /// The flags byte (FIN 0x01, SYN 0x02, RST 0x04, PSH 0x08, ACK 0x10).
    pub flags: u8,
    /// Payload bytes: IP total length minus the IP and TCP headers.
    pub payload: u32,
}

pub const TCP_ACK: u8 = 0x10;

impl PacketInfo {
    pub fn new(len: u32, dscp: u8, flow: u64) -> PacketInfo {
        PacketInfo { len, dscp, class: Class::from_dscp(dscp), flow, proto: 0, src: 0, dst: 0, ports: None, tcp: None }
    }

    /// The same packet with a TCP header's fields (tests and traces).
    pub fn with_tcp(self, tcp: TcpInfo) -> PacketInfo {
        PacketInfo { tcp: Some(tcp), ..self }
    }

    /// The same packet with its protocol, addresses and ports (replay traces that carry them).
    pub fn with_addresses(self, proto: u8, src: u32, dst: u32, ports: Option<(u16, u16)>) -> PacketInfo {
        PacketInfo { proto, src, dst, ports, ..self }
    }

    /// Change the DSCP, and with it the class.
    pub fn set_dscp(&mut self, dscp: u8) {
        self.dscp = dscp;
        self.class = Class::from_dscp(dscp);
    }

    /// Parse an IPv4 header (and the ports after it, when present). `wire_len` is used when
    /// the header is truncated or not IPv4, so a packet is never lost for being odd.
    pub fn parse(bytes: &[u8], wire_len: usize) -> PacketInfo {
        if bytes.len() < 20 || bytes[0] >> 4 != 4 {
            return PacketInfo::new(wire_len as u32, 0, 0);
        }
        let ihl = usize::from(bytes[0] & 0x0f) * 4;
        let total = u32::from(u16::from_be_bytes([bytes[2], bytes[3]]));
        let proto = bytes[9];
        let mut h = Fnv::new();
        h.write(&bytes[12..20]);
        h.write(&[proto]);
        let l4 = (proto == 6 || proto == 17) && bytes.len() >= ihl + 4;
        if l4 {
            h.write(&bytes[ihl..ihl + 4]);
        }
        // Only a first fragment (offset 0) starts with the ports.
        let first_fragment = u16::from_be_bytes([bytes[6], bytes[7]]) & 0x1fff == 0;
        let ports = (l4 && first_fragment).then(|| {
            (u16::from_be_bytes([bytes[ihl], bytes[ihl + 1]]), u16::from_be_bytes([bytes[ihl + 2], bytes[ihl + 3]]))
        });
        let word = |at: usize| u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
        let tcp = (proto == 6 && first_fragment && bytes.len() >= ihl + 14).then(|| {
            let headers = ihl as u32 + u32::from(bytes[ihl + 12] >> 4) * 4;
            TcpInfo {
                seq: word(ihl + 4),
                ack: word(ihl + 8),
                flags: bytes[ihl + 13],
                payload: total.saturating_sub(headers),
            }
        });
        let info = PacketInfo::new(total, bytes[1] >> 2, h.finish()).with_addresses(proto, word(12), word(16), ports);
        PacketInfo { tcp, ..info }
    }
}

/// Write `dscp` into an IPv4 header's DS field, keeping the two ECN bits, and update the header
/// checksum incrementally (RFC 1624, eqn. 3: HC' = ~(~HC + ~m + m'), m the 16-bit word holding
/// the DS field). False, and nothing changed, when `bytes` is not an IPv4 header.
pub fn rewrite_dscp(bytes: &mut [u8], dscp: u8) -> bool {
    if bytes.len() < 20 || bytes[0] >> 4 != 4 || dscp > 63 {
        return false;
    }
    let tos = dscp << 2 | bytes[1] & 0x03;
    let old = u16::from_be_bytes([bytes[0], bytes[1]]);
    let new = u16::from_be_bytes([bytes[0], tos]);
    let check = u16::from_be_bytes([bytes[10], bytes[11]]);
    let mut sum = u32::from(!check) + u32::from(!old) + u32::from(new);
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    bytes[1] = tos;
    bytes[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    true
}

/// FNV-1a: tiny, deterministic across runs (unlike std's randomly seeded hasher).
struct Fnv(u64);

impl Fnv {
    fn new() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(tos: u8, len: u16) -> Vec<u8> {
        let mut h = vec![0u8; 24];
        h[0] = 0x45;
        h[1] = tos;
        h[2..4].copy_from_slice(&len.to_be_bytes());
        h[9] = 6;
        h[12..16].copy_from_slice(&[10, 2, 0, 2]);
        h[16..20].copy_from_slice(&[10, 1, 0, 2]);
        h[20..24].copy_from_slice(&[0, 80, 0x9c, 0x40]);
        h
    }

    #[test]
    fn reads_length_and_dscp_class() {
        let p = PacketInfo::parse(&header(DSCP_AF11 << 2 | 1, 1500), 1500);
        assert_eq!((p.len, p.dscp, p.class), (1500, DSCP_AF11, Class::High));
        assert_eq!(PacketInfo::parse(&header(DSCP_AF12 << 2, 552), 552).class, Class::Low);
        assert_eq!(PacketInfo::parse(&header(DSCP_AF13 << 2, 552), 552).class, Class::Lowest);
        assert_eq!(PacketInfo::parse(&header(0, 60), 60).class, Class::Other);
    }

    #[test]
    fn reads_protocol_addresses_and_ports() {
        let p = PacketInfo::parse(&header(0, 60), 60);
        assert_eq!((p.proto, p.src, p.dst, p.ports), (6, 0x0a02_0002, 0x0a01_0002, Some((80, 0x9c40))));
        let mut fragment = header(0, 60);
        fragment[7] = 10; // offset 80 bytes: no ports here
        assert_eq!(PacketInfo::parse(&fragment, 60).ports, None);
        let mut icmp = header(0, 60);
        icmp[9] = 1;
        assert_eq!(PacketInfo::parse(&icmp, 60).ports, None);
    }

    /// The one's complement header checksum computed from scratch.
    fn checksum(h: &[u8]) -> u16 {
        let mut sum: u32 =
            h.chunks(2).enumerate().filter(|(i, _)| *i != 5).map(|(_, w)| u32::from(w[0]) << 8 | u32::from(w[1])).sum();
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        !(sum as u16)
    }

    #[test]
    fn dscp_rewrite_keeps_ecn_and_fixes_the_checksum() {
        // The classic example header (checksum 0xb861), computed by hand: the words sum to
        // 0x479e without the checksum; TOS 0x00 -> 0x28 (AF11) adds 0x28: ~0x47c6 = 0xb839.
        let mut h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8,
            0x00, 0xc7,
        ];
        assert!(rewrite_dscp(&mut h, DSCP_AF11));
        assert_eq!((h[1], h[10], h[11]), (0x28, 0xb8, 0x39));
        // ECN bits (here CE, 3) are kept: TOS 0x2b -> AF13 0x3b, checksum 0x479e + 0x3b = 0x47d9 -> 0xb826.
        h[1] = 0x2b;
        h[10..12].copy_from_slice(&[0xb8, 0x36]); // 0x479e + 0x2b = 0x47c9 -> 0xb836
        assert_eq!(checksum(&h), 0xb836);
        assert!(rewrite_dscp(&mut h, DSCP_AF13));
        assert_eq!((h[1], h[10], h[11]), (0x3b, 0xb8, 0x26));
        // Against a full recomputation, every DSCP from every TOS, with options and odd sums.
        let mut g = header(0, 1500);
        g.truncate(20);
        g[0] = 0x45;
        g[12..20].copy_from_slice(&[0xff, 0xfe, 0xff, 0xff, 0x0a, 0x00, 0x00, 0x01]);
        for tos in 0..=255u8 {
            for dscp in 0..64u8 {
                g[1] = tos;
                let c = checksum(&g);
                g[10..12].copy_from_slice(&c.to_be_bytes());
                assert!(rewrite_dscp(&mut g, dscp));
                assert_eq!((g[1] >> 2, g[1] & 3), (dscp, tos & 3));
                assert_eq!(u16::from_be_bytes([g[10], g[11]]), checksum(&g), "tos {tos} dscp {dscp}");
            }
        }
        assert!(!rewrite_dscp(&mut [0x60; 40], 10));
    }

    #[test]
    fn reads_the_tcp_sequence_fields() {
        let mut h = header(0, 1500);
        h.resize(40, 0);
        h[24..28].copy_from_slice(&0xfffffff0u32.to_be_bytes()); // seq
        h[28..32].copy_from_slice(&7u32.to_be_bytes()); // ack
        h[32] = 5 << 4; // data offset: 20 bytes
        h[33] = TCP_ACK | 0x08;
        let tcp = PacketInfo::parse(&h, 1500).tcp.unwrap();
        assert_eq!(tcp, TcpInfo { seq: 0xfffffff0, ack: 7, flags: 0x18, payload: 1460 });
        h[32] = 8 << 4; // 12 bytes of options
        assert_eq!(PacketInfo::parse(&h, 1500).tcp.unwrap().payload, 1448);
        h[9] = 17;
        assert_eq!(PacketInfo::parse(&h, 1500).tcp, None);
        assert_eq!(PacketInfo::parse(&header(0, 60), 60).tcp, None); // the TCP header was not copied
    }

    #[test]
    fn flows_differ_by_port_and_truncated_headers_survive() {
        let a = PacketInfo::parse(&header(0, 60), 60);
        let mut other = header(0, 60);
        other[21] = 81;
        assert_ne!(a.flow, PacketInfo::parse(&other, 60).flow);
        assert_eq!(PacketInfo::parse(&[0x60; 40], 77).len, 77);
    }
}
