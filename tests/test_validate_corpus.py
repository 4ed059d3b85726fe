"""A scenario-mutation corpus (issue 47, defect 5): every field of every file in scenarios/ made
hostile, through the one check path of `catnip validate`, `catnip run` and the dashboard's form
(controller/validate.py), with the queue engine judging what was accepted.

The corpus is generated, not sampled: for each file, each of its fields (the first of each list's
items standing for the others) gets a value chosen by the kind of value it holds, cycling through
wrong types, booleans, NaN and infinities, huge, negative and zero numbers, units at their edges
('0.4us', '1e999KB', '63B', a bare number), empty, blank and huge strings, deep nesting; a number
also gets a boolean of its own, a quantity with a unit also '1e-9' of its unit. Then per file: every top-level key given twice, a key given twice
inside a section, a `--set` of a hostile value, a file over the size bound, a huge name; and every
field of every policy and edge function (GALLERY: each with all its parameters on quick.yaml; a
number there takes every hostile number, not one in turn). Each
input must be refused (`Refused`, a few short lines) or accepted, within a few seconds; what is
accepted is laid out as its engines would get it (tests/engine_check.py) and must load in
`catnip-engine check`: 0 tracebacks, 0 hangs, 0 accepted-invalid. A sweep is narrowed to one
point unless the field mutated is in it, to keep the corpus in the fast tier.

`pytest -s` prints the figures docs/scenarios.md quotes (cases, refused, accepted, time).
"""

from __future__ import annotations

import math
import re
import signal
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from catnip.controller import validate as validate_mod
from catnip.spec import bounded
from catnip.spec import transfer
from catnip.testbed.paths import REPO, engine_binary
from tests import engine_check

if not engine_binary().exists():  # built by scripts/setup.sh; CI builds it before the tests
    pytest.skip(f"no queue engine at {engine_binary()} (scripts/setup.sh builds it)", allow_module_level=True)

FILES = sorted((REPO / "scenarios").rglob("*.yaml"))
PER_CASE_SECONDS = 10   # a case still being checked after this is a hang (the slowest takes about 0.2 s)
UNIT = re.compile(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z/%]+)\s*")


def deep(levels: int, leaf: Any = 1) -> Any:
    out = leaf
    for i in range(levels):
        out = [out] if i % 2 else {"a": out}
    return out


# What replaces a value, by the kind of value the field holds; each field takes the next one.
NUMBER = [True, False, 0, -1, 10**29, 2**64, float("nan"), float("inf"), -float("inf"), 1e308, 0.5, "12",
          "", None, [1], {"a": 1}, deep(20), 2**31, -(10**29)]
FLOAT = [float("nan"), float("inf"), -float("inf"), -1.0, 0.0, 1e308, 5e-324, True, "0.5", "", None, [0.5],
         deep(40), 10**29, 1.0000001]
BOOL = [1, 0, "yes", "maybe", None, "", 2, [True], {"x": True}, float("nan")]
TEXT = ["", " ", "x" * 20_000, "\x00", "../../etc/passwd", "\u202e", 5, True, None, ["a"], {"a": "b"},
        deep(40, "x"), "1e999", "null", "-", "*" * 300]


def unit_values(number: str, unit: str) -> list[Any]:
    """Edge cases of a quantity written with a unit."""
    return [f"1e999{unit}", f"-{number}{unit}", f"0{unit}", f"1e30{unit}", f"0.4{unit}", f"1e-9{unit}", number,
            float(number), f"{number}{unit}x", f"{number} {unit.upper()}", f".nan{unit}", f"{'9' * 40}{unit}",
            f"0.000001{unit}", f"{number}{unit}" * 3, True]


def hostile(value: Any, turn: int) -> Any:
    if isinstance(value, bool):
        pool = BOOL
    elif isinstance(value, int):
        pool = NUMBER
    elif isinstance(value, float):
        pool = FLOAT
    elif isinstance(value, str) and (m := UNIT.fullmatch(value)):
        pool = unit_values(m.group(1), m.group(2))
    else:
        pool = TEXT
    return pool[turn % len(pool)]


