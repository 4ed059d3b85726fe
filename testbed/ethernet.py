"""Link-layer sizes shared by the host shaping (testbed/hostconfig.py) and the kernel link
backend (testbed/tc_backend.py): below both, importing nothing of the project's."""

ETH_HEADER = 14  # the Ethernet header's bytes, which a qdisc counts in a packet's length
