"""The command line's finish: whole one-line helps, `compare` and `list` in CSV with readable
headers, ambiguous run prefixes named, `catnip run NAME`, fig2's default output, and the set-up's
`catnip` link. Root-free: recorded databases in temporary folders, nothing run on the machine."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from catnip.cli import main as cli
from catnip.controller import validate as validate_mod
from catnip.cli.main import main
from catnip.results import table as tables
from catnip.results import compare, layouts
from catnip.results.store import Store
from catnip.testbed import paths

REPO = paths.REPO
BASE = "20261124-100000-catnip-wan-baseline-aaaa"
RUNS = ("20261124-110000-catnip-wan-catnip-bbbb", "20261124-120000-catnip-wan-catnip-cccc")


def _page(client, page, duration, error=None):
    return {"client": client, "server": "ctpv1", "page": page, "round": 0, "start": 0, "end": 1,
            "duration": duration, "objects": 1, "bytes": 1, "error": error}


@pytest.fixture
def db(tmp_path):
    """Three runs with ids and point labels longer than compare's 12-character headers."""
    path = tmp_path / "db"
    with Store(path) as s:
        for run, scale in ((BASE, 1.0), (RUNS[0], 0.5), (RUNS[1], 0.8)):
            s.create_run(run, "web", "x", {"name": "web"}, {}, 1, "abc", {}, {})
            for point, buf in enumerate(("64KB", "512KB")):
                s.create_point(run, point, 0, {"topology.bottleneck.buffer": buf}, {}, 1)
                s.update_point(run, point, realtime_ok=int(point == 0), status="done")
                s.add_transfers(run, point, [], [_page(f"c{c}", pg, scale * (pg + 0.1 * c + 0.05 * point))
                                                 for pg in (1, 2) for c in range(4)])
    return str(path)


def _cli(*args):
    return CliRunner().invoke(main, list(args))


# --- help ---------------------------------------------------------------------------------------------
def test_every_command_lists_a_whole_one_line_help():
    text = _cli("--help").output
    listing = text[text.index("Commands:"):].splitlines()[1:]
    assert len(listing) == len(main.commands), listing  # one line each: nothing wrapped
    for name, cmd in main.commands.items():
        assert cmd.short_help, name
        assert f"  {name}" in text and any(line.split(None, 1) == [name, cmd.short_help] for line in listing), name
    assert "..." not in text[text.index("Commands:"):]
    assert not any(line.rstrip().endswith("Fig.") for line in listing)


# --- compare ------------------------------------------------------------------------------------------
def test_compare_text_has_a_legend_with_whole_ids_and_labels(db):
    res = _cli("compare", BASE, *RUNS, "--db", db)
    assert res.exit_code == 0, res.output
    head, legend = res.output.split("Columns:")
    assert RUNS[0] not in head and head.splitlines()[2].split()[-4:] == ["#1", "#2", "#3", "#4"]  # numbered...
    lines = legend.strip().splitlines()
    assert len(lines) == 4  # ...and the legend has every column whole, in order
    assert lines[0].split() == ["#1:", RUNS[0], "point", "0:", "64", "KB", "buffer", "(against",
                                "baseline", "point", "0:", "64", "KB", "buffer)"]
    assert lines[3].startswith(f"  #4: {RUNS[1]} point 1: 512 KB buffer")


def test_compare_csv_is_the_table_xi_layout(db):
    res = _cli("compare", BASE, *RUNS, "--db", db, "--csv")
    assert res.exit_code == 0, res.output
    with Store(db) as s:
        table = layouts.build("catnip-table-xi", s, BASE, *RUNS)
    assert res.output == tables.render_csv(table).replace("\r\n", "\n")
    assert tuple(c.name for c in table.columns) == cli.TABLE_XI_COLUMNS
    # --realtime-only, which the layout does not take: point 1 (not real time) is left out everywhere.
    res = _cli("compare", BASE, RUNS[0], "--db", db, "--csv", "--realtime-only")
    rows = list(csv.DictReader(io.StringIO(res.output)))
    with Store(db) as s:
        cmp = compare.compare(s, [BASE, RUNS[0]], realtime_only=True)
    assert [r["relative"] for r in rows] == [str(c["relative"].get(p["page"], ""))
                                             for c in cmp["columns"] for p in cmp["pages"]]
    assert _cli("compare", BASE, RUNS[0], "--db", db, "--json", "--csv").exit_code == 2


