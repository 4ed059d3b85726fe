"""`catnip model cardwell --help` says what the command computes: Cardwell et al. 2000's own
latency model (eq. 22's rate after the first loss), not Padhye et al.'s steady-state rate, which
models/cardwell.py no longer uses for it (issue 44)."""

from click.testing import CliRunner

from catnip.cli.main import main


def test_cardwell_help_names_the_paper_and_its_equations_not_padhye():
    res = CliRunner().invoke(main, ["model", "cardwell", "--help"])
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "Padhye" not in text
    for part in ('"Modeling TCP Latency", INFOCOM 2000', "first data segment", "eq. 22", "eq. 17",
                 "delayed-ACK cost"):
        assert part in text, f"{part!r} not in: {text}"
