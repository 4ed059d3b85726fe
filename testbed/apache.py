"""A real Apache httpd per server host, with its own generated configuration.

Never the system service and never /etc/apache2: each instance gets a config, pid file and logs
in its own work directory, listens only on its host's address, and runs in the foreground in
the host's namespace. The runner starts `argv()` with Mininet's `host.popen`; tests start it
with `subprocess.Popen` (`start()`), so nothing here needs Mininet.

HTTP/1.0 mode turns keep-alive off (one connection per object, sections IV-A and V-G);
HTTP/1.1 mode keeps a connection open for a whole session, any number of requests (V-F).
"""

from __future__ import annotations

import grp
import ipaddress
import os
import pwd
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Union

APACHE = Path("/usr/sbin/apache2")
MODULES = Path("/usr/lib/apache2/modules")
THREADS_PER_CHILD = 64
# A clean, fixed environment: nothing from the caller's (locale, APACHE_*, LD_*) reaches httpd.
ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C"}

# Runs a shell command where the server lives and returns its stdout: a Mininet node's `cmd`
# (or the node itself), or `local_exec` for the current namespace.
HostExec = Union[Callable[[str], str], Any]


class ApacheError(RuntimeError):
    pass


def local_exec(command: str) -> str:
    """HostExec for the namespace we run in (tests, or a server on the root namespace)."""
    return subprocess.run(command, shell=True, capture_output=True, text=True, timeout=30).stdout


def _run_as() -> tuple[str, str]:
    """User and group for the worker processes when started as root: www-data (Debian's web
    user) if it exists, else nobody; Apache ignores them when not started as root."""
    for name in ("www-data", "nobody"):
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        try:
            return name, grp.getgrgid(entry.pw_gid).gr_name
        except KeyError:
            return name, f"#{entry.pw_gid}"
    return "#65534", "#65534"


def _quoted(path: Path) -> str:
    text = str(path)
    if '"' in text or "\n" in text:
        raise ApacheError(f"path {text!r} cannot be written into an Apache config (quote or newline)")
    return f'"{text}"'


