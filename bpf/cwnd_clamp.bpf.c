// SPDX-License-Identifier: GPL-2.0
/* W_max for transfer measurements (hysteresis paper, section 4: "the receiver advertises a
 * consistent flow control window W_max"). This kernel raises a receiver's window clamp again as
 * it re-estimates its buffer (TCP_WINDOW_CLAMP and the route option `window` do not hold), so the
 * sender's congestion window is clamped instead, which bounds the data in flight the same way:
 * a sock_ops program on the server's cgroup sets TCP_BPF_SNDCWND_CLAMP on every accepted
 * connection (the kernel also sets ssthresh to it; slow start cannot pass W_max either way).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#define SOL_TCP_ 6

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32); /* W_max in segments; 0: leave the connection alone */
} cwnd_clamp_cfg SEC(".maps");

SEC("sockops")
int catnip_cwnd_clamp(struct bpf_sock_ops *skops)
{
	__u32 zero = 0;
	__u32 *wmax;
	int val;

	if (skops->op != BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB && skops->op != BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB)
		return 1;
	wmax = bpf_map_lookup_elem(&cwnd_clamp_cfg, &zero);
	if (!wmax || !*wmax)
		return 1;
	val = *wmax;
	bpf_setsockopt(skops, SOL_TCP_, TCP_BPF_SNDCWND_CLAMP, &val, sizeof(val));
	return 1;
}

char LICENSE[] SEC("license") = "GPL";
