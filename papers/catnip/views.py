"""The CATNIP paper's views: on a run page, the paper's table beside each point's (Table II
layout: Tables II, III, V, VI, VIII, IX; the loss of Tables IV, VII, X or XI) and a seed of the gap
study's link to its table; on the compare page, Table XI's ratios beside ours; on the study page,
the paper's numbers each of the study's gaps is measured against. The numbers are published.py's."""

from __future__ import annotations

from typing import Any

from catnip.papers.catnip import published as pub
from catnip.papers.catnip import study as study_mod
from catnip.papers.catnip.reference import point_setup
from catnip.results import labels
from catnip.results import report as report_mod
from catnip.results.point_record import record_of
from catnip.results.store import Store
from catnip.spec.record import RecordError

def study_seed(store: Store, run_id: str, page: dict[str, Any]) -> dict[str, Any] | None:
    """Something to show for a run of a study scenario with both ends, else None."""
    return {"study": True} if study_mod.applies(store, run_id) else None


def _reference(setup: dict[str, Any]) -> tuple[pub.PageTable | None, str]:
    """The paper's page table beside a point, and a line saying how it relates to the point."""
    if setup["wan"] is not None:
        return None, (f"A {setup['wan']} router buffer is the WAN emulation's setup (section V-G), for which the"
                      " paper gives page times only relative to the baseline (Table XI, at 64-512 KB: the compare"
                      " page shows them beside ours)")
    exact = pub.page_table(setup["sender"], setup["policy"]) if setup["sender"] else None
    if exact is not None:
        return exact, "The paper's table of this point's sender and router policy"
    mine = f"{setup['sender'] or labels.SENDERS.get(str(setup['cc']), setup['cc'])}/" \
           f"{pub.POLICY_NAMES.get(setup['policy'], setup['policy'])}"
    return pub.TABLE_II, (f"The paper prints no table for {mine} (Figs 5-7 draw some as bars, values not given in"
                          " the text): beside it the paper's baseline, Reno/DropTail")


def _loss(setup: dict[str, Any], ours: dict[str, Any] | None) -> dict[str, Any] | None:
    """Our bottleneck loss (in all, high, low) and the paper's row for the point's setup, if any."""
    if ours is None:
        return None
    paper: dict[str, Any] | None = None
    if setup["buffer_kb"] is not None and setup["policy"] == "droptail":
        col = pub.table_xi_column(setup["buffer_kb"])
        paper = {"caption": f"Table XI, TCP Pkt Loss at {setup['buffer_kb']} KB (the baseline's)",
                 "loss": col["loss"], "high_loss": None, "low_loss": None}
    elif setup["wan"] is None:
        row = pub.loss_row(setup["sender"], setup["policy"]) if setup["sender"] else None
        if row is None and pub.page_table(setup["sender"], setup["policy"]) is None:
            row = pub.loss_row("Reno", "droptail")  # the baseline, as beside the page times (_reference)
        if row is not None:
            paper = {"caption": row.caption, "loss": row.loss_pct / 100,
                     "high_loss": None if row.high is None else row.high[2] / 100,
                     "low_loss": None if row.low is None else row.low[2] / 100}
    return {"ours": {k: ours[k] for k in ("loss", "high_loss", "low_loss")}, "paper": paper}


def _claims(run_name: str, setups: list[dict[str, Any]]) -> list[pub.Claim]:
    keys = []
    for s in setups:
        if s["wan"] is not None:
            keys.append("wan")
        elif s["policy"] in ("droptail", "catnip_good"):
            keys.append(s["policy"])
        elif s["policy"] in ("red", "catnip_red"):
            keys.append("red")
    keys += [k for k in ("fairness", "http11") if k in run_name]
    return [c for k in dict.fromkeys(keys) for c in pub.CLAIMS.get(k, ())]


def beside_paper(store: Store, run_id: str, page: dict[str, Any]) -> dict[str, Any] | None:
    """For a run with page times (Table II layout), per point: our Table II rows with the paper's
    table beside them and the bottleneck loss beside Tables IV/VII/X (or XI's); None for a run
    without page times."""
    rep = page.get("report") or report_mod.run_report(store, run_id)
    finished = [p for p in rep["points"] if p["table"]]
    if not finished:
        return None
    run = store.run(run_id)
    stored = {p["point"]: p for p in store.points(run_id)}
    losses = {r["point"]: r for r in report_mod.loss_table(rep)}
    points, setups = [], []
    for p in finished:
        try:
            setup = point_setup(record_of(run, stored[p["point"]]))
        except RecordError:  # an old point whose scenario no longer plans: no paper table to pick for it
            continue
        setups.append(setup)
        table, why = _reference(setup)
        rows = [{"page": r["page"], "conns": r["conns"], "bytes": r["bytes"],
                 "ours": {k: r[k] for k in pub.STATS}, "paper": table.row(r["page"]) if table else None}
                for r in p["table"]]
        points.append({"point": p["point"], "label": report_mod.point_name(rep, p), "caption": table and table.caption,
                       "why": why, "rows": rows, "loss": _loss(setup, losses.get(p["point"]))})
    return {"citation": pub.CITATION, "points": points, "claims": _claims(rep["name"], setups)}


def _column_buffer(store: Store, spec: str, point: int) -> int | None:
    """Table XI's buffer of a compared column (its run's point; the first run of a pooled '+' side)."""
    rid = spec.split("+")[0]
    run = store.find_run(rid)
    if run is None:
        return None
    row = next((p for p in store.points(run["id"]) if p["point"] == point), None)
    if row is None:
        return None
    try:
        return point_setup(record_of(run, row))["buffer_kb"]
    except RecordError:
        return None


def table_xi(store: Store, run_id: str, page: dict[str, Any]) -> dict[str, Any] | None:
    """On the compare page (`page["compare"]`: results/compare.py's table): per compared column
    whose router buffer is one of Table XI's, the paper's column of that buffer; None when no
    column has one."""
    cmp = page.get("compare")
    if not cmp or not cmp.get("columns"):
        return None
    columns = []
    for c in cmp["columns"]:
        kb = _column_buffer(store, c["run_id"], c["point"])
        columns.append(None if kb is None else pub.table_xi_column(kb))
    if not any(columns):
        return None
    return {"citation": pub.CITATION, "columns": columns,
            "buffers": sorted({c["buffer_kb"] for c in columns if c})}


def study_targets(store: Store, run_id: str, page: dict[str, Any]) -> dict[str, Any] | None:
    """On the study page (`page["study"]`: study.py's report): per context, the paper's
    numbers for the study's columns, {context: {"side/metric": (value, where)}}."""
    rep = page.get("study")
    if rep is None:
        return None
    targets = {ctx: {f"{side}/{metric}": v for (side, metric), v in pub.study_targets(ctx).items()}
               for ctx in rep.contexts}
    if not any(targets.values()):
        return None
    return {"citation": pub.CITATION, "targets": targets}
