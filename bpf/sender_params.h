/* Per-host parameters of the project's senders, and newCWV's trace ring.
 *
 * catnip_sndparams: one entry per sending host, keyed by the cookie of the host's network
 * namespace (net->net_cookie, what SO_NETNS_COOKIE reads): every host is a namespace of its own, and
 * points run side by side (`--jobs 2`) reuse addresses but never namespaces. Shared by catnip_reno
 * (bpf/catnip_cc.bpf.c) and
 * catnip_newcwv (bpf/newcwv.bpf.c): the map is pinned by name (/sys/fs/bpf/catnip_sndparams),
 * so both objects load the same one. testbed/sender.py writes it (set_host_params). A host
 * without an entry gets the defaults. A connection reads its host's entry once, in .init.
 *
 * catnip_cwvtrace: newCWV's trace, one mmap-able array value holding a ring of entries; written
 * only for hosts whose entry says trace=1, each entry naming its namespace; testbed/sender.py reads
 * it (read_trace) from the head a point saw when it started (trace_head). The layouts
 * below are mirrored there (_TRACE_HEADER, _TRACE_ENTRY): change both together.
 */
#ifndef CATNIP_SENDER_PARAMS_H
#define CATNIP_SENDER_PARAMS_H

#define SNDPARAMS_MAX_HOSTS 4096
#define NEWCWV_DEFAULT_NVP_MS 300000 /* the non-validated period, 5 minutes (RFC 7661 section 5; paper section 3) */
#define NEWCWV_DEFAULT_BINS 4        /* the authors' module; the paper's Fig. 5 says 5 (docs/reproduction-newcwv.md, gap 2) */
#define NEWCWV_MAX_BINS 16           /* a power of two (the ring index is masked) */

struct sender_params {
	__u32 pace;   /* 1: TCP's internal pacing for every connection (sk_pacing_status) */
	__u32 nvp_ms; /* newCWV's non-validated period; 0 = the default */
	__u32 bins;   /* newCWV's pipeACK max-filter bins, 1..NEWCWV_MAX_BINS; 0 = the default */
	__u32 trace;  /* 1: newCWV writes catnip_cwvtrace for this host's connections */
	__u32 nofilter; /* 1: newCWV's pipeACK is the latest round's sample, no max filter (the
			 * paper's Fig. 5a comparison; RFC 7661 section 4.2 asks for the filter) */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SNDPARAMS_MAX_HOSTS);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
	__type(key, __u64); /* network namespace cookie */
	__type(value, struct sender_params);
} catnip_sndparams SEC(".maps");

/* The cookie of the socket's network namespace (struct_ops programs may read it through the
 * socket's BTF pointer; bpf_get_netns_cookie is not among their helpers). */
static __always_inline __u64 sock_netns(struct sock *sk)
{
	return sk->__sk_common.skc_net.net->net_cookie;
}

/* The host's parameters with the defaults filled in. */
static __always_inline struct sender_params host_params(struct sock *sk)
{
	__u64 netns = sock_netns(sk);
	struct sender_params *p = bpf_map_lookup_elem(&catnip_sndparams, &netns);
	struct sender_params out = {0, NEWCWV_DEFAULT_NVP_MS, NEWCWV_DEFAULT_BINS, 0, 0};

	if (p) {
		out.pace = p->pace;
		out.trace = p->trace;
		out.nofilter = p->nofilter;
		if (p->nvp_ms)
			out.nvp_ms = p->nvp_ms;
		if (p->bins)
			out.bins = p->bins > NEWCWV_MAX_BINS ? NEWCWV_MAX_BINS : p->bins;
	}
	return out;
}

/* --- newCWV's trace --------------------------------------------------------------------- */

enum cwv_event {
	CWV_EV_INIT = 1,      /* .init: the IW and the parameters in force */
	CWV_EV_SAMPLE,        /* a pipeACK sample (once per round outside recovery) */
	CWV_EV_CLOSEDOWN,     /* one halving at the end of a non-validated period */
	CWV_EV_RECOVERY,      /* entering fast recovery (the RFC 7661 target when non-validated) */
	CWV_EV_RECOVERY_END,  /* CA_EVENT_COMPLETE_CWR after the recovery */
	CWV_EV_TX_START,      /* first transmission with nothing in flight (after idle) */
	CWV_EV_RTO,           /* CA_EVENT_LOSS: retransmission timeout, pipeACK reset */
};

#define CWV_UNDEF 0xffffffffu       /* pipeACK undefined, or no sample in this entry */
#define CWV_TRACE_SLOTS 16384

struct cwv_trace_entry {
	__u64 seq;        /* index + 1 in the ring, written last: a reader skips torn entries */
	__u64 t_ns;       /* bpf_ktime_get_ns(): CLOCK_MONOTONIC */
	__u64 netns;      /* the sender's network namespace cookie */
	__u32 saddr;      /* network byte order */
	__u32 daddr;
	__u16 sport;      /* host byte order */
	__u16 dport;
	__u8 event;       /* enum cwv_event */
	__u8 validated;   /* pipeACK undefined or >= cwnd * MSS / 2, after the event */
	__u8 loss_nvp;    /* a recovery that began non-validated is under way */
	__u8 pad;
	__u32 cwnd;       /* segments, after the event */
	__u32 ssthresh;   /* segments, after the event */
	__u32 pipeack;    /* bytes, CWV_UNDEF when undefined */
	__u32 sample;     /* bytes, CWV_UNDEF unless the event is a sample */
	__u32 inflight;   /* segments: packets_out - sacked_out - lost_out + retrans_out */
	__u32 lfs;        /* LossFlightSize of the recovery (segments), 0 outside */
	__u32 retrans;    /* R: segments retransmitted since the recovery began, 0 outside */
	__u32 mss;        /* mss_cache */
	__u32 psp_ms;     /* the pipeACK sampling period in force: max(3 SRTT, 1 s) */
	__u32 srtt_us;
	__u32 prior_cwnd; /* segments, before the event changed it */
	__u32 iw;         /* the connection's initial window (segments) */
};

struct cwv_trace {
	__u64 head; /* entries ever written (the next one goes to slot head % CWV_TRACE_SLOTS) */
	__u64 base; /* entries before this index were cleared (written by testbed/sender.py only) */
	__u64 pad[6];
	struct cwv_trace_entry e[CWV_TRACE_SLOTS];
};

#endif
