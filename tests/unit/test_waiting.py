"""wait_until (headwater.testing) and the tests' wait_for over it: a check that raises while the system
is still converging waits; a check that raises anything else fails at once."""

from __future__ import annotations

import urllib.error
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from support.connectproc import wait_for

from headwater.testing import WaitTimeout, wait_until


class Answers:
    """A check that raises or returns ``steps`` in turn (an exception instance is raised), then repeats
    the last; ``calls`` counts the calls."""

    def __init__(self, *steps: Any) -> None:
        self.steps, self.calls = steps, 0

    def __call__(self) -> Any:
        step = self.steps[min(self.calls, len(self.steps) - 1)]
        self.calls += 1
        if isinstance(step, BaseException):
            raise step
        return step


def offsets_before_the_first_commit() -> Callable[[], int]:
    """The check of the Spark sink test: ``GET /connectors/{name}/offsets`` answers ``{"offsets": []}``
    until the group has committed."""
    answers_: Iterator[dict[str, Any]] = iter([{"offsets": []}, {"offsets": []},
                                               {"offsets": [{"offset": {"kafka_offset": 7}}]}])
    last: dict[str, Any] = {}

    def check() -> int:
        nonlocal last
        last = next(answers_, last)
        return last["offsets"][0]["offset"]["kafka_offset"]

    return check


@pytest.mark.parametrize("wait", [lambda c: wait_until(c, "seven", 5, 0.01), lambda c: wait_for(c, 5, 0.01, "seven")],
                         ids=["wait_until", "wait_for"])
def test_an_index_error_before_the_first_commit_is_not_yet(wait: Callable[[Callable[[], Any]], Any]) -> None:
    assert wait(offsets_before_the_first_commit()) == 7


@pytest.mark.parametrize("not_yet", [IndexError("list index out of range"), KeyError("tasks"),
                                     urllib.error.URLError(ConnectionRefusedError(111, "Connection refused")),
                                     TimeoutError("timed out"), AssertionError("GET /x -> 404")])
def test_what_a_converging_system_raises_is_retried(not_yet: BaseException) -> None:
    check = Answers(not_yet, not_yet, "there")
    assert wait_until(check, "it", 5, 0.01) == "there"
    assert check.calls == 3


def test_the_timeout_names_the_last_exception_and_chains_it() -> None:
    check = Answers(None, KeyError("tasks"))
    with pytest.raises(WaitTimeout) as failure:
        wait_until(check, "the tasks", 0.2, 0.01, log=lambda: "x" * 5000 + "the log's end")
    assert "timed out after 0.2s waiting for the tasks; last seen: KeyError('tasks')" in str(failure.value)
    assert str(failure.value).endswith("the log's end") and len(str(failure.value)) < 4200  # the log's tail only
    assert isinstance(failure.value.__cause__, KeyError)
    assert check.calls > 2


def test_a_falsy_result_at_the_timeout_is_shown_without_a_cause() -> None:
    with pytest.raises(WaitTimeout, match=r"waiting for a count; last seen: 0$") as failure:
        wait_for(Answers(KeyError("x"), 0), 0.2, 0.01, "a count")
    assert failure.value.__cause__ is None


def test_a_bug_in_the_check_fails_at_once() -> None:
    check = Answers(TypeError("'NoneType' object is not subscriptable"), "there")
    with pytest.raises(TypeError, match="not subscriptable"):
        wait_until(check, "it", 5, 0.01)
    assert check.calls == 1


def test_the_kinds_that_mean_not_yet_can_be_narrowed() -> None:
    check = Answers(KeyError("tasks"), "there")
    with pytest.raises(KeyError):
        wait_until(check, "it", 5, 0.01, not_yet=(AssertionError,))
