"""A queue policy or an edge function is one Rust file plus its registration (issue 43,
registries): a toy of each is added to a copy of the engine's sources, touching nothing but its
own file and, in the list file (policy/mod.rs, edge/mod.rs), its `mod` line and its line in the
`policies!` / `edge_functions!` list; the copy builds, lists both kinds, checks their parameters
at load, and replays a trace through them. Its Python half (a schema class, registered) is
tests/test_plugins.py's toy policy."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow

TOY_POLICY = '''//! A toy policy: every n-th arrival refused, the rest queued while they fit.
use super::fifo::{Admission, Buffered, FifoPolicy};
use super::{Dropped, LinkEnv, PolicyParams, QueuePolicy, Queued};
use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToyEveryNthConfig {
    pub n: u64,
}

impl PolicyParams for ToyEveryNthConfig {
    fn build<H: 'static>(&self, env: &LinkEnv) -> Result<Box<dyn QueuePolicy<H>>, String> {
        if self.n < 2 {
            return Err(format!("n: must be at least 2 (got {})", self.n));
        }
        Ok(Box::new(FifoPolicy::with_rule(env.buffer, EveryNth { n: self.n, seen: 0 })))
    }
}

struct EveryNth {
    n: u64,
    seen: u64,
}

impl<H> Admission<H> for EveryNth {
    fn admit(&mut self, pkt: Queued<H>, q: &mut Buffered<H>, _now: u64, dropped: &mut Vec<Dropped<H>>) {
        self.seen += 1;
        if self.seen % self.n == 0 || !q.fits(pkt.info.len) {
            dropped.push(Dropped::refused(pkt));
        } else {
            q.fifo.push(pkt);
        }
    }
}
'''

TOY_EDGE = '''//! A toy edge function: every arrival leaves with one DSCP.
use super::api::{EdgeFunction, EdgeParams, Step};
use crate::policy::Queued;
use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToyStampConfig {
    pub dscp: u8,
}

impl EdgeParams for ToyStampConfig {
    fn build<H: 'static>(&self) -> Result<Box<dyn EdgeFunction<H>>, String> {
        Ok(Box::new(Stamp { dscp: self.dscp, stamped: 0 }))
    }

    fn may_rewrite(&self) -> bool {
        true
    }
}

struct Stamp {
    dscp: u8,
    stamped: u64,
}

impl<H> EdgeFunction<H> for Stamp {
    fn apply(&mut self, mut pkt: Queued<H>, _now: u64) -> Step<H> {
        pkt.info.dscp = self.dscp;
        self.stamped += 1;
        Step::Next(pkt)
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![("stamped", self.stamped)]
    }
}
'''


def _register(path: Path, after_mod: str, module: str, list_open: str, line: str) -> None:
    """Add `mod MODULE;` after the line `after_mod` and `line` as the first entry of the list."""
    text = path.read_text()
    assert after_mod in text and list_open in text, (path, after_mod, list_open)
    text = text.replace(after_mod, f"{after_mod}mod {module};\n", 1).replace(list_open, f"{list_open}    {line}\n", 1)
    path.write_text(text)


@pytest.fixture(scope="module")
def toy_engine(tmp_path_factory) -> Path:
    if shutil.which("cargo") is None and not (Path.home() / ".cargo" / "bin" / "cargo").exists():
        pytest.skip("cargo not installed (make setup installs it)")
    work = tmp_path_factory.mktemp("toy-engine")
    for name in ("Cargo.toml", "Cargo.lock"):
        shutil.copy(REPO / "engine" / name, work / name)
    shutil.copytree(REPO / "engine" / "src", work / "src")
    before = {p.relative_to(work): p.read_text() for p in (work / "src").rglob("*.rs")}
    (work / "src" / "policy" / "toy_every_nth.rs").write_text(TOY_POLICY)
    (work / "src" / "edge" / "toy_stamp.rs").write_text(TOY_EDGE)
    _register(work / "src" / "policy" / "mod.rs", "mod wrr;\n", "toy_every_nth", "policies! {\n",
              '"toy_every_nth" => ToyEveryNth(toy_every_nth::ToyEveryNthConfig),')
    _register(work / "src" / "edge" / "mod.rs", "mod shape;\n", "toy_stamp", "edge_functions! {\n",
              '"toy_stamp" => ToyStamp(toy_stamp::ToyStampConfig),')
    # Nothing else of the engine changed: two lines in each list file.
    for rel, text in before.items():
        now = (work / rel).read_text()
        if rel.name == "mod.rs" and rel.parent.name in ("policy", "edge"):
            assert len(now.splitlines()) == len(text.splitlines()) + 2
            assert set(text.splitlines()) <= set(now.splitlines())
        else:
            assert now == text, rel
    env = {**os.environ, "PATH": f"{Path.home() / '.cargo' / 'bin'}:{os.environ['PATH']}",
           # The dependencies stay built between runs; only the copy is compiled again.
           "CARGO_TARGET_DIR": str(REPO / "engine" / "target" / "toy-plugins")}
    done = subprocess.run(["cargo", "build", "--offline", "--quiet", "--bin", "catnip-engine"], cwd=work, env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    return Path(env["CARGO_TARGET_DIR"]) / "debug" / "catnip-engine"


def _link(policy: dict, edge: list | None = None) -> dict:
    return {"seed": 1, "links": [{"name": "b", "queue_num": 0, "rate_bps": 0, "delay_us": 0, "buffer": None,
                                  "policy": policy, "edge": edge or []}]}


def test_the_toys_are_kinds_of_the_engine(toy_engine):
    kinds = json.loads(subprocess.run([toy_engine, "kinds"], capture_output=True, text=True, check=True).stdout)
    assert "toy_every_nth" in kinds["policies"] and "toy_stamp" in kinds["edge"]


def test_their_parameters_are_checked_at_load(toy_engine):
    def check(cfg):
        return subprocess.run([toy_engine, "check"], input=json.dumps(cfg) + "\n", capture_output=True, text=True)
    ok = check(_link({"kind": "toy_every_nth", "n": 3}, [{"kind": "toy_stamp", "dscp": 46}]))
    assert json.loads(ok.stdout) == {"ok": True}
    bad = json.loads(check(_link({"kind": "toy_every_nth", "n": 1})).stdout)
    assert not bad["ok"] and "n: must be at least 2" in bad["error"]
    bad = json.loads(check(_link({"kind": "toy_every_nth", "m": 3})).stdout)
    assert not bad["ok"] and "m" in bad["error"]


def test_a_trace_goes_through_both(toy_engine, tmp_path):
    (tmp_path / "cfg.json").write_text(json.dumps(_link({"kind": "toy_every_nth", "n": 3},
                                                        [{"kind": "toy_stamp", "dscp": 46}])))
    (tmp_path / "trace.csv").write_text("time_us,size,dscp,flow\n" + "".join(f"{i * 100},1000,0,1\n" for i in range(9)))
    subprocess.run([toy_engine, "replay", "--config", tmp_path / "cfg.json", "--trace", tmp_path / "trace.csv",
                    "--out", tmp_path / "fates.csv"], capture_output=True, text=True, check=True)
    with open(tmp_path / "fates.csv") as fh:
        rows = list(csv.DictReader(fh))
    dropped = [i for i, r in enumerate(rows) if r["fate"] != "sent"]
    assert dropped == [2, 5, 8], rows
    assert {r["dscp_out"] for r in rows if r["fate"] == "sent"} == {"46"}, rows[0]
