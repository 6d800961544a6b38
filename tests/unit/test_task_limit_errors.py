"""A task that fails because the process ran out of open files reports a trace naming the limit and what to raise
(not a bare OSError); one whose plugin already explained the failure keeps its own message."""

from __future__ import annotations

import subprocess
import sys
import textwrap

# Runs in a process of its own: the open-file limit is lowered for real, which no other test may share.
SCRIPT = textwrap.dedent("""
    import asyncio, os, resource, socket

    from headwater.connect.api import ConnectException
    from headwater.connect.runtime.worker_task import WorkerTask
    from headwater.connect.status import TargetState, TaskId

    class Opening(WorkerTask):
        explain = False

        async def execute(self) -> None:
            soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            lowest_free = os.open(os.devnull, os.O_RDONLY)  # the limit at it: no descriptor is left to open
            os.close(lowest_free)
            resource.setrlimit(resource.RLIMIT_NOFILE, (lowest_free, hard))
            try:
                try:
                    socket.socket()
                except OSError as exc:
                    if self.explain:
                        raise ConnectException("the plugin's own words") from exc
                    raise
            finally:
                resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    async def main() -> None:
        for explain in (False, True):
            traces = []
            task = Opening(TaskId("conn", 0), TargetState.STARTED, lambda i, s, t: traces.append((s.name, t)))
            task.explain = explain
            await task.start()
            state, trace = next((s, t) for s, t in traces if s == "FAILED")
            print(trace.strip().splitlines()[-1])

    asyncio.run(main())
""")


def test_a_task_out_of_open_files_fails_naming_the_limit() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    runtime, plugin = done.stdout.strip().splitlines()
    assert runtime.startswith("headwater.connect.api.errors.ConnectException: Task conn-0 ran out of a kernel "
                              "resource: Too many open files"), runtime
    assert "ulimit -n / RLIMIT_NOFILE, now " in runtime and "restart the task (POST /connectors/conn/tasks/0/restart)" \
        in runtime, runtime
    assert plugin == "headwater.connect.api.errors.ConnectException: the plugin's own words", plugin