def fields(node: Any, path: tuple = ()) -> list[tuple]:
    """Every field of a loaded file, a list's first item standing for the others (and each empty
    list or mapping as a field of its own)."""
    if isinstance(node, dict) and node:
        return [p for k, v in node.items() for p in fields(v, path + (k,))]
    if isinstance(node, list) and node:
        return fields(node[0], path + (0,))
    return [path]


def replaced(node: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    out = dict(node) if isinstance(node, dict) else list(node)
    out[path[0]] = replaced(node[path[0]], path[1:], value)
    return out


def one_point(raw: dict, path: tuple = ()) -> dict:
    """The sweep narrowed to the first value of each key (the mutated key keeps its own list)."""
    sweep = raw.get("sweep")
    if not isinstance(sweep, dict):
        return raw
    keep = path[1] if len(path) > 1 and path[0] == "sweep" else None
    return {**raw, "sweep": {k: v if k == keep or not isinstance(v, list) else v[:1] for k, v in sweep.items()}}


def dump(raw: Any) -> str:
    return yaml.dump(raw, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), allow_unicode=True, sort_keys=False,
                     width=10**9)


# Every policy and edge function with every parameter given, on CATNIP's dumbbell (quick.yaml):
# their fields are mutated too, though no shipped file sets them all.
LEVEL = {"min_th": 5, "max_th": 8, "max_p": 0.02}
GALLERY = {
    "red": ("router.policy", {"kind": "red", "min_th": "20%", "max_th": "60%", "w_q": 0.01, "max_p": 0.1,
                              "mean_pkt_bytes": 1000}),
    "fred": ("router.policy", {"kind": "fred", "min_th": 2, "max_th": 6, "w_q": 0.01, "max_p": 0.1,
                               "mean_pkt_bytes": 1000, "min_q": 2}),
    "frio": ("router.policy", {"kind": "frio", "w_q": 0.01, "mean_pkt_bytes": 1000, "min_q": "3KB", "levels": [
        {"min_th": "10KB", "max_th": "20KB", "max_p": 0.02}, {"min_th": "5KB", "max_th": "10KB", "max_p": 0.1}]}),
    "red3": ("router.policy", {"kind": "red3", "w_q": 0.01, "levels": [LEVEL, LEVEL, LEVEL]}),
    "wrr": ("router.policy", {"kind": "wrr", "weights": [1, 4, 2]}),
    "catnip_loss": ("router.policy", {"kind": "catnip_loss", "loss_p": 0.01, "loss_p_high": 0.001}),
    "loss": ("topology.bottleneck.loss", {"p": 0.01, "p_high": 0.001}),
    "mark": ("topology.bottleneck.edge", [{"kind": "mark", "rules": [
        {"proto": "tcp", "src": "clients", "dst": "10.2.0.0/16", "sport": 80, "dport": "1000-2000", "dscp": "AF11"}],
        "default": 0}]),
    "police": ("topology.bottleneck.edge", [{"kind": "police", "rate": "250kbit", "bucket": "6000B", "dscp": ["AF11"],
                                            "per": "src", "exceed": {"remark": "AF12"}}]),
    "shape": ("topology.bottleneck.edge", [{"kind": "shape", "rate": "1Mbit", "bucket": "3000B", "buffer": "20p"}]),
    "tcpf": ("topology.bottleneck.reverse", {"edge": [{
        "kind": "tcpf", "interval": "400ms", "pool": "300KB", "tiny_window": 4, "mss": "1460B", "in_dscp": "AF11",
        "out_dscp": "AF12", "protect_retransmissions": True, "retransmissions_use_tokens": True, "w_gain": 0.125,
        "e_gain": 0.5, "flow_idle": "120s"}]}),
    "token_marker": ("topology.bottleneck.reverse", {"edge": [{
        "kind": "token_marker", "interval": "400ms", "pool": "300KB", "in_dscp": "AF11", "out_dscp": "AF12"}]}),
}


def gallery() -> list[tuple[str, dict, tuple]]:
    """(name, the quick scenario with the entry set, the path of the entry's fields)."""
    quick = yaml.safe_load((REPO / "scenarios" / "quick.yaml").read_text())
    out = []
    for name, (where, value) in GALLERY.items():
        path = tuple(where.split("."))
        out.append((f"gallery/{name}", replaced_path(quick, path, value), path))
    return out


