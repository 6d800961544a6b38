"""Start and stop a real broker process for tests and benchmarks.

``LoggedProcess`` is the lifecycle shared with ``connectproc.ConnectProcess`` and
``workerproc.WorkerProcess``: a ``headwater`` subprocess logging to a file, ready once its log
(since this start) shows a ready line, stopped with SIGTERM, killed with SIGKILL.
"""

from __future__ import annotations

import os
import re
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Self

_READY = re.compile(r"listening on (\S+://\S+?:\d+(?:, \S+://\S+?:\d+)*) \(")
_URL = re.compile(r"(\S+)://\S+?:(\d+)")


class LoggedProcess:
    """The subprocess lifecycle; a subclass has ``name`` (for messages), ``log_file`` and ``start``."""

    name: str
    log_file: Path | None
    proc: subprocess.Popen[bytes] | None = None
    _log_start: int = 0  # the log's size when this run started
    _terminated: bool = False
    exit_stop_timeout: float = 15  # how long ``with`` waits for a clean stop before SIGKILL
    # RLIMIT_NOFILE of the process: N for soft and hard (as `ulimit -n N` sets), or (soft, hard)
    open_files: int | tuple[int, int] | None = None

    def _spawn(self, args: list[str], cwd: Path | None = None) -> None:
        """Start ``args`` with stdout and stderr appended to the log (no waiting)."""
        assert self.log_file is not None
        self._log_start = self.log_file.stat().st_size if self.log_file.exists() else 0
        self._terminated = False
        out = open(self.log_file, "ab")
        limit = self.open_files
        pair = (limit, limit) if isinstance(limit, int) else limit
        preexec = None if pair is None else lambda: resource.setrlimit(resource.RLIMIT_NOFILE, pair)
        self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, cwd=cwd,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1"}, preexec_fn=preexec)
        out.close()

    def _wait_ready(self, ready: re.Pattern[str], timeout: float) -> re.Match[str]:
        """The ready line's match in this run's log; RuntimeError (with the log's tail) when the process
        exits first, or when the line does not come within ``timeout`` (the process is then killed)."""
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.log_text(since_start=True)
            m = ready.search(text)
            if m:
                return m
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{text[-6000:]}")
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"{self.name} did not start within {timeout}s:\n{self.log_text(True)[-6000:]}")

    def start(self, timeout: float = 60) -> Self:
        """Start and wait until ready (the subclass's)."""
        raise NotImplementedError

    def terminate(self) -> None:
        """Send SIGTERM once (a second one, once the event loop is gone, would kill the process)."""
        assert self.proc is not None
        if self.proc.poll() is None and not self._terminated:
            self._terminated = True
            self.proc.send_signal(signal.SIGTERM)

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM and wait: a clean shutdown. Not stopped within ``timeout``: SIGKILL and AssertionError."""
        assert self.proc is not None
        self.terminate()
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{self.name} did not stop within {timeout}s of SIGTERM:\n"
                                 f"{self.log_text(True)[-4000:]}") from None

    def kill(self) -> None:
        """SIGKILL: a crash (nothing is flushed or committed)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)

    def restart(self, kill: bool = False) -> Self:
        """Stop (SIGTERM, or SIGKILL with ``kill``) and start again."""
        if kill:
            self.kill()
        else:
            self.stop()
        return self.start()

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_text(self, since_start: bool = False) -> str:
        """The whole log, or (``since_start``) what this run wrote."""
        if self.log_file is None or not self.log_file.exists():
            return ""
        data = self.log_file.read_bytes()
        return (data[self._log_start:] if since_start else data).decode(errors="replace")

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if self.running:
            try:
                self.stop(self.exit_stop_timeout)
            except AssertionError:
                self.kill()


class BrokerProcess(LoggedProcess):
    """A ``headwater broker`` subprocess on an ephemeral port, logging to a file."""

    name = "broker"
    exit_stop_timeout = 10

    def __init__(self, log_dir: Path, *overrides: str, port: int = 0, log_file: Path | None = None,
                 open_files: int | tuple[int, int] | None = None) -> None:
        self.log_dir = Path(log_dir)
        self.open_files = open_files
        self.overrides = list(overrides)
        self.port = port
        self.ports: dict[str, int] = {}  # every listener's bound port by name, once started
        self.cli_args: list[str] = []  # more ``headwater broker`` arguments (``--add-scram ...``) for the next start
        self.log_file = log_file or self.log_dir.parent / f"{self.log_dir.name}-broker.log"
        self.proc = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 60) -> BrokerProcess:
        args = [sys.executable, "-m", "headwater", "broker",
                "--set", f"listeners=PLAINTEXT://127.0.0.1:{self.port}", "--set", f"log.dirs={self.log_dir}"]
        for o in self.overrides:
            args += ["--set", o]
        self._spawn([*args, *self.cli_args])
        urls = self._wait_ready(_READY, timeout).group(1)
        self.ports = {name: int(port) for name, port in _URL.findall(urls)}
        # ``port`` (and ``bootstrap``): the PLAINTEXT listener's, else the first
        self.port = self.ports.get("PLAINTEXT", next(iter(self.ports.values())))
        return self
