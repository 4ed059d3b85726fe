"""Glue to the Rust queue engine: one engine process per router namespace.

A router's emulated link directions (spec.record.DirectionRecord, the point's record) become the engine's config file
and the iptables rules that steer packets into each link's NFQUEUE number. The rules go in only
after the engine printed READY: a queue without a listener drops, never bypasses, so no packet
crosses a router un-emulated.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from catnip.workloads.readable import readable
from catnip.spec.record import DirectionRecord
from catnip.testbed import paths
from catnip.testbed.hostconfig import run, shell_alive


class EngineError(RuntimeError):
    pass


def iptables_rule(link: DirectionRecord, queue_num: int) -> list[str]:
    """The rule that steers a link direction's packets into its NFQUEUE number."""
    if link.hook == "egress":
        rule = ["iptables", "-w", "-t", "filter", "-A", "FORWARD", "-o", link.interface]
    else:
        rule = ["iptables", "-w", "-t", "mangle", "-A", "PREROUTING", "-i", link.interface]
    if link.match_dst:
        rule += ["-d", link.match_dst]
    if link.match_src:
        rule += ["-s", link.match_src]
    return rule + ["-j", "NFQUEUE", "--queue-num", str(queue_num)]


def process_cpu_seconds(stat: str) -> float:
    """utime + stime of a /proc/PID/stat line in seconds; fields counted after the command name,
    which is in parentheses and may itself hold spaces and ')'."""
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class RouterEngine:
    """The engine process of one router and the rules feeding it."""

    router: object          # Mininet node
    links: list[DirectionRecord]
    workdir: Path
    seed: int
    late_threshold_s: float = 0.001
    spin_s: float = 0.0002
    stats_interval_ms: int = 500
    arrival_log: Path | None = None   # where the engine writes its arrivals (engine/src/arrival_log.rs)
    proc: subprocess.Popen | None = field(default=None, init=False)
    # On another machine (testbed/remote.py): the engine's pid there, and the thread copying the
    # stats lines it writes to its standard output (through ssh) into `stats_path` here.
    remote_pid: int | None = field(default=None, init=False)
    _mirror: threading.Thread | None = field(default=None, init=False)
    # time.monotonic() when the engine said READY: its stats lines' `t` counts from its clock's
    # start, taken right after that line (nfq_loop.rs), so t + clock_start is on the runner's clock.
    clock_start: float | None = field(default=None, init=False)

    @property
    def config_path(self) -> Path:
        return self.workdir / f"engine-{self.router.name}.json"

    @property
    def stats_path(self) -> Path:
        return self.workdir / f"engine-{self.router.name}.stats.jsonl"

    @property
    def log_path(self) -> Path:
        return self.workdir / f"engine-{self.router.name}.log"

    def config(self) -> dict:
        return {
            "seed": self.seed,
            "stats_interval_ms": self.stats_interval_ms,
            "late_threshold_us": int(self.late_threshold_s * 1e6),
            "spin_us": int(self.spin_s * 1e6),
            # A delay line holds rate x delay worth of packets; the kernel's default 1024 is
            # too small for 100 hosts' links, and an overflow would drop silently.
            "queue_maxlen": 16384,
            "links": [link.engine_config(num) for num, link in enumerate(self.links)],
            **({"arrival_log": str(self.arrival_log)} if self.arrival_log else {}),
        }

    @property
    def machine(self):
        """The machine of a router on another machine (testbed/remote.py), else None."""
        return getattr(self.router, "machine", None)

    def start(self, timeout: float = 10.0) -> None:
        binary = paths.engine_binary()
        self.config_path.write_text(json.dumps(self.config(), indent=1))
        log = open(self.log_path, "w")
        if self.machine is None:
            if not binary.exists():
                raise EngineError(f"queue engine not built: {binary} is missing (run `make setup`)")
            self.proc = self.router.popen([str(binary), "run", "--config", str(self.config_path),
                                           "--stats", str(self.stats_path)],
                                          stdout=subprocess.PIPE, stderr=log, text=True)
        else:
            if self.arrival_log:
                raise EngineError(f"run.arrival_log: the engine of {self.router.name} runs on another machine; its"
                                  " arrivals are written only by engines on this one")
            # Another machine has its own checkout at the same path and none of this one's files:
            # the config goes on the engine's input, its stats come back on its output, and it says
            # its pid there first (a signal to the local ssh client would not reach it).
            self.proc = self.router.popen(["sh", "-c", 'echo "PID $$"; exec "$0" "$@"', str(binary), "run",
                                           "--config", "/dev/stdin", "--stats", "/dev/stdout"],
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log)
            self.proc.stdin.write(self.config_path.read_bytes())
            self.proc.stdin.close()
            self._wait_ready_there(timeout)
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready = readable(self.proc.stdout, 0.2)
            if ready:
                line = self.proc.stdout.readline()
                if line.strip() == "READY":
                    self.clock_start = time.monotonic()
                    break
            if self.proc.poll() is not None:
                raise EngineError(f"engine on {self.router.name} exited ({self.proc.returncode}): "
                                  f"{self.log_path.read_text().strip()[-400:]}")
        else:
            raise EngineError(f"engine on {self.router.name} not ready after {timeout:.0f} s")
        self._add_rules()

    def _add_rules(self) -> None:
        for num, link in enumerate(self.links):
            run(self.router, *iptables_rule(link, num))

    def _wait_ready_there(self, timeout: float) -> None:
        """An engine on another machine: its pid there, then READY, read from the raw pipe (a
        buffered reader could hold READY unseen until the next stats line, 0.5 s later); what came
        after READY starts the local stats file, and a thread copies the rest as it arrives."""
        fd, pending = self.proc.stdout.fileno(), b""
        deadline = time.monotonic() + timeout
        while self.clock_start is None:
            if time.monotonic() > deadline:
                raise EngineError(f"engine on {self.router.name} not ready after {timeout:.0f} s")
            ready = readable(fd, 0.2)
            chunk = os.read(fd, 65536) if ready else b""
            pending += chunk
            while b"\n" in pending and self.clock_start is None:
                line, pending = pending.split(b"\n", 1)
                if line.startswith(b"PID "):
                    self.remote_pid = int(line.split()[1])
                elif line.strip() == b"READY":
                    self.clock_start = time.monotonic()
            if ready and not chunk and self.clock_start is None:  # end of file: it exited
                self.proc.wait(5)
                raise EngineError(f"engine on {self.router.name} exited ({self.proc.returncode}): "
                                  f"{self.log_path.read_text().strip()[-400:]}")
        with open(self.stats_path, "ab") as out:
            out.write(pending)
        self._mirror = threading.Thread(target=self._copy_stats, args=(fd,), name=f"stats-{self.router.name}",
                                        daemon=True)
        self._mirror.start()
        self._add_rules()

    def _copy_stats(self, fd: int) -> None:
        """A remote engine's stats lines, as they arrive, into the local stats file (so the watch,
        the fidelity record and `silent_for` read it as a local engine's)."""
        with open(self.stats_path, "ab") as out:
            while chunk := os.read(fd, 65536):
                out.write(chunk)
                out.flush()

    def cpu_seconds(self) -> float | None:
        """CPU time the engine process has used so far (user + system, /proc/PID/stat), with the
        kernel's forwarding inside its verdict calls; None once it is gone."""
        if self.machine is not None:
            try:
                return process_cpu_seconds(self.machine.run(["cat", f"/proc/{self.remote_pid}/stat"]))
            except (RuntimeError, IndexError, ValueError):
                return None
        try:
            with open(f"/proc/{self.proc.pid}/stat") as fh:
                return process_cpu_seconds(fh.read())
        except (OSError, AttributeError):
            return None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def silent_for(self) -> float:
        """Seconds since the engine last wrote a stats line (since READY before its first): it
        writes one every stats_interval_ms while it runs, so a long silence means it is alive
        but not working (stopped, or stuck), and no packet crosses its links."""
        try:
            last = self.stats_path.stat().st_mtime
        except OSError:
            last = time.time() - (time.monotonic() - (self.clock_start or time.monotonic()))
        return max(0.0, time.time() - last)

    def silence_limit(self) -> float:
        # Generous: under load the stats writer may skip lines (the engine says so), never for seconds.
        return max(5.0, 10 * self.stats_interval_ms / 1000)

    def stop(self, timeout: float = 5.0) -> None:
        """SIGTERM: the engine releases what it holds and writes its final stats."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            if self.machine is not None and self.remote_pid is not None:
                try:  # the engine there; its ssh client here ends with it
                    self.machine.run(["kill", "-TERM", str(self.remote_pid)])
                except RuntimeError:
                    pass  # already gone
            else:
                self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                if self.machine is not None and self.remote_pid is not None:
                    try:
                        subprocess.run(self.machine.argv(["kill", "-KILL", str(self.remote_pid)]),
                                       capture_output=True, timeout=10, stdin=subprocess.DEVNULL)
                    except subprocess.TimeoutExpired:
                        pass  # the local ssh client goes below all the same
                self.proc.kill()
                self.proc.wait()
        if self._mirror is not None:
            self._mirror.join(timeout)  # the final line is in the local file

    def latest_stats(self) -> dict | None:
        """The newest stats record (the final one after stop)."""
        return last_json_line(self.stats_path)

    def kernel_queue_counters(self) -> list[dict]:
        """/proc/net/netfilter/nfnetlink_queue of the router's namespace: kernel-side drops, and
        how many packets the kernel handed to each queue."""
        if not shell_alive(self.router):
            return []
        return nfqueue_counters(self.router.cmd("cat /proc/net/netfilter/nfnetlink_queue 2>/dev/null"),
                                [link.name for link in self.links])


def nfqueue_counters(text: str, links: list[str]) -> list[dict]:
    """The rows of /proc/net/netfilter/nfnetlink_queue (one per bound queue: number, peer port id,
    packets waiting, copy mode, copy range, dropped by the kernel, dropped because the listener's
    socket was full, the id of the last packet queued, 1), each named by its link (queue number i
    is links[i]). Packet ids count from 1 on each queue as it is bound, so `queued` is the number of
    packets the kernel handed to that queue: 0 where the link's rule matched nothing."""
    rows = []
    for line in text.split("\n"):
        f = line.split()
        if len(f) >= 8 and f[0].isdigit():
            num = int(f[0])
            rows.append({"queue_num": num, "link": links[num] if num < len(links) else None,
                         "queue_total": int(f[2]), "queue_dropped": int(f[5]), "user_dropped": int(f[6]),
                         "queued": int(f[7])})
    return rows


