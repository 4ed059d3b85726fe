// SPDX-License-Identifier: GPL-2.0
/* Selective Packet Marking (CATNIP section III-B) for an unmodified kernel.
 *
 * Two programs share one socket-local storage map (libbpf pins the maps by name in /sys/fs/bpf;
 * testbed/spm.py then moves catnip_cfg and catnip_counters under each marker's own pin directory,
 * so markers of points running side by side keep their own; catnip_docs stays shared):
 *  - catnip_doc (cgroup/setsockopt) takes the SOL_CATNIP/CATNIP_DOC option a web server sets
 *    before each response (bpf/catnip_sockopt.h) and records the document's sequence range;
 *  - catnip_mark (tc egress on the server's interface) sets each TCP segment's DSCP: AF11 (high
 *    loss priority) when it is among the first 3 or last 3 segments of its document, or is sent
 *    while cwnd < 4; AF12 (low) otherwise. Each rule can be switched off (the paper's partial
 *    implementation of section V-G marks no last segments), and the scope can be the TCP
 *    connection instead of the document (the paper's choice for HTTP/1.1, section V-F).
 * The rules are the paper's; counting segments by bytes (3 x MSS) is ours, and exact when the
 * document's segments are full-sized (docs/spm.md).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "catnip_sockopt.h"
#include "catnip_docs.h"

#define ETH_P_IP 0x0800
#define IPPROTO_TCP_ 6
#define TC_ACT_OK 0

/* DSCP code points (RFC 2597); one table in one place: engine/src/packet.rs reads the same. */
#define DSCP_AF11 10
#define DSCP_AF12 12

enum scope { SCOPE_DOCUMENT = 0, SCOPE_CONNECTION = 1 };
enum control_rule { CONTROL_HIGH = 0, CONTROL_LOW = 1, CONTROL_UNMARKED = 2 };
enum retrans_rule { RETRANS_BY_POSITION = 0, RETRANS_HIGH = 1, RETRANS_LOW = 2 };

struct spm_config {
	__u8 enabled;
	__u8 first;      /* mark the first `segments` segments */
	__u8 last;       /* mark the last `segments` segments (needs the document size) */
	__u8 small_cwnd; /* mark segments sent while cwnd < small_cwnd_limit */
	__u8 scope;
	__u8 control;    /* segments without payload: SYN, SYN-ACK, pure ACK, FIN, RST */
	__u8 retrans;
	__u8 pad;
	__u32 segments;         /* 3 in the paper */
	__u32 small_cwnd_limit; /* 4 in the paper */
};

enum counter {
	C_DATA_HIGH, C_DATA_LOW, C_DATA_HIGH_BYTES, C_DATA_LOW_BYTES,
	C_CONTROL_HIGH, C_CONTROL_LOW, C_CONTROL_UNMARKED, C_RETRANS, C_DOCS, C_NO_SOCKET, C_MAX
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
	__type(key, __u32);
	__type(value, struct spm_config);
} catnip_cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, C_MAX);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
	__type(key, __u32);
	__type(value, __u64);
} catnip_counters SEC(".maps");

static __always_inline void count(__u32 which, __u64 n)
{
	__u64 *v = bpf_map_lookup_elem(&catnip_counters, &which);
	if (v)
		*v += n;
}

SEC("cgroup/setsockopt")
int catnip_doc(struct bpf_sockopt *ctx)
{
	struct catnip_doc *opt = ctx->optval;
	struct bpf_tcp_sock *tp;
	struct conn_docs *st;
	struct doc *d;
	__u32 base, slot;

	if (ctx->level != SOL_CATNIP)
		return 1; /* every other option goes to the kernel untouched */
	if (ctx->optname != CATNIP_DOC || (void *)(opt + 1) > ctx->optval_end || !ctx->sk)
		return 0; /* EPERM: not an option we know */
	tp = bpf_tcp_sock(ctx->sk);
	if (!tp)
		return 0;
	st = bpf_sk_storage_get(&catnip_docs, ctx->sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!st)
		return 0;
	/* The first data byte's sequence number: snd_una minus every byte acknowledged so far. */
	base = tp->snd_una - (__u32)tp->bytes_acked;
	slot = st->count % MAX_DOCS;
	d = &st->doc[slot];
	d->start = base + (__u32)opt->offset;
	d->len = opt->length;
	d->flags = opt->flags;
	st->count++;
	count(C_DOCS, 1);
	ctx->optlen = -1; /* handled here: the kernel's own setsockopt is skipped, the call returns 0 */
	return 1;
}

static __always_inline int set_dscp(struct __sk_buff *skb, struct iphdr *ip, __u8 dscp)
{
	__u8 old = ip->tos, tos = (dscp << 2) | (old & 3); /* keep the ECN bits */
	__u32 off = sizeof(struct ethhdr) + offsetof(struct iphdr, tos);

	if (old == tos)
		return 0;
	bpf_l3_csum_replace(skb, sizeof(struct ethhdr) + offsetof(struct iphdr, check), bpf_htons(old),
			    bpf_htons(tos), 2);
	return bpf_skb_store_bytes(skb, off, &tos, 1, 0);
}

