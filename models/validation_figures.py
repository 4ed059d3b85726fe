"""The models against a transfer measurement as numbers and figure specs, for `catnip model
validate` (cli/models.py: its tables, and `--out` writes these figures) and the dashboard's page
of the same run (webui/figure_pages.py): one path, so both show the same curves.

Figs. 3 and 4 of the hysteresis paper (Y. Li and C. Williamson, "A Hysteresis Model for Web/TCP
Transfer Latency", IEEE MASCOTS 2004, section 4: Reno measured against the Sikdar, Cardwell-00 and
hysteresis models, short and long transfers) and Fig. 6 (section 5: Partial CATNIP measured and
modelled beside Reno), per TCP profile and loss point.
"""

from __future__ import annotations

import math
from typing import Any

from catnip.models import validation as v
from catnip.results.figures import Series, latency_chart
from catnip.spec import units


def predictions(cells: list[v.Cell], path: dict[str, Any], delack: float | str, samples: int
                ) -> dict[tuple, float]:
    """(model, profile, p, p_high, size) -> the model's mean latency for every measured cell:
    the three models for Bernoulli cells, Partial CATNIP for cells with p'. `path` is the
    scenario's `path` as the run stored it (mss, rtt, wmax, min_rto)."""
    params = dict(mss=path["mss"], rtt=path["rtt"], wmax=path["wmax"], t0=path["min_rto"],
                  delack=units.parse_duration(delack) if isinstance(delack, str) else delack)
    preds: dict[tuple, float] = {}
    for c in cells:
        p = v.path_for(c, **params)
        for name in (("Partial CATNIP",) if c.p_high is not None else v.MODELS):
            preds[(name, c.profile, c.p, c.p_high, c.size)] = v.predict(name, p, samples)
    return preds


def figure_specs(cells: list[v.Cell], preds: dict[tuple, float]) -> list[tuple[str, dict[str, Any]]]:
    """(name, figure spec) of Figs. 3, 4 and 6 per profile and loss point, e.g. `fig3-linux-p0.01`,
    `fig6-reno2004-p0.1` (the file names `catnip model validate --out` writes); a figure needs
    two sizes or more in its range."""
    items = []
    groups: dict[tuple, list[v.Cell]] = {}
    for c in cells:
        groups.setdefault((c.profile, c.p, c.p_high), []).append(c)
    for (profile, p, p_high), group in groups.items():
        for fig, lo, hi in (("fig3", 0, v.SHORT_MAX_KB), ("fig4", v.LONG_MIN_KB, math.inf)):
            sel = [c for c in group if lo <= c.kb <= hi]
            if len(sel) < 2:
                continue
            if p_high is None:
                series = [Series("Reno measured", [(c.kb, c.mean) for c in sel], [c.ci95 for c in sel], measured=True)]
                series += [Series(m, [(c.kb, preds[(m, profile, p, None, c.size)]) for c in sel], dashed=m != "Hysteresis")
                           for m in v.MODELS]
                name, title = f"{fig}-{profile}-p{p:g}", f"Reno, p = {p:g} ({profile}); bars: 95% CI"
            else:
                reno = {c.size: c for c in groups.get((profile, p, None), [])}
                series = [Series("CATNIP measured", [(c.kb, c.mean) for c in sel], [c.ci95 for c in sel], measured=True),
                          Series("Partial CATNIP", [(c.kb, preds[("Partial CATNIP", profile, p, p_high, c.size)])
                                                    for c in sel])]
                if reno:
                    have = [c for c in sel if c.size in reno]
                    series.append(Series("Reno measured", [(c.kb, reno[c.size].mean) for c in have],
                                         [reno[c.size].ci95 for c in have], measured=True))
                fig = "fig6" if fig == "fig3" else "fig6-long"
                name = f"{fig}-{profile}-p{p:g}"
                title = f"Partial CATNIP, p = {p:g}, p' = {p_high:g} ({profile}); bars: 95% CI"
            items.append((name, latency_chart(title, series)))
    return items
