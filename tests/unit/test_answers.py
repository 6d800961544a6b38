"""A connection's answers (broker/server/answers.py) over a real socket pair: handlers that finish at once and
handlers that wait are answered in request order, ready answers leave in one write, and a failed handler
closes the connection without writing anything after it."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest

from headwater.broker.server.answers import Answers, Parked, Ready, start_eagerly
from headwater.broker.topics.data_waiters import DataWaiters


async def _pair() -> tuple[asyncio.StreamWriter, socket.socket]:
    ours, theirs = socket.socketpair()
    _reader, writer = await asyncio.open_connection(sock=ours)
    theirs.setblocking(False)
    return writer, theirs


async def _received(sock: socket.socket, size: int, timeout: float = 5.0) -> bytes:
    loop = asyncio.get_running_loop()
    data = b""
    async with asyncio.timeout(timeout):
        while len(data) < size:
            chunk = await loop.sock_recv(sock, size - len(data))
            if not chunk:
                break
            data += chunk
    return data


async def _answer(value: bytes) -> bytes:
    return value


async def _answer_after(gate: asyncio.Future[None], value: bytes, waits: list[str]) -> bytes:
    waits.append("waiting")
    await gate
    waits.append("woken")
    await asyncio.sleep(0)  # a second wait: the handler is carried on, not restarted
    return value


def test_answers_in_request_order_whoever_finishes_first() -> None:
    async def scenario() -> None:
        writer, peer = await _pair()
        answers = Answers(writer, "peer", limit=64)
        gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waits: list[str] = []
        first = start_eagerly(_answer(b"1"), "peer-1")
        slow = start_eagerly(_answer_after(gate, b"2", waits), "peer-1")
        third = start_eagerly(_answer(b"3"), "peer-1")
        assert isinstance(first, Ready) and isinstance(third, Ready)  # answered in the reader's own step
        assert not isinstance(slow, Ready) and waits == ["waiting"]  # ran up to its wait, then a Task
        for pending in (first, slow, third):
            answers.add(pending)
        answers.flush()
        assert await _received(peer, 1) == b"1"
        assert len(answers) == 2  # "3" waits for "2"
        gate.set_result(None)
        await answers.written()
        assert await _received(peer, 2) == b"23"
        assert waits == ["waiting", "woken"]
        writer.close()
        peer.close()

    asyncio.run(scenario())


def test_ready_answers_leave_in_one_write() -> None:
    async def scenario() -> None:
        writer, peer = await _pair()
        writes: list[list[Any]] = []  # each call the answers made: one send each on the transport
        original_write, original_writelines = writer.write, writer.writelines

        def write(data: Any) -> None:
            writes.append([data])
            original_write(data)

        def writelines(parts: Any) -> None:
            writes.append(list(parts))
            original_writelines(parts)

        writer.write = write  # type: ignore[method-assign]
        writer.writelines = writelines  # type: ignore[method-assign,assignment]
        answers = Answers(writer, "peer", limit=64)
        for i in range(5):
            answers.add(start_eagerly(_answer(b"%d" % i), "peer-1"))
        answers.flush()
        assert await _received(peer, 5) == b"01234"
        assert writes == [[b"0", b"1", b"2", b"3", b"4"]]
        writer.close()
        peer.close()

    asyncio.run(scenario())


async def _fails() -> bytes:
    raise RuntimeError("handler bug")


def test_a_failed_handler_closes_the_connection_and_nothing_after_it_is_written(
        caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        writer, peer = await _pair()
        answers = Answers(writer, "peer-1", limit=64)
        gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiting = start_eagerly(_answer_after(gate, b"never", []), "peer-1")
        for pending in (start_eagerly(_answer(b"ok"), "peer-1"), start_eagerly(_fails(), "peer-1"), waiting):
            answers.add(pending)
        answers.flush()
        assert answers.failed
        assert await _received(peer, 10) == b"ok"  # then the end of the stream
        await asyncio.sleep(0)
        assert isinstance(waiting, asyncio.Task) and waiting.cancelled()
        await answers.written()  # returns: nothing more will be written
        peer.close()

    asyncio.run(scenario())
    assert "request from peer-1 failed; closing the connection" in caplog.text
    assert "RuntimeError: handler bug" in caplog.text


def test_reading_pauses_at_the_limit_until_answers_are_written() -> None:
    async def scenario() -> None:
        writer, peer = await _pair()
        answers = Answers(writer, "peer", limit=2)
        gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        answers.add(start_eagerly(_answer_after(gate, b"a", []), "peer-1"))
        answers.add(start_eagerly(_answer(b"b"), "peer-1"))
        room = asyncio.ensure_future(answers.room())
        await asyncio.sleep(0.05)
        assert not room.done()  # two queued, the first still waiting
        gate.set_result(None)
        await asyncio.wait_for(room, 5)
        assert len(answers) == 0 and await _received(peer, 2) == b"ab"
        writer.close()
        peer.close()

    asyncio.run(scenario())


async def _fails_after(gate: asyncio.Future[None]) -> bytes:
    await gate
    raise ValueError("late handler bug")


async def _cleans_up(gate: asyncio.Future[None], seen: list[str]) -> bytes:
    try:
        await gate
    except asyncio.CancelledError:
        seen.append("cancelled inside the handler")
        raise
    return b"never"


def test_a_handler_failing_after_a_wait_is_logged_once_and_closes_the_connection(
        caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        writer, peer = await _pair()
        answers = Answers(writer, "peer-2", limit=64)
        gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        answers.add(start_eagerly(_answer(b"first"), "peer-2"))
        answers.add(start_eagerly(_fails_after(gate), "peer-2"))
        answers.add(start_eagerly(_answer(b"after"), "peer-2"))
        answers.flush()
        assert await _received(peer, 5) == b"first"
        gate.set_result(None)
        await answers.written()
        assert answers.failed and await _received(peer, 10) == b""  # closed, "after" never sent
        peer.close()

    asyncio.run(scenario())
    assert caplog.text.count("request from peer-2 failed; closing the connection") == 1
    assert "ValueError: late handler bug" in caplog.text


@pytest.mark.parametrize("steps_before", [0, 2])  # cancelled before its Task's first step, and after
def test_cancelling_a_waiting_handler_cancels_it_where_it_waits(steps_before: int) -> None:
    async def scenario() -> None:
        writer, peer = await _pair()
        answers = Answers(writer, "peer", limit=64)
        gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        seen: list[str] = []
        waiting = start_eagerly(_cleans_up(gate, seen), "peer")
        answers.add(waiting)
        for _ in range(steps_before):
            await asyncio.sleep(0)
        answers.cancel()  # shutting down
        for _ in range(3):
            await asyncio.sleep(0)
        assert isinstance(waiting, asyncio.Task) and waiting.cancelled()
        assert seen == ["cancelled inside the handler"]
        writer.close()
        peer.close()

    asyncio.run(scenario())


READ = ("t", 0)  # the partition the fetches below read


async def _long_poll(waiters: DataWaiters, value: bytes, timeout: float = 30.0, waits: int = 1) -> bytes:
    """A Fetch's shape: wait for the next append to its partition (up to ``timeout``), ``waits`` times, then answer."""
    for _ in range(waits):
        await waiters.wait(timeout, [READ])
    return value


