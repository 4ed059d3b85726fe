"""Which mechanisms are checked against an independent reference, and how (issue 44): the list
`catnip check` shows.

A reference is written from the paper or RFC that defines the mechanism, not from the engine's
code, and compared with the engine on generated and adversarial traces; it counts only once its
test was seen failing against a deliberately broken engine (`broken_by` says which break). A
mechanism without one is listed too, so the gap shows.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass

from catnip.testbed import paths


@dataclass(frozen=True)
class Reference:
    mechanism: str
    source: str                # what defines it
    tests: tuple[str, ...]     # pytest node ids (or cargo tests: "engine:<path>::<name>")
    broken_by: str = ""        # the breaks of the engine the tests were seen failing on


REFERENCES = (
    Reference("tcpf", "TCP-friendly marking, section 4, Algorithms 1-2 (tests/reference/tcpf_ref.py)",
              ("tests/test_tcpf_reference.py::test_issue_44_trace_engine_matches_the_reference_and_protects_what_the_paper_protects",
               "tests/test_tcpf_reference.py::test_random_tcp_traces_engine_matches_the_reference",
               "tests/test_tcpf_reference.py::test_chaos_traces_engine_matches_the_reference",
               "tests/test_tcpf_reference.py::test_reference_properties"),
              "flows forgotten after 800 ms; tokens a hard cap (in_count >= length); new flows without priority;"
              " tiny flows capped at E(i); no debt carried"),
    Reference("tcpf_o", "TCP-friendly marking, section 6.1: TCPF without retransmission protection",
              ("tests/test_tcpf_reference.py::test_tcpf_o_marks_retransmissions_by_the_tokens",
               "tests/test_tcpf_reference.py::test_random_tcp_traces_engine_matches_the_reference"),
              "step (b) removed from TCPF; new flows without priority"),
    Reference("token_marker", "TCP-friendly marking, section 6.1 (TB); RFC 2697's conformance test"
              " (tests/reference/tb_ref.py)",
              ("tests/test_tcpf_reference.py::test_token_marker_engine_matches_the_reference",
               "tests/test_tcpf_reference.py::test_token_marker_reference_properties"),
              "unused tokens carried over; intervals counted from the last refill, not the first packet"),
    Reference("police", "RFC 2697 section 3, color-blind, EBS 0: one bucket per link, source or flow"
              " (tests/reference/bucket_ref.py)",
              ("tests/test_policy_references.py::test_police_engine_matches_rfc_2697_packet_for_packet",
               "tests/test_policy_references.py::test_police_and_shape_hypothesis"),
              "bucket not capped at its depth; a packet that exactly fits out of profile (> for >=)"),
    Reference("shape", "token-bucket shaper: docs/engine.md, Nouredine-Tobagi section 4.3 (Fig. 6)"
              " (tests/reference/bucket_ref.py)",
              ("tests/test_policy_references.py::test_shape_engine_matches_the_reference_packet_for_packet",
               "tests/test_policy_references.py::test_police_and_shape_hypothesis"),
              "bucket not capped at its depth; a packet larger than the bucket leaving no debt"),
    Reference("rio (byte mode)", "Clark-Fang RIO as the TCP-friendly marking paper cites it ([4], section 5),"
              " Floyd-Jacobson RED Fig. 2 (tests/reference/red_ref.py)",
              ("tests/test_policy_references.py::test_rio_and_red3_per_level_rules_on_generated_and_adversarial_traces",
               "tests/test_policy_references.py::test_rio_and_red3_per_level_rules_hypothesis",
               "tests/test_policy_references.py::test_rio_and_red3_random_drops_follow_the_reference_probabilities"),
              "OUT average counting OUT bytes only; no count spacing (p_a = p_b); no idle decay"),
    Reference("fred/frio (byte mode)", "Lin-Morris FRED as the TCP-friendly marking paper cites it ([15]);"
              " FRIO: its section 5 (tests/reference/fred_ref.py)",
              ("tests/test_policy_references.py::test_fred_and_frio_per_flow_rules_on_generated_and_adversarial_traces",
               "tests/test_policy_references.py::test_fred_and_frio_per_flow_rules_hypothesis",
               "tests/test_policy_references.py::test_fred_and_frio_random_drops_follow_the_reference_probabilities"),
              "the strikes rule removed; the 2 x avgcq rule removed; FRIO's avgcq from the average, not the"
              " instantaneous queue"),
    Reference("red3", "Nouredine-Tobagi section 4.2, three-level RED (tests/reference/red_ref.py)",
              ("tests/test_policy_references.py::test_rio_and_red3_per_level_rules_on_generated_and_adversarial_traces",
               "tests/test_policy_references.py::test_rio_and_red3_per_level_rules_hypothesis",
               "tests/test_policy_references.py::test_rio_and_red3_random_drops_follow_the_reference_probabilities"),
              "each average counting its own level only; no count spacing; no idle decay"),
    Reference("wrr", "Nouredine-Tobagi section 5 (Fig. 8): WRR, a queue's weight its share of the link"
              " (tests/reference/wrr_ref.py)",
              ("tests/test_policy_references.py::test_wrr_engine_matches_the_reference_packet_for_packet",
               "tests/test_policy_references.py::test_wrr_engine_matches_the_reference_hypothesis",
               "tests/test_policy_references.py::test_wrr_shares_follow_the_weights_and_the_link_never_idles"),
              "one packet per turn whatever the weight; one packet more per turn; buffer shares of total + 1"),
    Reference("source_scheduler", "Nouredine-Tobagi section 6.2 (Fig. 11, footnote 7): per-connection queues,"
              " classes in order, HIGH/MED token buckets, the blocking rule, downgrades by time queued"
              " (tests/reference/source_sched_ref.py)",
              ("tests/test_source_scheduler_reference.py::test_source_scheduler_engine_matches_the_reference_packet_for_packet",
               "tests/test_source_scheduler_reference.py::test_source_scheduler_engine_matches_the_reference_hypothesis",
               "tests/test_source_scheduler_reference.py::test_what_the_paper_fixes_holds_on_the_engine_output"),
              "the downgrade clock from when a packet became the head (the engine's former reading); a turn's head"
              " without tokens holding its class (former); MED checked before HIGH; one byte more taken per packet;"
              " the blocking rule removed"),
)


def _present(node: str) -> bool:
    """The test file exists and defines the test function."""
    path, _, name = node.partition("::")
    try:
        text = (paths.REPO / path).read_text()
    except OSError:
        return False
    return f"def {name}(" in text


def reference_status(run: bool = False, timeout: float = 600) -> list[tuple[str, str, str]]:
    """(mechanism, reference tests, status) for each mechanism. status: "none" (no reference
    yet), "missing" (a listed test is not in the tree), "present" (not run), or with `run`
    "passes"/"fails" from running its tests (slow: minutes; the engine must be built)."""
    rows = []
    for ref in REFERENCES:
        tests = ", ".join(t.split("::")[-1] for t in ref.tests) or "-"
        if not ref.tests:
            status = "none"
        elif not all(_present(t) for t in ref.tests):
            status = "missing"
        elif not run:
            status = "present"
        else:
            res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *ref.tests],
                                 cwd=paths.REPO, capture_output=True, text=True, timeout=timeout,
                                 env={**os.environ, "PYTHONPATH": str(paths.REPO)})
            status = "passes" if res.returncode == 0 else "fails"
        if ref.broken_by and status in ("present", "passes"):
            status += f" (seen failing with: {ref.broken_by})"
        rows.append((ref.mechanism, tests, status))
    return rows
