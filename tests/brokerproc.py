"""Start and stop a real broker process for tests and benchmarks."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

_READY = re.compile(r"listening on PLAINTEXT://[^:]+:(\d+)")


class BrokerProcess:
    """A ``headwater broker`` subprocess on an ephemeral port, logging to a file."""

    def __init__(self, log_dir: Path, *overrides: str, port: int = 0, log_file: Path | None = None) -> None:
        self.log_dir = Path(log_dir)
        self.overrides = list(overrides)
        self.port = port
        self.log_file = log_file or self.log_dir.parent / f"{self.log_dir.name}-broker.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30) -> BrokerProcess:
        args = [sys.executable, "-m", "headwater.connect.cli", "broker",
                "--set", f"listeners=PLAINTEXT://127.0.0.1:{self.port}", "--set", f"log.dirs={self.log_dir}"]
        for o in self.overrides:
            args += ["--set", o]
        start_at = self.log_file.stat().st_size if self.log_file.exists() else 0
        out = open(self.log_file, "ab")
        self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        out.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.log_file.read_bytes()[start_at:].decode(errors="replace")
            m = _READY.search(text)
            if m:
                self.port = int(m.group(1))
                return self
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode}:\n{text}")
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"broker did not start within {timeout}s")

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM and wait: a clean shutdown."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def restart(self) -> BrokerProcess:
        self.stop()
        return self.start()

    def log_text(self) -> str:
        return self.log_file.read_text(errors="replace") if self.log_file.exists() else ""

    def __enter__(self) -> BrokerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if self.proc and self.proc.poll() is None:
            try:
                self.stop(10)
            except subprocess.TimeoutExpired:
                self.kill()
