// SPDX-License-Identifier: GPL-2.0
/* TCP-state marking, "TCP-DS" (Nouredine and Tobagi, Computer Networks 40 (2002), section 6.1,
 * Algorithm 1), at the sending hosts, for an unmodified kernel.
 *
 * Two tc programs share one per-point config and one map of received priorities:
 *  - tcpds_mark (egress of every host's interface) gives each TCP segment a drop level from the
 *    state of the socket that sends it. With w = min(cwnd, peer's window in segments):
 *        w <= HIGH_thresh                              -> HIGH  (AF11)
 *        SYN, or sent in fast recovery                 -> HIGH  (footnote 5: NewReno's recovery)
 *        w <= MED_thresh                               -> MED   (AF12)
 *        otherwise                                     -> LOW   (AF13)
 *    In the randomized variant (the italic lines of Algorithm 1) a MED segment is HIGH with
 *    probability HIGH_thresh/w, and a LOW one HIGH with probability HIGH_thresh/w, else MED with
 *    probability MED_thresh/w (the two draws in sequence, as written). Segments to or from an
 *    "always high" port are HIGH (section 6.1.2: Telnet's thresholds are the maximum window).
 *  - Pure ACKs carry the priority of the data they acknowledge (section 6.3): tcpds_record
 *    (ingress of the same interface) keeps, per connection, the highest level received since the
 *    last ACK went out (with delayed ACKs an ACK covers two segments) and the last level sent;
 *    tcpds_mark stamps it on the connection's next pure ACK. A level is read from the DSCP the
 *    segment arrives with (routers' shapers and policers may have remarked it on the way).
 * Handshake segments that consume sequence space (SYN-ACK) are recorded too, so the ACK that
 * completes a handshake is HIGH like the SYN-ACK it acknowledges.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_core_read.h>

#define ETH_P_IP 0x0800
#define IPPROTO_TCP_ 6
#define TC_ACT_OK 0
#define TCP_CA_RECOVERY_ 3

/* DSCP code points (RFC 2597 AF1x); engine/src/policy/multired.rs reads the same three levels. */
#define DSCP_AF11 10
#define DSCP_AF12 12
#define DSCP_AF13 14

enum level { L_HIGH = 0, L_MED = 1, L_LOW = 2, L_NONE = 0xff };

#define MAX_PORT_RANGES 8

struct tcpds_config {
	__u8 enabled;
	__u8 randomized;
	__u8 ranges;       /* how many of high_ports are used */
	__u8 pad;
	__u32 high_thresh; /* segments: 4 in section 6.3 */
	__u32 med_thresh;  /* segments: 8 in section 6.3 */
	__u16 high_ports[MAX_PORT_RANGES][2]; /* [lo, hi]: always HIGH, either end of the connection */
};

enum counter {
	C_DATA_HIGH, C_DATA_MED, C_DATA_LOW, C_ACK_HIGH, C_ACK_MED, C_ACK_LOW, C_ACK_UNKNOWN, C_SYN,
	C_RECOVERY, C_ALWAYS_HIGH, C_RANDOM_UP, C_NO_SOCKET, C_RECORDED, C_MAX
};

struct conn_key {
	__u32 local, remote;
	__u16 lport, rport;
};

struct conn_levels {
	__u8 pending; /* highest level received since the last ACK (L_NONE: nothing new) */
	__u8 last;    /* the level the last ACK carried, for ACKs with nothing new (duplicates) */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
	__type(key, __u32);
	__type(value, struct tcpds_config);
} catnip_ds_cfg SEC(".maps");

/* A host's own thresholds, by its IPv4 address (network order); hosts not in it use the config's. */
struct thresholds {
	__u32 high;
	__u32 med;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
	__type(key, __u32);
	__type(value, struct thresholds);
} catnip_ds_host SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, C_MAX);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
	__type(key, __u32);
	__type(value, __u64);
} catnip_ds_count SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
	__type(key, struct conn_key);
	__type(value, struct conn_levels);
} catnip_ds_recv SEC(".maps");