def replaced_path(node: dict, path: tuple, value: Any) -> dict:
    """`node` with `value` at `path`, creating the sections on the way."""
    if len(path) == 1:
        return {**node, path[0]: value}
    return {**node, path[0]: replaced_path(node.get(path[0]) or {}, path[1:], value)}


@dataclass
class Case:
    name: str
    text: str | bytes
    overrides: list[str] = field(default_factory=list)
    transfers: bool = False  # a `kind: transfers` file (`catnip validate` tells them apart first)


def corpus() -> list[Case]:
    cases, turn = [], 0
    for f in FILES:
        first = len(cases)
        text = f.read_text()
        raw = yaml.safe_load(text)
        rel = f.relative_to(REPO / "scenarios")
        for path in fields(raw):
            where = ".".join(map(str, path))
            value = hostile(_get(raw, path), turn)
            turn += 1
            cases.append(Case(f"{rel}:{where}={bounded.short(value)}", dump(one_point(replaced(raw, path, value), path))))
            extra = []
            if isinstance(_get(raw, path), (int, float)) and not isinstance(_get(raw, path), bool):
                extra = [True]
            elif isinstance(_get(raw, path), str) and (m := UNIT.fullmatch(_get(raw, path))):
                extra = [f"1e-9{m.group(2)}"]  # rounds to nothing in any unit (the rotation has the huge ones)
            for v in extra:
                if v != value:
                    cases.append(Case(f"{rel}:{where}={v}", dump(one_point(replaced(raw, path, v), path))))
        base = one_point(raw)
        for key in raw:  # a second block of each top-level section
            cases.append(Case(f"{rel}:twice {key}", dump(base) + dump({key: raw[key]})))
        lines = dump(base).splitlines()
        nested = next(i for i, line in enumerate(lines) if re.match(r"  +[a-z_]+: [^{\[]", line))
        cases.append(Case(f"{rel}:twice {lines[nested].strip()}",
                          "\n".join(lines[:nested + 1] + [lines[nested]] + lines[nested + 1:]) + "\n"))
        paths = fields(base)
        for k in range(3):  # a hostile value through --set, on fields spread over the file
            path = paths[(k * 7 + turn) % len(paths)]
            value = hostile(_get(base, path), turn + k)
            shown = yaml.safe_dump(value, default_flow_style=True, width=10**9).strip().removesuffix("...").strip()
            cases.append(Case(f"{rel}:--set {'.'.join(map(str, path))}", dump(base),
                              [f"{'.'.join(map(str, path))}={shown}"]))
        cases.append(Case(f"{rel}:huge name", dump({**base, "name": "n" * 5000})))
        cases.append(Case(f"{rel}:not UTF-8", dump(base).encode() + b"\xff\xfe"))
        for c in cases[first:]:
            c.transfers = raw.get("kind") == "transfers"
    quick = (REPO / "scenarios" / "quick.yaml").read_text()
    cases.append(Case("quick.yaml:over 1 MB", quick + "#" * (bounded.MAX_FILE_BYTES + 1)))
    for name, raw, under in gallery():
        cases.append(Case(f"{name}:as written", dump(raw)))
        for path in fields(_get(raw, under)):
            path = under + path
            value = hostile(_get(raw, path), turn)
            turn += 1
            cases.append(Case(f"{name}:{'.'.join(map(str, path))}={bounded.short(value)}",
                              dump(replaced(raw, path, value))))
            original = _get(raw, path)
            if isinstance(original, (int, float)) and not isinstance(original, bool):
                # The engine's numeric bounds live here: every hostile number, not one in turn.
                for v in (NUMBER if isinstance(original, int) else FLOAT):
                    if v is not value:
                        cases.append(Case(f"{name}:{'.'.join(map(str, path))}={bounded.short(v)}",
                                          dump(replaced(raw, path, v))))
            elif isinstance(original, str) and (m := UNIT.fullmatch(original)):
                cases.append(Case(f"{name}:{'.'.join(map(str, path))}=1e-9{m.group(2)}",
                                  dump(replaced(raw, path, f"1e-9{m.group(2)}"))))
    return cases


def _get(node: Any, path: tuple) -> Any:
    for p in path:
        node = node[p]
    return node


