"""The `source_scheduler` policy spec (Nouredine and Tobagi, section 6.2, Fig. 11): its parameters as a
scenario writes them, the engine block it produces (engine/src/policy/source_sched.rs reads it) and its
one-line errors. Pure pydantic: no network, no engine."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from catnip.spec import policy, units
from catnip.spec.policy import SourceScheduler, parse_policy

# Section 5's profiles (HIGH 250 Kbps / 6000 B, MED 110 Kbps / 6000 B) and classes Telnet, HTTP, FTP.
PAPER = {"kind": "source_scheduler", "high": {"rate": "250kbit", "bucket": "6000B"},
         "med": {"rate": "110kbit", "bucket": "6000B"}, "classes": [[2323], [80], [2121]],
         "downgrade_after": "200ms"}


def as_written(raw: dict) -> SourceScheduler:
    """Validated as a scenario file's value is (units required)."""
    return SourceScheduler.model_validate(raw, context={units.INPUT: True})


def error(raw: dict) -> str:
    """The one error, as `loc: message`."""
    with pytest.raises(ValidationError) as exc:
        as_written(raw)
    errors = exc.value.errors()
    assert len(errors) == 1, errors
    loc = ".".join(str(p) for p in errors[0]["loc"])
    return f"{loc}: {errors[0]['msg'].removeprefix('Value error, ')}"


def test_the_papers_settings_make_the_engine_block():
    p = as_written(PAPER)
    assert p.engine_config({"packets": 64}) == {
        "kind": "source_scheduler",
        "high": {"rate_bps": 250_000, "bucket_bytes": 6000},
        "med": {"rate_bps": 110_000, "bucket_bytes": 6000},
        "classes": [[[2323, 2323]], [[80, 80]], [[2121, 2121]]],
        "downgrade_after_us": 200_000,
    }
    assert p.engine_config(None) == p.engine_config({"bytes": 96000})  # the engine applies the link's buffer


def test_ports_ranges_and_pairs_and_the_default_downgrade():
    raw = {**PAPER, "classes": [[2323, "5000-5099"], [[8080, 8090], 80]]}
    del raw["downgrade_after"]
    p = as_written(raw)
    assert p.engine_config(None)["classes"] == [[[2323, 2323], [5000, 5099]], [[8080, 8090], [80, 80]]]
    assert p.engine_config(None)["downgrade_after_us"] == 200_000  # footnote 7
    assert as_written({**PAPER, "downgrade_after": "0.5s"}).engine_config(None)["downgrade_after_us"] == 500_000


def test_it_is_a_registered_kind_parsed_by_its_own_class():
    assert "source_scheduler" in policy.KINDS and policy.REGISTRY["source_scheduler"] is SourceScheduler
    assert isinstance(parse_policy(PAPER), SourceScheduler)
    with pytest.raises(ValueError, match=r"^weights: not a parameter of policy 'source_scheduler' \(it takes high,"
                                         r" med, classes, downgrade_after\)$"):
        parse_policy({**PAPER, "weights": [1, 2]})
    # Values the code builds may be bare numbers (bit/s, bytes, seconds), as for the other policies.
    built = parse_policy({**PAPER, "high": {"rate": 250_000, "bucket": 6000}, "downgrade_after": 0.2})
    assert built.engine_config(None) == as_written(PAPER).engine_config(None)


@pytest.mark.parametrize("change, want", [
    ({"high": {"rate": "0kbit", "bucket": "6000B"}}, "high.rate: '0kbit': a rate must be above zero"),
    ({"high": {"rate": 250000, "bucket": "6000B"}}, "high.rate: 250000 is a bare number; write the rate with its"
                                                      " unit, e.g. '250000bit' or '250000kbit' (bit, kbit, Mbit,"
                                                      " Gbit; B/s, KB/s, MB/s for bytes per second)"),
    ({"med": {"rate": "110kbit", "bucket": "63B"}}, "med.bucket: '63B': a bucket must hold one packet of 64 bytes"
                                                     " at least"),
    ({"med": {"rate": "110kbit", "bucket": 6000}}, "med.bucket: 6000 is ambiguous; write a size with its unit,"
                                                    " e.g. '6000B' or '64KB'"),
    ({"med": {"rate": "110kbit"}}, "med.bucket: Field required"),
    ({"high": {"rate": "250kbit", "bucket": "6000B", "burst": 1}}, "high.burst: Extra inputs are not permitted"),
    ({"classes": []}, "classes: need at least one class, e.g. [[2323], [80], [2121]] (Telnet, HTTP, FTP)"),
    ({"classes": [[2323], []]}, "classes.1: a class needs at least one port range: a port (80), 'lo-hi' or"
                                " [lo, hi]"),
    ({"classes": [[2323], 80]}, "classes.1: 80 is not a class; a class is a list of ports, e.g. [80] or"
                                " ['5000-5099', 8080]"),
    ({"classes": [[2323], [[90, 80]]]}, "classes.1.0: [90, 80]: ports run 0-65535, low end first"),
    ({"classes": [["90-80"]]}, "classes.0.0: '90-80': ports run 0-65535, low end first"),
    ({"classes": [[70000]]}, "classes.0.0: 70000: ports run 0-65535, low end first"),
    ({"classes": [["http"]]}, "classes.0.0: 'http' is not a port range; use 80, '5000-5099' or [5000, 5099]"),
    ({"classes": [[None]]}, "classes.0.0: None is not a port range; use 80, '5000-5099' or [5000, 5099]"),
    ({"downgrade_after": "0ms"}, "downgrade_after: '0ms': must be at least 1us and at most 60min"),
    ({"downgrade_after": "61min"}, "downgrade_after: '61min': must be at least 1us and at most 60min"),
    ({"downgrade_after": 200}, "downgrade_after: 200 is a bare number; write the delay with its unit, e.g. '200s'"
                               " or '200ms'"),
    ({"downgrade_after": "-5ms"}, "downgrade_after: '-5ms' is not a duration; use a number with a unit: us, ms, s"
                                  " or min, e.g. '5ms'"),
])
def test_errors_name_the_field_and_what_is_allowed(change, want):
    assert error({**PAPER, **change}) == want
