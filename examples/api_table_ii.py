# %% [markdown]
# # CATNIP's Table II layout from a script, with `import catnip`
#
# A notebook in the percent format (Jupyter, VS Code and jupytext open it as cells; `python
# examples/api_table_ii.py` runs it whole, as tests/test_api.py does). It builds the default
# scenario's network with fewer clients, runs it, and shows the page times per page in the layout of
# Table II of CATNIP (Table II: mean, sdev and 95% interval of each page's download time), then
# the same from the tidy table of pages with pandas. Run as root (Mininet, namespaces).
# Arguments: [CLIENTS] [DATABASE]; defaults 4 and data/catnip.db.

# %%
import sys

import catnip

clients = int(sys.argv[1]) if len(sys.argv) > 1 else 4
db = sys.argv[2] if len(sys.argv) > 2 else None
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
