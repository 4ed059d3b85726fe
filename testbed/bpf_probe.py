"""Can this kernel run the sender-side BPF programs? Loads each through the verifier (and registers
the congestion controls) for a moment, then removes them. Only `catnip check` calls it, and only
while no run holds the machine (a run's programs share these names and pins): the caller checks."""

from __future__ import annotations

import subprocess
import uuid

from testbed import sender, spm


def _attempt(argv: list[str]) -> str:
    res = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if res.returncode == 0:
        return "ok"
    lines = [l for l in (res.stderr or res.stdout).splitlines() if l.strip() and "strict mode" not in l]
    return "fails: " + (lines[-1].strip() if lines else f"exit {res.returncode}")


def probe_programs() -> dict[str, str]:
    out: dict[str, str] = {}
    try:
        spm.build()
        sender_obj = sender.OBJECT if sender.OBJECT.exists() else None
    except spm.SpmError as exc:
        return {"spm": f"fails: {exc}", "senders": f"fails: {exc}"}
    spm.ensure_bpffs()
    before = set(spm.BPFFS.glob("catnip_*"))
    pin = spm.PIN_ROOT / f"probe-{uuid.uuid4().hex[:6]}"
    try:
        pin.parent.mkdir(parents=True, exist_ok=True)
        out["spm"] = _attempt(["bpftool", "prog", "loadall", str(spm.OBJECT), str(pin)])
        if sender_obj is None:
            out["senders"] = "fails: bpf/build/catnip_cc.bpf.o was not built (make -C bpf)"
        else:
            result = _attempt(["bpftool", "struct_ops", "register", str(sender_obj)])
            got = sender.registered()
            missing = set(sender.NAMES) - set(got)
            out["senders"] = result if not missing else f"fails: {', '.join(sorted(missing))} not registered"
            sender.unregister()
    finally:
        subprocess.run(["rm", "-rf", str(pin)], capture_output=True)
        for p in set(spm.BPFFS.glob("catnip_*")) - before:
            p.unlink(missing_ok=True)
        try:
            spm.PIN_ROOT.rmdir()
        except OSError:
            pass
    return out
