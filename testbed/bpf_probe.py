"""Can this kernel run the sender-side BPF programs? Loads each through the verifier (and registers
the congestion controls, CATNIP's and newCWV's) for a moment, then removes them. Only `catnip check` calls it, and only
while no run holds the machine (a run's programs share these names and pins): the caller checks."""

from __future__ import annotations

import subprocess
import uuid

from catnip.testbed import sender, spm
from catnip.testbed.kernel_fs import BPFFS


def _attempt(argv: list[str]) -> str:
    res = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if res.returncode == 0:
        return "ok"
    lines = [l for l in (res.stderr or res.stdout).splitlines() if l.strip() and "strict mode" not in l]
    # The verifier's own complaint is the log line before its "processed N insns" summary.
    for i, line in enumerate(lines):
        if line.startswith("processed ") and " insns" in line and i:
            return "fails: verifier: " + lines[i - 1].strip()
    return "fails: " + (lines[-1].strip() if lines else f"exit {res.returncode}")


def probe_programs() -> dict:
    """{"spm": verdict, "senders": verdict of them all, "congestion_controls": {name: verdict}}:
    each verdict "ok" or "fails: why"; every project congestion control (spec/senders.py) is
    loaded through the verifier and registered, object by object."""
    out: dict = {}
    try:
        spm.build()
    except spm.SpmError as exc:
        return {"spm": f"fails: {exc}", "senders": f"fails: {exc}"}
    try:
        sender.build()
    except sender.SenderError:
        pass  # each missing object is named below
    spm.ensure_bpffs()
    before = set(BPFFS.glob("catnip_*"))
    pin = spm.PIN_ROOT / f"probe-{uuid.uuid4().hex[:6]}"
    ccs: dict[str, str] = {}
    try:
        pin.parent.mkdir(parents=True, exist_ok=True)
        out["spm"] = _attempt(["bpftool", "prog", "loadall", str(spm.OBJECT), str(pin)])
        sender.unregister()  # names must be unique
        for obj, names in sender.OBJECTS.items():
            if not obj.exists():
                result = f"fails: bpf/build/{obj.name} was not built (make -C bpf)"
            else:
                result = _attempt(["bpftool", "struct_ops", "register", str(obj)])
            got = set(sender.registered())
            for name in names:
                ccs[name] = "ok" if name in got else (result if result != "ok" else "fails: not registered")
        sender.unregister()
    finally:
        subprocess.run(["rm", "-rf", str(pin)], capture_output=True)
        for p in set(BPFFS.glob("catnip_*")) - before:
            p.unlink(missing_ok=True)
        try:
            spm.PIN_ROOT.rmdir()
        except OSError:
            pass
    bad = [f"{n} {v}" for n, v in ccs.items() if v != "ok"]
    out["senders"] = "ok" if not bad else "fails: " + "; ".join(bad)
    out["congestion_controls"] = ccs
    return out