@dataclass
class ApacheServer:
    workdir: Path
    docroot: Path
    listen_ip: str
    port: int = 80
    http_version: str = "1.0"
    max_workers: int = 512          # 100 clients x 4 parallel connections, with room
    keepalive_timeout: int = 3600   # HTTP/1.1: idle seconds before the server closes a connection
    access_log: bool = False        # off by default: no disk writes on the measured path
    binary: Path = APACHE
    modules_dir: Path = MODULES
    proc: subprocess.Popen | None = field(default=None, init=False, repr=False)
    _ip: ipaddress.IPv4Address | ipaddress.IPv6Address = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.workdir, self.docroot = Path(self.workdir).absolute(), Path(self.docroot).absolute()
        self.binary, self.modules_dir = Path(self.binary), Path(self.modules_dir)
        if self.http_version not in ("1.0", "1.1"):
            raise ApacheError(f"http_version {self.http_version!r} not allowed: '1.0' or '1.1'")
        try:
            self._ip = ipaddress.ip_address(self.listen_ip)
        except ValueError:
            raise ApacheError(f"listen_ip {self.listen_ip!r} is not an IP address") from None
        if not isinstance(self.port, int) or not 1 <= self.port <= 65535:
            raise ApacheError(f"port {self.port!r} not allowed: 1 to 65535")
        if not isinstance(self.max_workers, int) or not 1 <= self.max_workers <= 20000:
            raise ApacheError(f"max_workers {self.max_workers!r} not allowed: 1 to 20000")
        if not isinstance(self.keepalive_timeout, int) or self.keepalive_timeout < 1:
            raise ApacheError(f"keepalive_timeout {self.keepalive_timeout!r} not allowed: whole seconds >= 1")

    # --- files ---------------------------------------------------------------------------
    @property
    def config_path(self) -> Path:
        return self.workdir / "httpd.conf"

    @property
    def pid_path(self) -> Path:
        return self.workdir / "httpd.pid"

    @property
    def error_log(self) -> Path:
        return self.workdir / "error.log"

    @property
    def console_log(self) -> Path:
        """Apache's stdout/stderr when started by start(): errors from before ErrorLog opens
        (a port in use, a bad directive) only appear there."""
        return self.workdir / "console.log"

    @property
    def access_log_path(self) -> Path:
        return self.workdir / "access.log"

    @property
    def address(self) -> str:
        """host:port as Apache and ss print it ([v6]:port for IPv6)."""
        host = f"[{self._ip}]" if self._ip.version == 6 else str(self._ip)
        return f"{host}:{self.port}"

    # --- configuration ---------------------------------------------------------------------
    def config_text(self) -> str:
        user, group = _run_as()
        threads = min(THREADS_PER_CHILD, self.max_workers)
        servers = -(-self.max_workers // threads)
        workers = servers * threads  # Apache rounds MaxRequestWorkers to whole children anyway
        mod = self.modules_dir
        if self.http_version == "1.1":
            keepalive = (f"KeepAlive On\nMaxKeepAliveRequests 0\n"
                         f"KeepAliveTimeout {self.keepalive_timeout}")
        else:
            keepalive = "KeepAlive Off"
        log = ""
        if self.access_log:
            # %D: microseconds to serve; %k: requests so far on this connection; %B: body bytes.
            log = (f"<IfModule !log_config_module>\n"
                   f"    LoadModule log_config_module {_quoted(mod / 'mod_log_config.so')}\n"
                   f"</IfModule>\n"
                   f'LogFormat "%a %{{%s}}t.%{{usec_frac}}t \\"%r\\" %>s %B %D %k" catnip\n'
                   f"CustomLog {_quoted(self.access_log_path)} catnip\n")
        return f"""# Generated by the CATNIP testbed (testbed/apache.py) for one server host.
# Self-contained: nothing is read from /etc/apache2 and the system service is not involved.
ServerRoot {_quoted(self.workdir)}
DefaultRuntimeDir {_quoted(self.workdir)}
PidFile {_quoted(self.pid_path)}
ErrorLog {_quoted(self.error_log)}
LogLevel warn
{log}# Only named to keep Apache quiet: nothing here builds self-referential URLs.
ServerName catnip.invalid
Listen {self.address}
User {user}
Group {group}

LoadModule mpm_event_module {_quoted(mod / 'mod_mpm_event.so')}
LoadModule authz_core_module {_quoted(mod / 'mod_authz_core.so')}
LoadModule mime_module {_quoted(mod / 'mod_mime.so')}
# No mod_dir (clients ask for files by name), no mod_deflate or mod_headers (bodies and headers
# must keep their sizes).

# Every worker exists from the start (StartServers = ServerLimit, no idle reaping), so no
# request waits for a process to be spawned: queueing belongs to the emulated network.
ServerLimit {servers}
StartServers {servers}
ThreadLimit {threads}
ThreadsPerChild {threads}
MaxRequestWorkers {workers}
MinSpareThreads {threads}
MaxSpareThreads {workers}
MaxConnectionsPerChild 0
ListenBacklog 1024
# A plain listener: Linux's default accept filter (TCP_DEFER_ACCEPT) changes handshake
# behaviour under loss, which is exactly what the experiments measure.
AcceptFilter http none

# HTTP/{self.http_version} workload.
{keepalive}
Timeout 600

# Responses of stable, predictable size: short Server header, no ETag, no charset suffix,
# types fixed here rather than read from the system's mime.types.
ServerTokens Prod
ServerSignature Off
FileETag None
AddDefaultCharset Off
TraceEnable Off
TypesConfig /dev/null
AddType text/html .html
AddType image/gif .gif
EnableSendfile On
HostnameLookups Off

DocumentRoot {_quoted(self.docroot)}
<Directory />
    Require all denied
    AllowOverride None
    Options None
</Directory>
<Directory {_quoted(self.docroot)}>
    Require all granted
</Directory>
"""

    def env(self) -> dict[str, str]:
        return dict(ENV)

    def argv(self) -> list[str]:
        """The command that runs this instance in the foreground with a clean environment."""
        return ["/usr/bin/env", "-i", *(f"{k}={v}" for k, v in ENV.items()),
                str(self.binary), "-d", str(self.workdir), "-f", str(self.config_path), "-DFOREGROUND"]

    def prepare(self) -> Path:
        """Write the config into the work directory (created); returns the config path."""
        if not self.binary.exists():
            raise ApacheError(f"{self.binary} not found: install Debian's apache2 package")
        if not self.docroot.is_dir():
            raise ApacheError(f"document root {self.docroot} is not a directory (write it with "
                              f"workloads.docroot.write_docroot first)")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.workdir.chmod(0o755)
        self.config_path.write_text(self.config_text())
        if self.pid_path.exists() and not self.processes():
            self.pid_path.unlink()  # stale from a killed instance
        return self.config_path

    def check_config(self) -> None:
        """`apache2 -t` on the written config; raises ApacheError with Apache's message."""
        res = subprocess.run([str(self.binary), "-t", "-d", str(self.workdir), "-f", str(self.config_path)],
                             capture_output=True, text=True, env=self.env(), timeout=30)
        if res.returncode != 0:
            raise ApacheError(f"Apache rejects {self.config_path}: {(res.stderr or res.stdout).strip()}")

    # --- process ---------------------------------------------------------------------------
    def start(self, popen: Callable[..., subprocess.Popen] = subprocess.Popen) -> subprocess.Popen:
        """prepare() and start; `popen` may be a Mininet host's popen."""
        self.prepare()
        with open(self.console_log, "wb") as console:
            self.proc = popen(self.argv(), stdin=subprocess.DEVNULL, stdout=console, stderr=subprocess.STDOUT)
        return self.proc

    def wait_ready(self, host_exec: HostExec | None = None, timeout: float = 10.0) -> None:
        """Until the server listens on its address, checked with `ss` where it runs
        (host_exec: a callable or a Mininet node; None = this namespace)."""
        run = local_exec if host_exec is None else getattr(host_exec, "cmd", host_exec)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc is not None and self.proc.poll() is not None:
                raise ApacheError(f"Apache for {self.address} exited with {self.proc.returncode}: "
                                  f"{self.log_tail()}")
            # The listening socket must be ours (pid=...), not another program's on that port.
            # Hosts share the machine's pid namespace, so the pids ss prints are ours to compare.
            # And the pid file must be written (a little after the sockets open), so that
            # stop() works from the pid file alone.
            pids = self.processes()
            ours = {f"pid={pid}," for pid in pids}
            for line in run(f"ss -Hltnp 'sport = :{self.port}'").splitlines():
                if self.address in line.split() and any(p in line for p in ours) and self.pid() in pids:
                    return
            if time.monotonic() > deadline:
                raise ApacheError(f"Apache not listening on {self.address} after {timeout:g} s: {self.log_tail()}")
            time.sleep(0.05)

    def log_tail(self, chars: int = 600) -> str:
        """The end of the console and error logs, for error messages."""
        parts = []
        for path in (self.console_log, self.error_log):
            try:
                text = path.read_text(errors="replace").strip()
            except OSError:
                continue
            if text:
                parts.append(f"{path.name}: {text[-chars:]}")
        return " | ".join(parts) or "(no log output)"

    def pid(self) -> int | None:
        """The main process, from the pid file Apache writes once it runs."""
        try:
            return int(self.pid_path.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def processes(self) -> list[int]:
        """Every live process of this instance (main and children): those whose command line
        names this instance's config file, which no other process does."""
        me, found = str(self.config_path), []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if state != "Z" and me.encode() in argv:
                found.append(int(entry.name))
        return found

    @staticmethod
    def _parent(pid: int) -> int | None:
        try:
            return int((Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            return None

    def running(self) -> bool:
        return bool(self.processes())

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM to the main process (Apache then stops its children at once); whatever of
        this instance is still alive after `timeout` gets SIGKILL. Safe to call twice."""
        main = self.proc.pid if self.proc is not None and self.proc.poll() is None else self.pid()
        pids = self.processes()
        if main not in pids:  # no pid file yet (or a stale one): the root of our process tree
            roots = [pid for pid in pids if self._parent(pid) not in pids]
            main = roots[0] if len(roots) == 1 else None
        if main is not None:
            try:
                os.kill(main, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + timeout
        while self.processes() and time.monotonic() < deadline:
            if self.proc is not None:
                self.proc.poll()  # reap our child so it does not linger as a zombie
            time.sleep(0.05)
        for pid in self.processes():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.proc is not None:
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        end = time.monotonic() + 5
        while self.processes() and time.monotonic() < end:
            time.sleep(0.05)
        if self.processes():
            raise ApacheError(f"Apache for {self.address} still running after SIGKILL: {self.processes()}")
