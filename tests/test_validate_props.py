"""Generated hostile scenarios through the validate path: no traceback, no hang, no state.

Hypothesis builds at least 200 inputs per run from the shipped scenarios: a value anywhere in the
tree replaced by a hostile one (non-finite and absurd numbers, bare numbers, units that round to
nothing, wrong types, long and odd strings, nested junk), fields removed or invented, `--set`
overrides of any path, sweeps of any size, and YAML text attacks (alias bombs of any width and
depth, nesting of any depth, integers of any length, bytes that are not UTF-8, tags). Each goes
through `catnip validate` (in this process, with click's runner) and the dashboard's form and home
page, under an alarm: it must be accepted or refused (exit 2) in a few short lines, never raise,
never take more than a few seconds, and leave no database or run folder behind. An accepted
scenario must have every link direction's rate a whole number of at least 1 bit/s and finite delays.

`pytest -s` prints the figures docs/reliability.md quotes (inputs, refused, accepted, time).
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from catnip.cli.main import main
from catnip.spec import bounded
from catnip.spec import scenario as s
from catnip.testbed.paths import REPO
from catnip.webui import forms

# At least 200 per run (issue 22); CATNIP_PROPS_EXAMPLES=3000 hunts longer (no time bound then).
EXAMPLES = int(os.environ.get("CATNIP_PROPS_EXAMPLES", "250"))
PER_INPUT_SECONDS = 30      # an input still being checked after this is a hang (a loaded machine is slow, not hung)
BASES = {name: yaml.safe_load((REPO / "scenarios" / f"{name}.yaml").read_text())
         for name in ("quick", "parking-lot", "tree-small", "newcwv-fig5-pipeack")}

ODD_STRINGS = ["5", "1500", "0.4bit", "1e309bit", "1e309", ".inf", "-5ms", "10MB/s", "MB/s", "1.5Mbt", "0p", "-1p",
               "nan", "NaN", "64KiB", "/dev/zero", "/dev/stdin", "../../etc/passwd", "%", "1e-300Mbit", "9" * 40,
               "0", "-0", "0x10", "1_000", "1:30", "~", "null", "yes", "off", "100%", "200%", "-20%", "1e400%",
               "\x00", "\u202e", "a" * 5000, "5 ms", "5msec", "5 s ", "1.5 Mbit", "1,5Mbit", "0.0000001ms",
               "99999999999999999999Gbit", "AF11", "EF", "64", "cs7", "tcp", "udp", "1-65536", "65535-1", "*"]
# Values the schema has to refuse or take correctly wherever they land in the tree.
SCALARS = st.one_of(
    st.integers(min_value=-10**40, max_value=10**40), st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(), st.none(), st.sampled_from(ODD_STRINGS),
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=40))
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=6) | st.dictionaries(
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=12), inner, max_size=6), max_leaves=25)


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    """Every place in a loaded scenario (dict keys and list indexes)."""
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, prefix + (i,))
    return out


def _at(node: Any, path: tuple) -> Any:
    for p in path:
        node = node[p]
    return node


def _replace(node: Any, path: tuple, value: Any, delete: bool = False) -> Any:
    """A copy of `node` with the value at `path` replaced (or deleted)."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(node, dict):
        out = dict(node)
        if delete and not rest:
            out.pop(head, None)
        else:
            out[head] = _replace(node.get(head), rest, value, delete)
        return out
    out = list(node)
    if delete and not rest:
        out.pop(head)
    else:
        out[head] = _replace(node[head], rest, value, delete)
    return out


@st.composite
def mutated(draw) -> tuple[str, str | bytes, list[str]]:
    """A shipped scenario with one to three places changed, plus `--set` overrides, as YAML text."""
    name = draw(st.sampled_from(sorted(BASES)))
    raw = BASES[name]
    for _ in range(draw(st.integers(1, 3))):
        places = _paths(raw)
        path = draw(st.sampled_from(places))
        action = draw(st.sampled_from(["replace", "replace", "delete", "invent"]))
        if action == "delete":
            raw = _replace(raw, path, None, delete=True)
        elif action == "invent" and isinstance(_at(raw, path[:-1]), dict):  # a field no schema has
            raw = _replace(raw, path[:-1] + (draw(st.text(min_size=1, max_size=10)),), draw(VALUES))
        else:
            raw = _replace(raw, path, draw(VALUES))
    overrides = []
    for _ in range(draw(st.integers(0, 3))):
        key = ".".join(str(p) for p in draw(st.sampled_from(_paths(BASES[name]))))
        value = draw(st.one_of(st.sampled_from(ODD_STRINGS), VALUES.map(
            lambda v: yaml.safe_dump(v, default_flow_style=True, width=10**9).strip().removesuffix("...").strip())))
        overrides.append(f"{key}={value}")
    return name, yaml.safe_dump(raw, allow_unicode=True), overrides