# --- list -----------------------------------------------------------------------------------------------
def test_list_has_a_header_and_csv(db):
    text = _cli("list", "--db", db).output.splitlines()
    assert text[0].split() == ["RUN", "ID", "SCENARIO", "STATUS", "STARTED", "DURATION"]
    assert [line.split()[0] for line in text[1:]] == [RUNS[1], RUNS[0], BASE]
    res = _cli("list", "--db", db, "--csv")
    rows = list(csv.DictReader(io.StringIO(res.output)))
    assert list(rows[0]) == ["id", "name", "status", "seed", "started", "finished", "error", "note"]
    assert [r["id"] for r in rows] == [RUNS[1], RUNS[0], BASE]
    assert [r["id"] for r in json.loads(_cli("list", "--db", db, "--json").output)] == [r["id"] for r in rows]
    res = _cli("list", "--db", db, "--json", "--csv")
    assert res.exit_code == 2 and "--json and --csv" in res.output


# --- ambiguous run prefixes ------------------------------------------------------------------------------
@pytest.mark.parametrize("args", [
    ["report", "20261124-1"], ["report", "20261124-1", "--loss"], ["report", "20261124-1", "--pool"],
    ["report", f"{BASE}+20261124-1", "--pool"], ["report", "20261124-1", "--apps"],
    ["compare", BASE, "20261124-1"], ["burst-seq", "20261124-1"],
])
def test_an_ambiguous_prefix_names_the_runs_it_matches(db, args):
    res = _cli(*args, "--db", db)
    assert res.exit_code == 1, res.output
    assert f"run id prefix '20261124-1' matches 3 runs ({BASE}, {RUNS[0]}, {RUNS[1]})" in res.output, res.output


def test_an_unambiguous_prefix_still_works(db):
    res = _cli("report", "20261124-10", "--db", db)
    assert res.exit_code == 0 and res.output.startswith(f"Run {BASE}"), res.output


# --- catnip run NAME -------------------------------------------------------------------------------------
def test_a_bare_name_is_a_file_of_scenarios(monkeypatch):
    loaded = []

    def load(path, overrides=(), seed=None, only=()):  # stop before anything touches the machine
        loaded.append(path)
        raise validate_mod.Refused("stopped by the test")
    monkeypatch.setattr(validate_mod, "load", load)
    monkeypatch.chdir(REPO)
    res = CliRunner().invoke(main, ["run", "quick"])
    assert res.exit_code == 2 and loaded == [str(REPO / "scenarios" / "quick.yaml")], res.output
    assert "scenario quick: scenarios/quick.yaml" in res.output
    res = CliRunner().invoke(main, ["run", "scenarios/quick.yaml"])  # a path is taken as it is
    assert loaded[-1] == "scenarios/quick.yaml" and "scenario quick:" not in res.output


def test_a_bare_name_found_nowhere_lists_the_names(tmp_path, monkeypatch):
    folder = tmp_path / "scenarios"
    folder.mkdir()
    for name in ("quick", "tree-small", "parking-lot"):
        (folder / f"{name}.yaml").write_text("name: x\n")
    (folder / "notes.txt").write_text("")
    monkeypatch.chdir(tmp_path)
    assert cli.scenario_path("quick", folder) == str(folder / "quick.yaml")
    assert cli.scenario_path("other.yaml", folder) == "other.yaml"  # an extension: a path, checked by load
    with pytest.raises(validate_mod.Refused) as exc:
        cli.scenario_path("quik", folder)
    lines = str(exc.value).splitlines()
    assert lines[0] == f"no scenario 'quik': no such file, nor such a name in {folder} (did you mean quick?);" \
                       " the names there:"
    assert lines[1] == "parking-lot, quick, tree-small"
    res = CliRunner().invoke(main, ["run", "no-such-scenario"])
    assert res.exit_code == 2 and "quick" in res.output and "tcpf-grid" in res.output, res.output


