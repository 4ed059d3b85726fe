// SPDX-License-Identifier: GPL-2.0
/* The initial retransmission timeout per network namespace, for an unmodified kernel.
 *
 * Linux starts every connection with TCP_TIMEOUT_INIT (1 s, RFC 6298); the period TCPs the papers
 * ran used other values (Nouredine and Tobagi, Computer Networks 40 (2002), section 3: 6 s, and
 * 1 s for their Fig. 4; Linux 2.4: 3 s). The kernel asks a sock_ops program for it
 * (BPF_SOCK_OPS_TIMEOUT_INIT, tcp_timeout_init()) when a connection sends its SYN and when a
 * listener answers one with a SYN-ACK: the timer of the handshake's segments, and the RTO a
 * connection keeps until its first RTT sample. The answer is in jiffies.
 *
 * Attached to the run's cgroup (every process of the run is in it), so it sees every socket of the
 * run; each point's hosts are network namespaces, and a map keyed by the namespace's cookie holds
 * the value in milliseconds for the namespaces that set one. Sockets elsewhere get the kernel's.
 * Points running side by side each attach their own program (BPF_F_ALLOW_MULTI) with their own
 * map; a program leaves the reply alone for namespaces it does not know.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

extern unsigned int CONFIG_HZ __kconfig;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
	__type(key, __u64);   /* network namespace cookie (SO_NETNS_COOKIE) */
	__type(value, __u32); /* initial RTO in ms */
} catnip_rto_ms SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
	__type(key, __u32);
	__type(value, __u64);
} catnip_rto_n SEC(".maps");

SEC("sockops")
int rto_init(struct bpf_sock_ops *skops)
{
	__u64 cookie;
	__u32 *ms, zero = 0;
	__u64 *answers;

	if (skops->op != BPF_SOCK_OPS_TIMEOUT_INIT)
		return 1;
	cookie = bpf_get_netns_cookie(skops);
	ms = bpf_map_lookup_elem(&catnip_rto_ms, &cookie);
	if (!ms)
		return 1; /* not ours: reply untouched (0, the kernel's own, unless another point's program set it) */
	skops->reply = (int)(((__u64)*ms * CONFIG_HZ + 999) / 1000);
	answers = bpf_map_lookup_elem(&catnip_rto_n, &zero);
	if (answers)
		__sync_fetch_and_add(answers, 1);
	return 1;
}

char LICENSE[] SEC("license") = "GPL";
