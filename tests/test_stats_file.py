"""Reading an engine's stats file: the newest whole record, however long its lines are."""

import json

from catnip.testbed.engine import last_json_line


def _line(n_links: int, t: float, final: bool) -> str:
    links = {f"r>c{i}": {"sent": {"high": [i, 512 * i]}, "late_events": 0} for i in range(n_links)}
    return json.dumps({"t": t, "final": final, "links": links})


def test_last_line_longer_than_the_read_window(tmp_path):
    # 201 links wrote 69 KB lines in a 100-client run; the old 64 KB window found no record.
    path = tmp_path / "stats.jsonl"
    lines = [_line(2000, t, t == 2.0) for t in (0.5, 1.0, 2.0)]
    assert all(len(line) > 65536 for line in lines)  # several windows of 4 KB each
    path.write_text("\n".join(lines) + "\n")
    rec = last_json_line(path, chunk=4096)
    assert rec["final"] is True and rec["t"] == 2.0 and len(rec["links"]) == 2000


def test_a_line_being_written_is_skipped(tmp_path):
    path = tmp_path / "stats.jsonl"
    path.write_text(_line(3, 1.0, False) + "\n" + _line(3, 1.5, False)[:40])
    assert last_json_line(path)["t"] == 1.0


def test_empty_and_missing_files_have_no_record(tmp_path):
    (tmp_path / "empty.jsonl").write_text("")
    assert last_json_line(tmp_path / "empty.jsonl") is None
    assert last_json_line(tmp_path / "missing.jsonl") is None