def _sent_now(sock: socket.socket) -> bytes:
    """What the peer has already received, without waiting (nothing: b"")."""
    try:
        return sock.recv(1 << 16)
    except BlockingIOError:
        return b""


def test_a_parked_fetch_woken_by_an_append_is_answered_within_the_notify() -> None:
    async def scenario() -> None:
        writer, peer = await _pair()
        answers = Answers(writer, "peer", limit=64)
        waiters = DataWaiters()
        parked = start_eagerly(_long_poll(waiters, b"fetched"), "peer-1")
        assert isinstance(parked, Parked) and len(waiters) == 1  # no Task for a fetch waiting for data
        answers.add(parked)
        answers.flush()
        assert _sent_now(peer) == b""
        waiters.notify([("t", 1), ("other", 0)])  # appends to partitions it does not read leave it parked
        assert not parked.done() and len(waiters) == 1 and _sent_now(peer) == b""
        waiters.notify([("other", 0), READ])  # the append's notify: no await between it and the answer on the wire
        assert parked.done() and len(answers) == 0 and len(waiters) == 0
        assert _sent_now(peer) == b"fetched"
        writer.close()
        peer.close()

    asyncio.run(scenario())


def test_a_parked_fetch_answered_before_an_earlier_request_waits_for_it() -> None:
    async def scenario() -> None:
        writer, peer = await _pair()
        answers = Answers(writer, "peer", limit=64)
        waiters = DataWaiters()
        gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        earlier = start_eagerly(_answer_after(gate, b"earlier,", []), "peer-1")
        parked = start_eagerly(_long_poll(waiters, b"fetched"), "peer-1")
        answers.add(earlier)
        answers.add(parked)
        waiters.notify()
        assert parked.done() and _sent_now(peer) == b""  # held behind the earlier request's answer
        gate.set_result(None)
        await answers.written()
        assert await _received(peer, 15) == b"earlier,fetched"
        writer.close()
        peer.close()

    asyncio.run(scenario())


