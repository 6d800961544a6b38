"""The REST API under fuzzing: schemathesis, run from the worker's own ``/openapi.json``, with all
of its checks, finds nothing, and the worker stays healthy afterwards.

schemathesis generates requests from the document (valid ones and, for negative testing,
invalid ones) and checks every answer: no 5xx, status codes, content types, headers and bodies
as documented, invalid data refused, valid data accepted, 405 with ``Allow`` for undocumented
methods, resources gone after DELETE. The run is seeded, so it is the same run every time.

One setting departs from schemathesis's defaults, for a reason of the API's own: a connector
config is a map of strings whose keys depend on the plugin (as in Kafka Connect), so a config
of the right shape may still be refused with a 400 that names the key. For the operations that
take a config, positive_data_acceptance also expects 400.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from connectproc import ConnectProcess, source_config, unique

pytestmark = pytest.mark.timeout(300)

EXAMPLES = 50  # per operation and phase
SEED = 20261124

CONFIG = """\
seed = {seed}
workers = 1
request-timeout = 30
suppress-health-check = ["all"]

[generation]
max-examples = {examples}
deterministic = true

[checks]
enabled = true

# Half the generated names, tasks, plugins and loggers are ones that exist, so the operations on
# them get past 404 (pause, stop, restart, offsets, config changes, DELETE, ...).
[dictionaries]
names = {{ values = {names} }}
plugins = {{ values = ["FileStreamSource", "FileStreamSinkConnector",
                       "org.apache.kafka.connect.file.FileStreamSourceConnector"] }}
loggers = {{ values = ["root", "headwater", "headwater.fuzz"] }}

[parameters]
"path.name" = {{ dictionary = "names", probability = 0.5 }}
"path.task" = {{ dictionary = "tasks", probability = 0.5 }}
"path.plugin" = {{ dictionary = "plugins", probability = 0.5 }}
"path.logger" = {{ dictionary = "loggers", probability = 0.5 }}

[dictionaries.tasks]
values = [0]

{operations}
"""

# The operations whose bodies carry a connector's or a plugin's config (see the module docstring).
CONFIG_BEARING = [
    ("POST", "/connectors"),
    ("PUT", "/connectors/{name}/config"),
    ("PATCH", "/connectors/{name}/config"),
    ("PUT", "/connector-plugins/{plugin}/config/validate"),
    ("POST", "/connectors/{name}/tasks"),  # a standalone worker refuses task configs (distributed only)
    ("PATCH", "/connectors/{name}/offsets"),  # offsets change only for a STOPPED connector
    ("DELETE", "/connectors/{name}/offsets"),
]


def schemathesis_config(examples: int, seed: int, names: list[str]) -> str:
    operations = "\n".join(
        f'[[operations]]\ninclude-method = "{method}"\ninclude-path = "{path}"\n'
        f'checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "404", "409"]\n'
        for method, path in CONFIG_BEARING)
    return CONFIG.format(seed=seed, examples=examples, operations=operations, names=json.dumps(names))


@pytest.fixture(scope="module")
def connect(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectProcess]:
    with ConnectProcess(tmp_path_factory.mktemp("rest-fuzz")) as proc:
        yield proc
        print(f"headwater up log: {proc.log_file}")


def schemathesis_command() -> list[str]:
    exe = Path(sys.executable).with_name("schemathesis")
    if exe.exists():
        return [str(exe)]
    found = shutil.which("schemathesis")
    if found is None:
        pytest.fail("schemathesis is not installed: it is in the dev extras (pip install -e '.[dev]')")
    return [found]


def test_schemathesis_finds_nothing_and_the_worker_stays_healthy(connect: ConnectProcess, tmp_path: Path) -> None:
    existing = unique("fuzz-existing")  # not offered to the fuzzer: it must run on untouched
    src = tmp_path / "existing.txt"
    src.write_text("a\nb\n")
    connect.create(existing, source_config(src, unique("fuzz-topic")))
    targets = [unique("fuzz-source"), unique("fuzz-sink")]  # offered to the fuzzer: anything may happen to them
    connect.create(targets[0], source_config(src, unique("fuzz-target")))
    connect.create(targets[1], {"connector.class": "FileStreamSink", "file": str(tmp_path / "sink.txt"),
                                "topics": unique("fuzz-target")})
    connect.wait_state(existing, "RUNNING", tasks=1)

    (tmp_path / "schemathesis.toml").write_text(schemathesis_config(EXAMPLES, SEED, targets))
    run = subprocess.run([*schemathesis_command(), "--config-file", str(tmp_path / "schemathesis.toml"), "run",
                          f"{connect.rest}/openapi.json", "--checks", "all", "--no-color"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=280)
    out = run.stdout + run.stderr
    summary = out[out.rfind("SUMMARY"):] if "SUMMARY" in out else out[-3000:]
    operations = re.search(r"Tested: (\d+)", summary)
    cases = re.search(r"(\d+) generated", summary)
    print(f"\nschemathesis: operations tested {operations.group(1) if operations else '?'}, "
          f"test cases {cases.group(1) if cases else '?'}, exit code {run.returncode}\n{summary}")
    assert run.returncode == 0, out[-12000:]
    assert operations and int(operations.group(1)) >= 25, summary
    assert cases and int(cases.group(1)) >= 500, summary

    # Afterwards: the worker answers, still runs what it ran, and can take a new connector.
    assert connect.get("/").status == 200
    assert connect.get("/health").status == 200
    connect.wait_state(existing, "RUNNING", tasks=1)
    name = unique("fuzz-after")
    connect.create(name, source_config(src, unique("fuzz-after-topic")))
    connect.wait_state(name, "RUNNING", tasks=1)
    assert "REST request" not in connect.log_text()  # the line the REST layer logs with a 500