# --- fig2 --------------------------------------------------------------------------------------------------
def test_fig2_writes_into_the_current_folder_by_default(tmp_path, monkeypatch):
    from catnip.controller import fig2, skeleton
    written = []
    monkeypatch.setattr(fig2, "run", lambda out, rtt, log: written.append(out) or {"reno": [(3, 0.001)]})
    monkeypatch.setattr(skeleton, "machine_lock", contextlib.nullcontext)
    monkeypatch.setattr(skeleton, "signals_cancel", contextlib.nullcontext)
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(main, ["fig2"])
    assert res.exit_code == 0, res.output
    assert written == [Path("fig2-senders.svg")] and "plot: fig2-senders.svg" in res.output
    assert "data: fig2-senders.json" in res.output  # the series beside it, which the dashboard draws
    tracked = subprocess.run(["git", "-C", str(REPO), "ls-files"], capture_output=True, text=True, check=True)
    assert cli.FIG2_OUT not in tracked.stdout.split()  # run from the repository, it is still no tracked file
    res = CliRunner().invoke(main, ["fig2", "--out", "docs.svg"])
    assert written[-1] == Path("docs.svg")


# --- scripts/setup.sh's link -----------------------------------------------------------------------------
def _link(link: Path, **env) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(REPO / "scripts" / "link-catnip.sh"), str(link)], capture_output=True,
                          text=True, timeout=30, env={**os.environ, **env})


def test_setup_links_catnip_but_leaves_another_clones_link(tmp_path):
    mine = REPO / ".venv" / "bin" / "catnip"
    link = tmp_path / "catnip"
    out = _link(link)
    assert out.returncode == 0 and os.readlink(link) == str(mine), out.stdout + out.stderr
    assert _link(link).stdout == ""  # already this clone's: nothing to say
    other = tmp_path / "other" / ".venv" / "bin" / "catnip"
    other.parent.mkdir(parents=True)
    other.write_text("#!/bin/sh\n")
    link.unlink()
    link.symlink_to(other)
    out = _link(link)
    assert out.returncode == 0 and os.readlink(link) == str(other)  # left alone...
    assert len(out.stdout.splitlines()) == 1 and "CATNIP_RELINK=1" in out.stdout and str(other) in out.stdout
    out = _link(link, CATNIP_RELINK="1")  # ...unless asked
    assert os.readlink(link) == str(mine) and "was " + str(other) in out.stdout
    link.unlink()
    link.symlink_to(tmp_path / "gone" / "catnip")  # its clone was removed: repointed, saying so
    out = _link(link)
    assert os.readlink(link) == str(mine) and "its target is gone" in out.stdout
    link.unlink()
    link.write_text("#!/bin/sh\n")  # not a link (another install): left alone
    out = _link(link)
    assert not link.is_symlink() and "not a link" in out.stdout


def test_validate_takes_a_bare_scenario_name_as_run_does():
    res = CliRunner().invoke(main, ["validate", "quick"])
    assert res.exit_code == 0, res.output
    assert "scenarios/quick.yaml" in res.output and ": valid" in res.output
    res = CliRunner().invoke(main, ["validate", "quik"])
    assert res.exit_code == 2 and "did you mean quick" in res.output, res.output


def test_run_refuses_a_busy_machine_before_probing_it(monkeypatch, tmp_path):
    """While another run holds the machine, `catnip run` must not build its probe namespace."""
    from catnip.controller import skeleton
    from catnip.testbed import capabilities, cleanup

    def no_probe():
        raise AssertionError("probed a machine another run is using")
    monkeypatch.setattr(capabilities, "probe", no_probe)
    monkeypatch.setattr(skeleton, "machine_busy", lambda: True)
    monkeypatch.setattr(cleanup, "run_in_progress", lambda: "pid 1 since then: catnip run x")
    res = CliRunner().invoke(main, ["run", "quick", "--db", str(tmp_path / "x.db")])
    assert res.exit_code == 1 and "another catnip run is using this machine (pid 1" in res.output, res.output


def test_model_subcommands_list_whole_help_and_name_ambiguous_runs(tmp_path):
    res = CliRunner().invoke(main, ["model", "--help"])
    listed = res.output.split("Commands:")[1].strip().splitlines()
    assert len(listed) == 7 and not any(line.rstrip().endswith("...") for line in listed), res.output
    from catnip.results.store import Store
    db = tmp_path / "m.db"
    with Store(db) as store:
        for rid in ("hv-a-1", "hv-a-2"):
            store.create_run(rid, "hv", "x", {"kind": "transfers"}, {}, 1, "abc", {}, {})
    res = CliRunner().invoke(main, ["model", "validate", "hv-a", "--db", str(db)])
    assert res.exit_code == 1 and "matches 2 runs (hv-a-1, hv-a-2)" in res.output, res.output