/* Whether the segment [seq, seq+len) is among the first or last `n` MSS of a byte range. */
static __always_inline int in_edges(const struct spm_config *cfg, __u32 seq, __u32 len, __u32 start,
				    __u32 doc_len, int doc_len_known, __u32 mss)
{
	__s32 from_start = (__s32)(seq - start);
	__u32 edge = cfg->segments * mss;

	if (cfg->first && from_start < (__s32)edge)
		return 1;
	if (cfg->last && doc_len_known && (__s32)(start + doc_len - seq) <= (__s32)edge)
		return 1;
	return 0;
}

/* A control segment (no payload): marked as the configuration says, or left unmarked. */
static __always_inline void mark_control(struct __sk_buff *skb, struct iphdr *ip, const struct spm_config *cfg)
{
	int high;

	if (cfg->control == CONTROL_UNMARKED) {
		count(C_CONTROL_UNMARKED, 1);
		return;
	}
	high = cfg->control == CONTROL_HIGH;
	count(high ? C_CONTROL_HIGH : C_CONTROL_LOW, 1);
	set_dscp(skb, ip, high ? DSCP_AF11 : DSCP_AF12);
}

/* Whether the segment [seq, seq+payload) is high priority by a document the server named: among
 * the first or last MSS of a document (SCOPE_DOCUMENT), or the last of the connection's last
 * document (CATNIP_DOC_LAST). */
static __always_inline int in_doc_edges(const struct spm_config *cfg, struct conn_docs *st, __u32 seq,
					__u32 payload, __u32 mss)
{
	int i;

	for (i = 0; i < MAX_DOCS; i++) {
		struct doc *d = &st->doc[i];

		if (!d->len)
			continue;
		/* Does the segment overlap the document? */
		if ((__s32)(seq + payload - d->start) <= 0 || (__s32)(d->start + d->len - seq) <= 0)
			continue;
		if (cfg->scope == SCOPE_DOCUMENT) {
			if (in_edges(cfg, seq, payload, d->start, d->len, 1, mss))
				return 1;
		} else if ((d->flags & CATNIP_DOC_LAST) && cfg->last &&
			   (__s32)(d->start + d->len - seq) <= (__s32)(cfg->segments * mss)) {
			return 1;
		}
	}
	return 0;
}

SEC("tc")
int catnip_mark(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data, *data_end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip;
	struct tcphdr *tcp;
	struct bpf_sock *sk;
	struct tcp_sock *tp;
	struct spm_config *cfg;
	struct conn_docs *st;
	__u32 key = 0, seq, payload, mss, ihl, base;
	int high = 0;

	cfg = bpf_map_lookup_elem(&catnip_cfg, &key);
	if (!cfg || !cfg->enabled)
		return TC_ACT_OK;
	if ((void *)(eth + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP))
		return TC_ACT_OK;
	ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > data_end || ip->protocol != IPPROTO_TCP_)
		return TC_ACT_OK;
	ihl = ip->ihl * 4;
	if (ihl < sizeof(*ip))
		return TC_ACT_OK;
	tcp = (void *)ip + ihl;
	if ((void *)(tcp + 1) > data_end)
		return TC_ACT_OK;
	payload = bpf_ntohs(ip->tot_len) - ihl - tcp->doff * 4;

	if (payload == 0 || payload > 0xffff) {
		mark_control(skb, ip, cfg);
		return TC_ACT_OK;
	}

	/* Data: skb->sk is the full TCP socket that sent it (request and timewait sockets send none). */
	sk = skb->sk;
	if (sk)
		sk = bpf_sk_fullsock(sk);
	tp = sk ? bpf_skc_to_tcp_sock(sk) : NULL;
	if (!sk || !tp) {
		count(C_NO_SOCKET, 1);
		return TC_ACT_OK;
	}
	seq = bpf_ntohl(tcp->seq);
	mss = tp->mss_cache;
	/* tc egress runs inside tcp_transmit_skb, before snd_nxt moves: new data starts at snd_nxt. */
	if ((__s32)(seq - tp->snd_nxt) < 0) {
		count(C_RETRANS, 1);
		if (cfg->retrans != RETRANS_BY_POSITION) {
			high = cfg->retrans == RETRANS_HIGH;
			goto mark;
		}
	}
	if (cfg->small_cwnd && tp->snd_cwnd < cfg->small_cwnd_limit)
		high = 1;
	st = high ? NULL : bpf_sk_storage_get(&catnip_docs, sk, 0, 0); /* only when still undecided */
	if (cfg->scope == SCOPE_CONNECTION) {
		/* The connection's first segments; its last ones when the server said the document
		 * ending it is the last (CATNIP_DOC_LAST). */
		base = tp->snd_una - (__u32)tp->bytes_acked;
		if (!high && in_edges(cfg, seq, payload, base, 0, 0, mss))
			high = 1;
	}
	if (!high && st) {
		high = in_doc_edges(cfg, st, seq, payload, mss);
	} else if (!high && cfg->scope == SCOPE_DOCUMENT) {
		/* No document size was given: fall back to the connection's first segments. */
		base = tp->snd_una - (__u32)tp->bytes_acked;
		if (in_edges(cfg, seq, payload, base, 0, 0, mss))
			high = 1;
	}
mark:
	count(high ? C_DATA_HIGH : C_DATA_LOW, 1);
	count(high ? C_DATA_HIGH_BYTES : C_DATA_LOW_BYTES, payload);
	set_dscp(skb, ip, high ? DSCP_AF11 : DSCP_AF12);
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
