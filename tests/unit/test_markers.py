"""The markers `make check` leaves out come from what a test uses (tests/support/markers.py)."""

from __future__ import annotations

from support.markers import TESTS, needs


def test_a_fixture_marks_what_it_starts() -> None:
    unit = TESTS / "unit" / "test_x.py"
    assert needs(["tmp_path", "spark"], unit) == {"spark"}
    assert needs(["postgres", "connect"], TESTS / "integration" / "test_x.py") == {"postgres"}
    assert needs(["tmp_path", "broker"], unit) == set()


def test_modules_and_folders_that_start_it_themselves() -> None:
    assert needs([], TESTS / "integration" / "test_spark_lake_faults.py") == {"spark"}
    assert needs(["postgres"], TESTS / "integration" / "test_postgres_errors.py") == {"postgres"}
    assert needs(["up"], TESTS / "browser" / "test_console.py") == {"browser"}