static __always_inline void count(__u32 which)
{
	__u64 *v = bpf_map_lookup_elem(&catnip_ds_count, &which);
	if (v)
		*v += 1;
}

static const __u8 level_dscp[3] = { DSCP_AF11, DSCP_AF12, DSCP_AF13 };

static __always_inline __u8 dscp_level(__u8 dscp)
{
	if (dscp == DSCP_AF11)
		return L_HIGH;
	if (dscp == DSCP_AF12)
		return L_MED;
	return L_LOW; /* AF13 and anything else: the routers' three-level table counts it LOW */
}

static __always_inline void set_level(struct __sk_buff *skb, struct iphdr *ip, __u8 level)
{
	__u8 old = ip->tos, tos;

	if (level > L_LOW)
		return;
	tos = (level_dscp[level] << 2) | (old & 3); /* keep the ECN bits */
	if (old == tos)
		return;
	bpf_l3_csum_replace(skb, sizeof(struct ethhdr) + offsetof(struct iphdr, check), bpf_htons(old),
			    bpf_htons(tos), 2);
	bpf_skb_store_bytes(skb, sizeof(struct ethhdr) + offsetof(struct iphdr, tos), &tos, 1, 0);
}

static __always_inline int always_high(const struct tcpds_config *cfg, __u16 a, __u16 b)
{
	int i;

	for (i = 0; i < MAX_PORT_RANGES; i++) {
		if (i >= cfg->ranges)
			break;
		if ((a >= cfg->high_ports[i][0] && a <= cfg->high_ports[i][1]) ||
		    (b >= cfg->high_ports[i][0] && b <= cfg->high_ports[i][1]))
			return 1;
	}
	return 0;
}

/* True with probability num/den (den > 0). */
static __always_inline int chance(__u32 num, __u32 den)
{
	return (__u64)bpf_get_prandom_u32() * den < (__u64)num << 32;
}

static __always_inline __u8 window_level(const struct tcpds_config *cfg, const struct thresholds *th,
					 struct tcp_sock *tp)
{
	__u32 mss = tp->mss_cache ? tp->mss_cache : 1;
	__u32 w = tp->snd_cwnd, rwnd = tp->snd_wnd / mss;
	__u8 ca_state;

	if (rwnd < w)
		w = rwnd;
	if (w <= th->high)
		return L_HIGH;
	ca_state = BPF_CORE_READ_BITFIELD(&tp->inet_conn, icsk_ca_state);
	if (ca_state == TCP_CA_RECOVERY_) {
		count(C_RECOVERY);
		return L_HIGH;
	}
	if (cfg->randomized && chance(th->high, w)) {
		count(C_RANDOM_UP);
		return L_HIGH;
	}
	if (w <= th->med)
		return L_MED;
	if (cfg->randomized && chance(th->med, w)) {
		count(C_RANDOM_UP);
		return L_MED;
	}
	return L_LOW;
}

/* Headers of an IPv4 TCP segment, or 0. */
static __always_inline int parse(struct __sk_buff *skb, struct iphdr **ipp, struct tcphdr **tcpp, __u32 *payload)
{
	void *data = (void *)(long)skb->data, *data_end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip;
	struct tcphdr *tcp;
	__u32 ihl;

	if ((void *)(eth + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP))
		return 0;
	ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > data_end || ip->protocol != IPPROTO_TCP_)
		return 0;
	ihl = ip->ihl * 4;
	if (ihl < sizeof(*ip))
		return 0;
	tcp = (void *)ip + ihl;
	if ((void *)(tcp + 1) > data_end)
		return 0;
	*payload = bpf_ntohs(ip->tot_len) - ihl - tcp->doff * 4;
	*ipp = ip;
	*tcpp = tcp;
	return 1;
}

