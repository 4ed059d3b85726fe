"""A point's helper on another machine of a split topology (docs/cluster.md): one ssh session per
machine and point running

    python -m catnip.testbed.machine_helper NAME

there. It makes a run cgroup of its own there (testbed/run_cgroup.py), into which every command
for that machine is started from then on (Machine.cgroup), so the point's processes there are
known to the kernel as this machine's are here; it loads and sets what must live in that
machine's kernel (the initial RTO's BPF program, attached to that cgroup); it runs the
keep-awake loops there (`run.keep_awake`); and at the end of its input (the point's teardown, or
its ssh session lost with a killed runner) it removes them and the cgroup with whatever is left in
it.

Protocol: the helper prints "READY CGROUP" (the cgroup's path, or "-" without one), then answers
each request line (JSON) with one line, {"ok": ...} or {"error": TEXT}:
- {"initial_rto": PID, "seconds": S}: connections opened in PID's network namespace start with
  that RTO (the program is loaded at the first request).
- {"tcp_state": {"rules": [HIGH, MED, RANDOMIZED, [[LO, HI], ...]], "hosts": [[IP, HIGH, MED], ...],
  "attach": [[PID, INTERFACE], ...]}}: TCP-state marking (testbed/tcpds.py) loaded there, the
  hosts' own thresholds set, and its programs attached to each interface in PID's namespace.
- {"tcp_state_counters": true}: its counters.
- {"initial_rto_answers": true}: how many SYNs and SYN-ACKs there took the initial RTO.
- {"keep_awake": true}: a SCHED_IDLE busy loop on each of that machine's CPUs (testbed/keep_awake.py),
  answered with the CPUs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from catnip.workloads.readable import readable
from catnip.testbed import keep_awake, rto_init, run_watchdog, tcpds

READY_TIMEOUT_S = 30


class HelperError(RuntimeError):
    """The helper on another machine failed; the message says which and why."""


class MachineHelper:
    """This machine's end of the helper session on `machine`."""

    def __init__(self, machine: Any, name: str, python: str, repo: str) -> None:
        self.machine = machine
        self.proc = subprocess.Popen(machine.argv(["sh", "-c", 'cd "$0" && exec "$1" -m catnip.testbed.machine_helper "$2"',
                                                   str(repo), python, name]),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, start_new_session=True)  # ended by the teardown, not Ctrl-C
        first = self._line(READY_TIMEOUT_S).split()
        if first[:1] != ["READY"] or len(first) != 2:
            self.close()
            raise HelperError(f"machine {machine.name}: the point's helper did not start: {' '.join(first)}"
                              f" {self.proc.stderr.read().strip()[-300:]}")
        self.cgroup = None if first[1] == "-" else first[1]

    def ask(self, request: dict, timeout: float = 60) -> Any:
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            raise HelperError(f"machine {self.machine.name}: the point's helper is gone") from None
        reply = json.loads(self._line(timeout) or '{"error": "no answer"}')
        if "error" in reply:
            raise HelperError(f"machine {self.machine.name}: {request}: {reply['error']}")
        return reply["ok"]

    def close(self) -> list[str]:
        """The end of its input: it removes what it loaded and its cgroup there; returns what it
        could not remove (safe to call twice)."""
        if self.proc.returncode is not None:
            return []
        try:
            _, err = self.proc.communicate(timeout=60)  # closes its input, reads its errors, waits
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        return [line for line in (err or "").splitlines() if line.strip()]

    def _line(self, timeout: float) -> str:
        ready = readable(self.proc.stdout, timeout)
        return self.proc.stdout.readline().strip() if ready else ""


def _tcp_state(req: dict, name: str) -> tcpds.TcpStateMarker:
    high, med, randomized, always_high = req["rules"]
    marker = tcpds.TcpStateMarker(tcpds.TcpdsRules(high_thresh=int(high), med_thresh=int(med),
                                                   randomized=bool(randomized),
                                                   always_high=tuple((int(a), int(b)) for a, b in always_high)),
                                  name=name)
    marker.load()
    try:
        for address, host_high, host_med in req["hosts"]:
            marker.set_host(address, int(host_high), int(host_med))
        for pid, intf in req["attach"]:
            marker.attach(intf, ["nsenter", "-t", str(int(pid)), "-n"])
    except BaseException:
        marker.unload()
        raise
    return marker


def serve(name: str) -> int:
    """The helper's side, in its own run cgroup."""
    rto: rto_init.InitialRto | None = None
    marker: tcpds.TcpStateMarker | None = None
    awake: keep_awake.KeepAwake | None = None
    problems: list[str] = []
    with run_watchdog.joined() as group:
        try:
            print(f"READY {group or '-'}", flush=True)
            for line in sys.stdin:
                try:
                    req = json.loads(line)
                    if "initial_rto" in req:
                        if rto is None:
                            rto = rto_init.InitialRto(name=name)
                            rto.load()
                        rto.set(int(req["initial_rto"]), float(req["seconds"]))
                        reply: dict = {"ok": True}
                    elif "tcp_state" in req:
                        if marker is not None:
                            raise ValueError("TCP-state marking is loaded already")
                        marker = _tcp_state(req["tcp_state"], name)
                        reply = {"ok": True}
                    elif "tcp_state_counters" in req:
                        if marker is None:
                            raise ValueError("no TCP-state marking loaded")
                        reply = {"ok": marker.counters()}
                    elif "initial_rto_answers" in req:
                        if rto is None:
                            raise ValueError("no initial RTO set")
                        reply = {"ok": rto.answers()}
                    elif "keep_awake" in req:
                        if awake is not None:
                            raise ValueError("the keep-awake loops run already")
                        awake = keep_awake.KeepAwake()
                        reply = {"ok": awake.start()}
                    else:
                        reply = {"error": f"unknown request {sorted(req)}"}
                except (ValueError, KeyError, RuntimeError, OSError) as exc:
                    reply = {"error": f"{type(exc).__name__}: {exc}"}
                print(json.dumps(reply), flush=True)
        finally:
            if awake is not None:
                awake.stop()
            for loaded in (rto, marker):
                if loaded is not None:
                    problems += loaded.unload()
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: python -m catnip.testbed.machine_helper NAME", file=sys.stderr)
        sys.exit(2)
    sys.exit(serve(sys.argv[1]))