def _alarm(signum, frame):
    raise TimeoutError(f"a case took more than {PER_CASE_SECONDS} s: a hang")


def check_case(case: Case, path: Path, stats: Counter, laid_out: dict[str, list[dict]]) -> list[dict]:
    """The case through the check path (`catnip validate`'s: a transfer measurement is told
    apart first); the engine configurations of what it accepted, each laid out once (`laid_out`,
    by what they depend on: many mutations change nothing the engines get)."""
    (path.write_bytes if isinstance(case.text, bytes) else path.write_text)(case.text)
    started = time.monotonic()
    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, PER_CASE_SECONDS)
    try:
        try:
            measured = validate_mod._transfers(str(path), tuple(case.overrides), None) if case.transfers else None
            if measured is not None:
                sc = transfer.load(path, case.overrides)
                configs = engine_check.transfer_configs(sc)
            else:  # what `catnip run` checks, then what `catnip validate` prints
                sweep = validate_mod.load(str(path), case.overrides)
                validate_mod.describe(sweep)
                configs = []
                for _, sc in sweep.points:
                    seed = sc.seed + 1000 * (sc.run.repetitions - 1)  # the largest seed a repetition gets
                    key = f"{seed} " + sc.model_dump_json(include={"topology", "router", "run"})
                    if key not in laid_out:
                        laid_out[key] = engine_check.engine_configs(sc, seed)
                        configs += laid_out[key]
        except validate_mod.Refused as exc:
            lines = exc.format_message().splitlines()
            assert 1 <= len(lines) <= bounded.MAX_LINES + 1, (case.name, lines[:3])
            assert all(len(line) <= bounded.MAX_LINE for line in lines), (case.name, max(map(len, lines)))
            stats["refused"] += 1
            return []
        except Exception as exc:  # a traceback for the user, or a hang (TimeoutError)
            raise AssertionError(f"{case.name}: {exc!r}") from exc
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        stats["max_ms"] = max(stats["max_ms"], round(1000 * (time.monotonic() - started)))
    stats["accepted"] += 1
    for c in configs:  # NaN or infinity would not even reach the engine as JSON
        assert all(math.isfinite(x) for x in _numbers(c)), (case.name, "a non-finite number in an engine config")
    return configs


def _numbers(node: Any):
    if isinstance(node, dict):
        for v in node.values():
            yield from _numbers(v)
    elif isinstance(node, list):
        for v in node:
            yield from _numbers(v)
    elif isinstance(node, float):
        yield node


def test_every_field_of_every_shipped_scenario_made_hostile_is_refused_in_short_lines_or_loads_in_the_engine(
        tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CATNIP_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("CATNIP_DB", str(tmp_path / "data" / "catnip.db"))
    cases = corpus()
    stats: Counter = Counter()
    started, cpu = time.monotonic(), time.process_time()
    configs, owner, laid_out = [], [], {}
    for i, case in enumerate(cases):
        got = check_case(case, tmp_path / f"case{i % 2}.yaml", stats, laid_out)
        configs += got
        owner += [case.name] * len(got)
    answers = engine_check.check(configs)
    wall, cpu = time.monotonic() - started, time.process_time() - cpu
    invalid = sorted({(name, error) for name, error in zip(owner, answers) if error is not None})
    assert not invalid, f"{len(invalid)} accepted-invalid: {invalid[:5]}"
    assert len(cases) >= 500 and stats["refused"] + stats["accepted"] == len(cases)
    for name, raw, _ in gallery():  # mutations of a gallery entry that does not load would prove nothing
        (tmp_path / "gallery.yaml").write_text(dump(raw))
        assert validate_mod.load(str(tmp_path / "gallery.yaml")).points, name
    assert not (tmp_path / "data").exists(), "validation created the data folder or a database"
    with capsys.disabled():
        print(f"\nscenario-mutation corpus: {len(cases)} cases from {len(FILES)} files and {len(GALLERY)} policies and"
              f" edge functions; refused {stats['refused']},"
              f" accepted {stats['accepted']} ({len(configs)} engine configurations, all loaded by"
              f" catnip-engine check); tracebacks 0, hangs 0, accepted-invalid 0; slowest {stats['max_ms']} ms;"
              f" {wall:.1f} s in all ({cpu:.1f} s of CPU)")
