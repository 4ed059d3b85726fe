# The README's two commands are `make run` and `make test`; both do set-up first if needed.
SHELL := /bin/bash
VENV := .venv/bin
SCENARIO ?= scenarios/quick.yaml

.PHONY: setup run test test-fast test-kills test-fresh docs clean help table-xi sim-tables newcwv tcpf servdiff study

help:
	@echo "Times: wall clock measured on the development machine (README, Make targets, gives each one's source)."
	@echo "make setup       install everything (Debian packages, venv, engine build); idempotent"
	@echo "make run         set-up if needed, run $(SCENARIO), print its table, then serve the dashboard (DASHBOARD=no skips it);"
	@echo "                 the default scenarios/quick.yaml: about 2 minutes"
	@echo "make test        set-up if needed, run every test but the kill tier (needs root): about 28 minutes"
	@echo "make test-fast   the tests that need neither root nor seconds each (no set-up; no docs check: make docs): about 4 minutes"
	@echo "make test-kills  50 runs killed at random moments (runner, engine, Apache, client; SIGINT/TERM/HUP/KILL): about 6-7 min"
	@echo "make test-fresh  set-up and the main job inside a bare Debian 12 root (debootstrap, cached; root): about 8 min warm, 23 min cold"
	@echo "make table-xi    CATNIP Table XI: baseline, partial and full SPM over four buffers, 12 points: about 40 minutes"
	@echo "                 ARGS='--seed 2' passes options to every run; PROFILE=linux-2.4 runs it with that period TCP"
	@echo "make sim-tables  CATNIP Tables II-X, fairness and HTTP/1.1, 17 points (JOBS=2 side by side by default): about 1.4 hours;"
	@echo "                 PROFILE=ns2-reno: the router set (Tables VIII-X) with that period TCP;"
	@echo "                 PERIOD=1: the router set under the gap study's whole period set, 5 points: 36-42 minutes"
	@echo "make study       CATNIP's gap study, factor by factor (STUDY=sim|wan|both, SEEDS, PARTS=ends|single|reverse|all):"
	@echo "                 84 points a seed: about 3.8 hours (sim) plus 2.9 hours (wan), from measured point times"
	@echo "make newcwv      newCWV (Hossain and Fairhurst) Figs 5, 7-11 and Tables 2-3: 7 scenarios, 16 points (JOBS=2): about 63 minutes"
	@echo "make tcpf        TCP-friendly marking (Lo Monaco et al.) Tables 4-7: the 52-point grid for SEEDS (default 1 2 3) and,"
	@echo "                 with today's TCP, MODERN (default 1; JOBS=2): about 3.1 hours, from measured grids;"
	@echo "                 QUICK=1: only Table 4 at 50 flows, 7 points: about 8 minutes"
	@echo "make servdiff    service differentiation (Nouredine and Tobagi) Figs 2-3, 7-9, 12-17: 4 scenarios, 35 points a seed"
	@echo "                 (SEEDS, default 1; JOBS=1; ONLY=fig2|schemes|range|longftp): about 104 minutes"
	@echo "make docs        rewrite the docs' generated tables from archive/ (catnip docs build), then check them"
	@echo "make clean       remove every namespace, process, bridge and BPF object the testbed created"

setup:
	@scripts/setup.sh

run: setup
	@scripts/main-job.sh $(SCENARIO)

test:
	@scripts/setup.sh --test
	@scripts/test.sh

# No network, no root, no browser: the pure tier (tests/conftest.py says what is left out and why).
test-fast:
	@$(VENV)/python -m pytest -q -m "not netns and not slow" -p no:cacheprovider

test-kills: setup
	@scripts/test.sh -m kills tests/test_kills.py

# The generated regions of README.md and docs/ written from the archived runs, then checked (docs/archive.md).
docs:
	@$(VENV)/catnip docs build && $(VENV)/catnip docs check

# No set-up here: the point is that scripts/setup.sh, run inside the bare root, does it all.
test-fresh:
	@scripts/test-fresh.sh

table-xi: setup
	@PROFILE=$(PROFILE) scripts/table-xi.sh $(ARGS)

sim-tables: setup
	@PROFILE=$(PROFILE) PERIOD=$(PERIOD) JOBS=$(or $(JOBS),2) scripts/sim-tables.sh $(ARGS)

newcwv: setup
	@JOBS=$(or $(JOBS),2) scripts/newcwv.sh $(ARGS)

tcpf: setup
	@JOBS=$(or $(JOBS),2) scripts/tcpf.sh $(ARGS)

servdiff: setup
	@JOBS=$(or $(JOBS),1) scripts/servdiff.sh $(ARGS)

study: setup
	@JOBS=$(or $(JOBS),2) scripts/study.sh $(ARGS)

clean:
	@$(VENV)/catnip clean
