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
    pub dscp: u8,
    pub class: Class,
    /// Hash of the 5-tuple, for per-flow policies.
    pub flow: u64,
}

impl PacketInfo {
    pub fn new(len: u32, dscp: u8, flow: u64) -> PacketInfo {
        PacketInfo { len, dscp, class: Class::from_dscp(dscp), flow }
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
        if (proto == 6 || proto == 17) && bytes.len() >= ihl + 4 {
            h.write(&bytes[ihl..ihl + 4]);
        }
        PacketInfo::new(total, bytes[1] >> 2, h.finish())
    }
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
    fn flows_differ_by_port_and_truncated_headers_survive() {
        let a = PacketInfo::parse(&header(0, 60), 60);
        let mut other = header(0, 60);
        other[21] = 81;
        assert_ne!(a.flow, PacketInfo::parse(&other, 60).flow);
        assert_eq!(PacketInfo::parse(&[0x60; 40], 77).len, 77);
    }
}
