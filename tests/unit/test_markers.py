"""The markers `make check` leaves out come from what a test uses and where it is (tests/support/markers.py)."""

from __future__ import annotations

from support.markers import INTEGRATION, QUICK_INTEGRATION, TESTS, needs


def test_a_fixture_marks_what_it_starts() -> None:
    unit = TESTS / "unit" / "test_x.py"
    assert needs(["tmp_path", "spark"], unit) == {"spark"}
    assert needs(["postgres"], INTEGRATION / "test_admin.py") == {"postgres"}
    assert needs(["tmp_path", "broker"], unit) == set()


def test_modules_and_folders_that_start_it_themselves() -> None:
    assert needs([], INTEGRATION / "test_spark_lake_faults.py") == {"spark", "slow"}
    assert needs(["postgres"], INTEGRATION / "test_postgres_errors.py") == {"postgres", "slow"}
    assert needs(["up"], TESTS / "browser" / "test_console.py") == {"browser"}


def test_integration_modules_are_slow_unless_listed_quick() -> None:
    assert needs(["broker"], INTEGRATION / "test_distributed.py") == {"slow"}
    assert needs(["broker"], INTEGRATION / "test_a_new_module.py") == {"slow"}
    assert needs(["broker"], INTEGRATION / "test_bad_input.py") == set()
    assert all((INTEGRATION / name).exists() for name in QUICK_INTEGRATION)  # no stale name in the list