@st.composite
def text_attacks(draw) -> tuple[str, str | bytes, list[str]]:
    """YAML text a dumper would never write: alias bombs, deep nesting, long integers, bad bytes, tags, sweeps."""
    quick = (REPO / "scenarios" / "quick.yaml").read_text()
    kind = draw(st.sampled_from(["laughs", "deep", "bigint", "bytes", "tag", "sweep", "set-laughs", "junk"]))
    overrides: list[str] = []
    if kind == "laughs":
        width, depth = draw(st.integers(2, 12)), draw(st.integers(2, 12))
        lines = [f"l0: &l0 [{', '.join(['lol'] * width)}]"] + [
            f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, depth)]
        where = draw(st.sampled_from(["anchors", "description", "workload"]))
        body = quick.replace("description: >", f"description: *l{depth - 1}\nx_old: >") if where == "description" \
            else quick.replace("rounds: 1", f"rounds: 1\n  pages: *l{depth - 1}") if where == "workload" else quick
        text = "x_anchors:\n" + "".join(f"  {line}\n" for line in lines) + body  # anchors before their aliases
    elif kind == "deep":
        n = draw(st.integers(10, 6000))
        opener, closer = draw(st.sampled_from([("[", "]"), ("{a: ", "}")]))
        text = quick + f"\npaper: {opener * n}1{closer * n}\n"
    elif kind == "bigint":
        field = draw(st.sampled_from(["seed", "topology.clients", "workload.rounds", "run.repetitions"]))
        digits = "".join(draw(st.lists(st.sampled_from("0123456789_"), min_size=20, max_size=6000)))
        overrides = [f"{field}=1{digits}"]
        text = quick
    elif kind == "bytes":
        text = quick.encode() + draw(st.binary(min_size=1, max_size=200))
    elif kind == "tag":
        tag = draw(st.sampled_from(["!!python/object/apply:os.system ['true']", "!!python/name:os.system",
                                    "!!binary aGVsbG8=", "!!set {a, b}", "!!timestamp 2001-12-14", "!custom x"]))
        text = quick.replace('paper: "', f"paper: {tag}\nx_paper: \"")
    elif kind == "sweep":
        axes = draw(st.lists(st.tuples(st.sampled_from(["seed", "topology.clients", "workload.rounds",
                                                        "topology.bottleneck.buffer", "run.repetitions"]),
                                       st.integers(1, 40)), min_size=1, max_size=6, unique_by=lambda a: a[0]))
        values = {"topology.bottleneck.buffer": lambda j: f"{j + 1}p", "run.repetitions": lambda j: (j % 100) + 1}
        text = quick + "sweep:\n" + "".join(
            f"  {k}: [{', '.join(str(values.get(k, lambda j: j + 1)(j)) for j in range(n))}]\n" for k, n in axes)
    elif kind == "set-laughs":
        width, depth = draw(st.integers(2, 10)), draw(st.integers(2, 10))
        parts = [f"&a0 [{','.join(['lol'] * width)}]"] + [
            f"&a{i} [{','.join([f'*a{i - 1}'] * width)}]" for i in range(1, depth)]
        overrides = [f"{draw(st.sampled_from(['description', 'paper', 'workload.pages', 'sweep.seed']))}="
                     f"[{','.join(parts)},*a{depth - 1}]"]
        text = quick
    else:
        text = draw(st.text(st.sampled_from("[]{}&*!|>:-,#%@`'\"\n ab1\t?"), max_size=300))
    return kind, text, overrides