def test_a_parked_fetch_waits_again_after_a_notify_and_ends_on_its_timer() -> None:
    async def scenario() -> None:
        writer, peer = await _pair()
        answers = Answers(writer, "peer", limit=64)
        waiters = DataWaiters()
        parked = start_eagerly(_long_poll(waiters, b"timed out", timeout=0.05, waits=2), "peer-1")
        answers.add(parked)
        waiters.notify()  # the first wait ends; the handler parks again on a new wait, for the next notify
        assert not parked.done() and len(waiters) == 1
        assert await _received(peer, 9) == b"timed out"  # the second wait's timer answered it
        assert len(answers) == 0 and len(waiters) == 0
        writer.close()
        peer.close()

    asyncio.run(scenario())


def test_cancelling_a_parked_fetch_cancels_it_where_it_waits() -> None:
    async def scenario() -> None:
        writer, peer = await _pair()
        answers = Answers(writer, "peer", limit=64)
        waiters = DataWaiters()
        seen: list[str] = []

        async def fetch() -> bytes:
            try:
                await waiters.wait(30, [READ])
            except asyncio.CancelledError:
                seen.append("cancelled inside the handler")
                raise
            return b"never"

        parked = start_eagerly(fetch(), "peer")
        answers.add(parked)
        answers.cancel()  # shutting down
        assert isinstance(parked, Parked) and parked.cancelled()
        assert seen == ["cancelled inside the handler"] and len(waiters) == 0
        waiters.notify()
        assert _sent_now(peer) == b""
        writer.close()
        peer.close()

    asyncio.run(scenario())


def test_a_parked_fetch_failing_when_woken_is_logged_and_closes_the_connection(
        caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        writer, peer = await _pair()
        answers = Answers(writer, "peer-3", limit=64)
        waiters = DataWaiters()

        async def fetch() -> bytes:
            await waiters.wait(30, [READ])
            raise ValueError("fetch bug")

        answers.add(start_eagerly(fetch(), "peer-3"))
        waiters.notify()  # the notifying step (another connection's Produce) is not disturbed
        assert answers.failed
        assert await _received(peer, 10) == b""
        peer.close()

    asyncio.run(scenario())
    assert caplog.text.count("request from peer-3 failed; closing the connection") == 1
    assert "ValueError: fetch bug" in caplog.text