def stats_lines(path: Path) -> list[dict]:
    """Every complete stats line of an engine, in order (a line being written is skipped)."""
    out = []
    try:
        with open(path, "rb") as fh:
            for line in fh:
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    continue
    except FileNotFoundError:
        pass
    return out


def link_counters_at(lines: list[dict], link: str, t: float) -> dict[str, dict[str, float]] | None:
    """A link's cumulative packet counters (`arrived`, `sent`, `dropped`, each per class) at engine
    time `t`, interpolated linearly between the two stats lines around it (they come every
    stats_interval_ms); None when `t` is outside the lines."""
    before = after = None
    for rec in lines:
        if link not in rec.get("links", {}):
            continue
        if rec["t"] <= t:
            before = rec
        if rec["t"] >= t:
            after = rec
            break
    if before is None or after is None:
        return None
    span = after["t"] - before["t"]
    w = (t - before["t"]) / span if span > 0 else 0.0
    out: dict[str, dict[str, float]] = {}
    for what in ("arrived", "sent", "dropped"):
        a, b = before["links"][link].get(what, {}), after["links"][link].get(what, {})
        out[what] = {cls: a.get(cls, [0])[0] + w * (b.get(cls, [0])[0] - a.get(cls, [0])[0]) for cls in set(a) | set(b)}
    return out


def last_json_line(path: Path, chunk: int = 65536) -> dict | None:
    """The last complete JSON line of `path`, read from the end. A router with many links writes
    lines longer than any fixed window (201 links: 69 KB), so the window grows until it holds
    one whole line."""
    try:
        with open(path, "rb") as fh:
            size = fh.seek(0, 2)
            while True:
                start = max(0, size - chunk)
                fh.seek(start)
                lines = fh.read(size - start).splitlines()
                if start > 0:
                    lines = lines[1:]  # may begin mid-line
                for line in reversed(lines):
                    try:
                        return json.loads(line)
                    except json.JSONDecodeError:
                        continue  # a line being written
                if start == 0:
                    return None
                chunk *= 4
    except FileNotFoundError:
        return None
