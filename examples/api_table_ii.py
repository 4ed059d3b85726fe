# %% [markdown]
# # CATNIP's Table II layout from a script, with `import catnip`
#
# A notebook in the percent format (Jupyter, VS Code and jupytext open it as cells; `python
# examples/api_table_ii.py` runs it whole, as tests/test_api.py does). It builds the default
# scenario's network with fewer clients, runs it, and shows the page times per page in the layout of
# Table II of CATNIP (Table II: mean, sdev and 95% interval of each page's download time), then
# the same from the tidy table of pages with pandas, and last draws the paper's Fig. 5 from them,
# the paper's bars beside ours. Run as root (Mininet, namespaces).
# Arguments: [CLIENTS] [DATABASE] [FIGURE]; defaults 4, data/catnip.db and fig5.svg (.svg, .pdf or .png).

# %%
import sys

import catnip

clients = int(sys.argv[1]) if len(sys.argv) > 1 else 4
db = sys.argv[2] if len(sys.argv) > 2 else None
figure_file = sys.argv[3] if len(sys.argv) > 3 else "fig5.svg"
sweep = catnip.load("quick", set=[f"topology.clients={clients}", "workload.think_time.mean=1s"], seed=1)
print(f"{sweep.name}: {len(sweep.points)} point(s)")

# %%
run = catnip.run(sweep, db=db)
print("run", run.id, run.status)
print(run.points()[["point", "point_label", "status", "realtime_ok"]].to_string(index=False))

# %% [markdown]
# The report layout, as `catnip report RUN --layout catnip-table-ii` prints it (units in `.attrs`):

# %%
table = run.layout("catnip-table-ii")
print(table.attrs["paper"])
print(table.to_string(index=False))

# %% [markdown]
# The same numbers from the samples themselves: one row per page fetched.

# %%
pages = run.table("page_time")
fetched = pages[pages["error"].isna()]
print(fetched.groupby("page")["duration"].agg(["count", "mean", "std"]).to_string())

# %% [markdown]
# CATNIP's Fig. 5 draws these numbers as bars: each page's mean download time and its standard
# deviation under DropTail (C. Williamson, Q. Wu, "A Case for Context-Aware TCP/IP", ACM
# SIGMETRICS Performance Evaluation Review 29(4), 2002, section V-A, Fig. 5). The text does not
# give the bars' values, but its Reno bars are Table II's Mean and StdDev, which
# `catnip.papers.catnip.published` holds as printed: they are drawn beside ours. A bar's lower
# whisker stops at 0 s, as on the dashboard. The file is written as `catnip fig2` writes its own
# (kaleido with Debian's chromium).

# %%
from catnip.papers.catnip import published
from catnip.results import figures

ours = fetched.groupby("page")["duration"].agg(["mean", "std"]).fillna(0.0)
paper = [published.TABLE_II.row(page) for page in published.PAGES]


def bars(name, page_numbers, means, sdevs):
    return {"type": "bar", "name": name, "x": list(page_numbers), "y": list(means),
            "error_y": {"type": "data", "array": list(sdevs), "arrayminus": [min(m, s) for m, s in zip(means, sdevs)]}}


fig = {"data": [bars(f"ours: {sweep.name}, DropTail, {clients} clients", ours.index, ours["mean"], ours["std"]),
                bars(f"the paper: {published.TABLE_II.caption}", published.PAGES,
                     [r["mean"] for r in paper], [r["sdev"] for r in paper])],
       "layout": {"title": {"text": "CATNIP Fig. 5: mean page download time (+-1 sdev), DropTail"},
                  "barmode": "group", "xaxis": {"title": {"text": "Web page"}, "dtick": 1},
                  "yaxis": {"title": {"text": "seconds"}}, "legend": {"orientation": "h", "y": -0.2}}}
print("figure", figures.save(fig, figure_file))
