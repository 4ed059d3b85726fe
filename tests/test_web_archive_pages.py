"""Every run kept in archive/ (the runs behind the docs, docs/archive.md) has a dashboard page that
renders: real runs of every paper's scenarios, not only hand-written ones (an sd-schemes run's
TCP-state marking once made its page a 500)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from catnip.cli.main import main
from catnip.webui.app import create_app
from click.testing import CliRunner

ARCHIVE = Path(__file__).resolve().parent.parent / "archive"
RUNS = sorted(e["run_id"] for e in json.loads((ARCHIVE / "MANIFEST.json").read_text())["runs"])


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    db = tmp_path_factory.mktemp("archive-pages") / "catnip.db"
    for run_id in RUNS:
        res = CliRunner().invoke(main, ["import", str(ARCHIVE / "runs" / f"{run_id}.catnip.json.gz"), "--db", str(db)])
        assert res.exit_code == 0, res.output
    return create_app(db=db).test_client()


@pytest.mark.parametrize("run_id", RUNS)
def test_every_archived_runs_page_renders(client, run_id):
    page = client.get(f"/runs/{run_id}")
    assert page.status_code == 200, page.get_data(as_text=True)[-2000:]
    assert run_id in page.get_data(as_text=True)


def test_an_sd_schemes_page_says_what_tcp_state_marking_did(client):
    sd = next(r for r in RUNS if "sd-schemes" in r)
    text = client.get(f"/runs/{sd}").get_data(as_text=True)
    assert "Initial RTO: the kernel" in text and "SPM marking at the servers" not in text
