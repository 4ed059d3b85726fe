"""The command line's "Smaller:" findings of issue 48, kept fixed: every `--db` option says which
database it reads by default; every group (`catnip`, `cluster`, `docs`, `model`) lists its
commands a whole line each (`cluster --help` cut the worker's); `run --jobs` and `validate --jobs`
take one range; `report --layouts` keeps its columns whatever a name's or a paper's length.
Root-free: click's runner, nothing started (an out-of-range `--jobs` is refused while the
options are read)."""

from __future__ import annotations

import os
import re

import click
from click.testing import CliRunner

import catnip.papers  # noqa: F401 (registers the papers' layouts, as `catnip report` does)
from catnip.cli.main import main
from catnip.results import layouts


def _commands(cmd: click.Command = main, path: tuple[str, ...] = ()):
    yield path, cmd
    if isinstance(cmd, click.Group):
        for name, sub in cmd.commands.items():
            yield from _commands(sub, (*path, name))


def _cli(*args: str):
    return CliRunner().invoke(main, list(args))


def test_every_db_option_names_its_default_database():
    with_db = []
    for path, cmd in _commands():
        if any("--db" in getattr(p, "opts", ()) for p in cmd.params):
            with_db.append(" ".join(path))
            shown = " ".join(_cli(*path, "--help").output.split())  # as printed, its wrapping undone
            # the default as the command was defined (paths.database(): data/catnip.db or $CATNIP_DB)
            assert re.search(r"--db FILE SQLite file \(default /\S+\.db\)", shown), (path, shown)
    # the commands the issue found without it, and the others that read a database
    assert {"compare", "list", "report", "model measure", "model validate", "run", "export", "import",
            "web", "docs archive"} <= set(with_db), with_db


def test_every_group_lists_its_commands_a_whole_line_each():
    groups = [(path, cmd) for path, cmd in _commands() if isinstance(cmd, click.Group)]
    assert {path for path, _ in groups} >= {(), ("cluster",), ("docs",), ("model",)}
    for path, group in groups:
        text = _cli(*path, "--help").output
        listing = text.split("Commands:\n", 1)[1].splitlines()
        listing = [line for line in listing if line.strip()]
        assert len(listing) == len(group.commands), (path, listing)  # nothing wrapped onto a second line
        for name, cmd in group.commands.items():
            assert cmd.short_help, (path, name)
            assert any(line.split(None, 1) == [name, cmd.short_help] for line in listing), (path, name, listing)
        assert "..." not in "\n".join(listing), (path, listing)


def test_run_and_validate_take_one_range_of_jobs():
    most = os.cpu_count() or 1
    for command in ("run", "validate"):
        res = _cli(command, "quick", "--jobs", str(most + 1))
        assert res.exit_code == 2 and f"{most + 1} is not in 1-{most}" in res.output, (command, res.output)
        res = _cli(command, "quick", "--jobs", "0")
        assert res.exit_code == 2 and f"0 is not in 1-{most}" in res.output, (command, res.output)
    assert _cli("validate", "quick", "--jobs", str(most)).exit_code == 0


def test_report_layouts_keeps_its_columns():
    res = _cli("report", "--layouts")
    assert res.exit_code == 0, res.output
    head, *lines = res.output.splitlines()
    runs_at, text_at = head.index("RUNS"), head.index("PAPER")
    assert head.startswith("LAYOUT ") and runs_at < text_at
    assert len(lines) == len(layouts.LAYOUTS)
    for line, x in zip(lines, layouts.LAYOUTS.values()):
        runs = " ".join(["RUN"] * x.min_runs) + ("..." if x.max_runs is None else "")
        assert line[:runs_at].rstrip() == x.name and line[runs_at - 2:runs_at] == "  ", line
        assert line[runs_at:text_at].rstrip() == runs, line
        assert line[text_at:] == f"{x.paper}: {x.title}", line
    # the names and papers that broke the fixed widths are there to be kept in line
    assert max(len(x.name) for x in layouts.LAYOUTS.values()) > 16
    assert max(len(x.paper) for x in layouts.LAYOUTS.values()) > 28
