"""A sum over machines (the initial-RTO count, the TCP-state counters: controller/point_senders.py
marking_counters) that lacks a machine whose helper did not answer says so in the record and
in the report, instead of looking complete."""

import json
from types import SimpleNamespace

from catnip.controller.point_machines import OtherMachines
from catnip.results import report
from catnip.testbed.machine_helper import HelperError


class Helper:
    def __init__(self, answer):
        self.answer = answer

    def ask(self, request):
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def test_a_machine_that_did_not_answer_is_named_beside_the_sum():
    me = SimpleNamespace(helpers={"m2": Helper(3), "m3": Helper(HelperError("no answer"))})
    marking = {"initial_rto_answers": 5}
    got = OtherMachines.ask(me, ["m2", "m3"], {"initial_rto_answers": True}, "initial_rto_answers", marking)
    assert got == [3]
    assert marking["initial_rto_answers_by_machine"]["m3"] == {"error": "no answer"}
    assert marking["unanswered"] == {"initial_rto_answers": ["m3"]}
    summary = report.marking_summary(json.dumps(marking))
    assert "INCOMPLETE" in report._unanswered(summary, "initial_rto_answers")
    assert "m3" in report._unanswered(summary, "initial_rto_answers")
    assert report._unanswered(summary, "tcp_state") == ""


def test_every_machine_answered_no_note():
    me = SimpleNamespace(helpers={"m2": Helper(3)})
    marking = {"initial_rto_answers": 5}
    OtherMachines.ask(me, ["m2"], {"initial_rto_answers": True}, "initial_rto_answers", marking)
    assert "unanswered" not in marking
    assert report._unanswered(report.marking_summary(json.dumps(marking)), "initial_rto_answers") == ""