def _alarm(signum, frame):
    raise TimeoutError(f"an input took more than {PER_INPUT_SECONDS} s: a hang")


@pytest.fixture
def sandbox(monkeypatch):
    """A scenarios folder for the inputs, and data/database paths that must stay empty."""
    root = Path(tempfile.mkdtemp(prefix="catnip-props-"))
    data = root / "data"
    monkeypatch.setenv("CATNIP_DATA", str(data))
    monkeypatch.setenv("CATNIP_DB", str(data / "catnip.db"))
    (root / "scenarios").mkdir()
    yield root
    shutil.rmtree(root, ignore_errors=True)


def _check(root: Path, case: tuple[str, str | bytes, list[str]], stats: Counter) -> None:
    kind, text, overrides = case
    scen = root / "scenarios"
    path = scen / "hostile.yaml"
    (path.write_bytes if isinstance(text, bytes) else path.write_text)(text)
    args = ["validate", str(path)] + [a for o in overrides for a in ("--set", o)]
    started = time.monotonic()
    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, PER_INPUT_SECONDS)
    try:
        result = CliRunner().invoke(main, args)
        req, errors = forms.parse_run_request({"scenario": "hostile", "overrides": "\n".join(overrides)}, scen)
        listed = {f.name: f for f in forms.scenario_files(scen)}
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    took = time.monotonic() - started
    stats["inputs"] += 1
    stats["max_ms"] = max(stats["max_ms"], round(1000 * took))
    # No traceback: click ended by exit code (SystemExit), not by an exception it caught.
    assert result.exception is None or isinstance(result.exception, SystemExit), (kind, repr(result.exception))
    assert result.exit_code in (0, 2), (kind, result.exit_code, result.output[-300:])
    assert "Traceback" not in result.output
    assert "hostile" in listed and (req is None) == bool(errors)
    if result.exit_code == 2:
        stats["refused"] += 1
        lines = result.stderr.strip().splitlines()
        assert 1 <= len(lines) <= bounded.MAX_LINES + 1, (kind, lines[:3])
        assert all(len(line) <= bounded.MAX_LINE + len("Error: ") for line in lines), (kind, lines[:3])
        assert listed["hostile"].error or overrides, kind  # the home page shows the file's own error
    else:
        stats["accepted"] += 1
        sweep = s.load(path, overrides)
        for _, sc in sweep.points:  # what was accepted is what the engine can be given
            for where, d in sc.graph().directions(sc.router.policy):
                assert isinstance(d.rate, int) and d.rate >= 1, (where, d.rate)
                assert 0 <= d.delay <= 10, (where, d.delay)
    stats[kind if kind in ("laughs", "deep", "bigint", "bytes", "tag", "sweep", "set-laughs", "junk")
          else "mutated"] += 1
    assert not (root / "data").exists(), "validation created the data folder or a database"


def test_generated_hostile_scenarios_are_refused_in_a_few_lines_without_traceback_hang_or_state(sandbox, capsys):
    stats: Counter = Counter()
    started, cpu = time.monotonic(), time.process_time()

    @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=False,
              suppress_health_check=list(HealthCheck))
    @given(case=st.one_of(mutated(), text_attacks()))
    def prop(case):
        _check(sandbox, case, stats)

    prop()
    wall, cpu = time.monotonic() - started, time.process_time() - cpu
    assert stats["inputs"] >= 200, stats
    # CPU time, not wall time: another experiment on the machine slows us down without us hanging.
    assert cpu < 60 or EXAMPLES > 250, f"{stats['inputs']} inputs took {cpu:.0f} s of CPU"
    with capsys.disabled():
        print(f"\nhostile scenarios: {stats['inputs']} inputs ({stats['mutated']} mutated shipped scenarios,"
              f" {stats['inputs'] - stats['mutated']} text attacks: "
              + ", ".join(f"{k} {stats[k]}" for k in ("laughs", "deep", "bigint", "bytes", "tag", "sweep",
                                                       "set-laughs", "junk"))
              + f"); refused {stats['refused']}, accepted {stats['accepted']}, tracebacks 0, hangs 0;"
              f" slowest {stats['max_ms']} ms; {wall:.1f} s in all ({cpu:.1f} s of CPU)")