SEC("tc")
int tcpds_mark(struct __sk_buff *skb)
{
	struct tcpds_config *cfg;
	struct conn_levels *seen;
	struct conn_key key;
	struct iphdr *ip;
	struct tcphdr *tcp;
	struct bpf_sock *sk;
	struct tcp_sock *tp;
	struct thresholds th, *own;
	__u32 zero = 0, payload;
	__u8 level;

	cfg = bpf_map_lookup_elem(&catnip_ds_cfg, &zero);
	if (!cfg || !cfg->enabled || !parse(skb, &ip, &tcp, &payload))
		return TC_ACT_OK;
	if (always_high(cfg, bpf_ntohs(tcp->source), bpf_ntohs(tcp->dest))) {
		count(C_ALWAYS_HIGH);
		set_level(skb, ip, L_HIGH);
		return TC_ACT_OK;
	}
	if (tcp->syn) {
		count(C_SYN);
		set_level(skb, ip, L_HIGH);
		return TC_ACT_OK;
	}
	if (payload == 0 || payload > 0xffff) {
		/* A pure ACK (or FIN, RST): the priority of what it acknowledges. */
		key.local = ip->saddr;
		key.remote = ip->daddr;
		key.lport = tcp->source;
		key.rport = tcp->dest;
		seen = bpf_map_lookup_elem(&catnip_ds_recv, &key);
		if (!seen) {
			count(C_ACK_UNKNOWN);
			set_level(skb, ip, L_LOW);
			return TC_ACT_OK;
		}
		if (seen->pending != L_NONE) {
			seen->last = seen->pending;
			seen->pending = L_NONE;
		}
		level = seen->last;
		count(level == L_HIGH ? C_ACK_HIGH : level == L_MED ? C_ACK_MED : C_ACK_LOW);
		set_level(skb, ip, level);
		return TC_ACT_OK;
	}
	/* Data: skb->sk is the full TCP socket that sent it. */
	sk = skb->sk;
	if (sk)
		sk = bpf_sk_fullsock(sk);
	tp = sk ? bpf_skc_to_tcp_sock(sk) : NULL;
	if (!tp) {
		count(C_NO_SOCKET);
		return TC_ACT_OK;
	}
	own = bpf_map_lookup_elem(&catnip_ds_host, &ip->saddr);
	if (own) {
		th = *own;
	} else {
		th.high = cfg->high_thresh;
		th.med = cfg->med_thresh;
	}
	level = window_level(cfg, &th, tp);
	count(level == L_HIGH ? C_DATA_HIGH : level == L_MED ? C_DATA_MED : C_DATA_LOW);
	set_level(skb, ip, level);
	return TC_ACT_OK;
}

SEC("tc")
int tcpds_record(struct __sk_buff *skb)
{
	struct tcpds_config *cfg;
	struct conn_levels *seen, fresh;
	struct conn_key key;
	struct iphdr *ip;
	struct tcphdr *tcp;
	__u32 zero = 0, payload;
	__u8 level;

	cfg = bpf_map_lookup_elem(&catnip_ds_cfg, &zero);
	if (!cfg || !cfg->enabled || !parse(skb, &ip, &tcp, &payload))
		return TC_ACT_OK;
	if (payload == 0 && !tcp->syn && !tcp->fin)
		return TC_ACT_OK; /* a pure ACK acknowledges; it is not acknowledged */
	level = dscp_level(ip->tos >> 2);
	/* Keyed as the receiver's own segments will be: local = this host. */
	key.local = ip->daddr;
	key.remote = ip->saddr;
	key.lport = tcp->dest;
	key.rport = tcp->source;
	seen = bpf_map_lookup_elem(&catnip_ds_recv, &key);
	if (seen) {
		if (seen->pending == L_NONE || level < seen->pending)
			seen->pending = level;
	} else {
		fresh.pending = level;
		fresh.last = level;
		bpf_map_update_elem(&catnip_ds_recv, &key, &fresh, BPF_ANY);
	}
	count(C_RECORDED);
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
