"""The REST API under fuzzing: schemathesis, run from the worker's own ``/openapi.json``, with all
of its checks, finds nothing, and the worker stays healthy afterwards.

schemathesis generates requests from the document (valid ones and, for negative testing,
invalid ones) and checks every answer: no 5xx, status codes, content types, headers and bodies
as documented, invalid data refused, valid data accepted, 405 with ``Allow`` for undocumented
methods, resources gone after DELETE. The run is deterministic (``generation.deterministic``),
with a fixed number of examples per operation, so it is the same run every time.

The fuzzer is offered connectors that exist, running and STOPPED, sources and sinks, so that the
operations on them get past 404 and "must be STOPPED" (offsets altered and reset, config changes,
restarts, DELETE), and a topic and a group that exist for the ``/admin`` routes; it is not offered
``root`` or ``headwater`` as loggers, so that it cannot turn off the log this test reads afterwards.

positive_data_acceptance (a request the document calls valid is not refused with 400) departs
from schemathesis's defaults only where the document says so: a 400 that depends on the server's
state or on the plugin named (a connector that is not STOPPED, a sink's offsets in the source form,
more task configs than tasks.max, a key the plugin needs) is marked ``x-state-dependent`` in the
document, as Kafka Connect answers those with 400 too; for those operations 400 is expected as well.
Everything else a schema can say (``connector.class`` one of the installed plugins, a sink's
offsets in the sink form) the document says, and a 400 to a request it calls valid is a failure;
where 400 is expected, a check of this test's own (``rest_fuzz_checks.py``) still fails a config
refused for naming a connector.class the document offers.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.connectproc import ConnectProcess, sink_config, source_config, unique
from support.restdoors import BASIC_AUTH_EXTENSION, USERS, basic, basic_auth_files

pytestmark = pytest.mark.timeout(300)

EXAMPLES = 40  # per operation and phase
AUTH_EXAMPLES = 4  # the run with basic authentication: what it adds is one middleware on every request
SEED = 20261124  # for a run with deterministic = false; the deterministic run needs none
STATES = {"UNASSIGNED", "RUNNING", "PAUSED", "STOPPED", "FAILED", "RESTARTING"}

CONFIG = """\
seed = {seed}
workers = 1
request-timeout = 30
suppress-health-check = ["all"]

[generation]
max-examples = {examples}
deterministic = true
database = "none"

[checks]
enabled = true

# Half the generated names, tasks, plugins and loggers are ones that exist, so the operations on
# them get past 404 (pause, stop, restart, offsets, config changes, DELETE, ...).
[dictionaries]
names = {{ values = {names} }}
doomed = {{ values = {doomed} }}
plugins = {{ values = ["FileStreamSource", "FileStreamSinkConnector",
                       "org.apache.kafka.connect.file.FileStreamSourceConnector"] }}
loggers = {{ values = ["headwater.fuzz", "headwater.fuzz.deeper"] }}
topics = {{ values = {topics} }}
groups = {{ values = {groups} }}

[parameters]
"path.name" = {{ dictionary = "names", probability = 0.5 }}
"path.task" = {{ dictionary = "tasks", probability = 0.5 }}
"path.plugin" = {{ dictionary = "plugins", probability = 0.5 }}
"path.logger" = {{ dictionary = "loggers", probability = 0.5 }}
"path.topic" = {{ dictionary = "topics", probability = 0.5 }}
"path.group" = {{ dictionary = "groups", probability = 0.5 }}

[dictionaries.tasks]
values = [0]

# DELETE takes only connectors of its own, so the others live on for the other operations.
[[operations]]
include-method = "DELETE"
include-path = "/connectors/{{name}}"
parameters = {{ "path.name" = {{ dictionary = "doomed", probability = 0.5 }} }}

{operations}
"""


def state_dependent(document: dict[str, Any]) -> list[tuple[str, str, list[str]]]:
    """(method, path, statuses) of the operations whose document marks error statuses that a request
    it calls valid may still get (see the module docstring)."""
    out = []
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            codes = [code for code, response in operation["responses"].items() if response.get("x-state-dependent")]
            if codes:
                out.append((method.upper(), path, codes))
    return out

# Log lines at ERROR that are not a bug of the worker's: a connector or task that failed (the fuzzer
# gave it a config it cannot run with; reported FAILED in its status), and aiohttp's HTTP parser
# refusing a request line or header it cannot parse (schemathesis probes with a NUL in a header). A
# record logged for a connector or task has its context ("[name|task-0] ") before the logger's name.
EXPECTED_ERRORS = re.compile(r" ERROR (?:\[[^\]\n]*\] )?(headwater\.connect\.runtime\.\S+|aiohttp\.server): ")
PARSER_REFUSAL = "aiohttp.http_exceptions.BadHttpMessage"
_LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ ", re.MULTILINE)  # where a record starts


def schemathesis_config(examples: int, seed: int, names: list[str], doomed: list[str], topics: list[str],
                        groups: list[str], document: dict[str, Any]) -> str:
    # schemathesis's own expectation (2xx, 404 for a name that does not exist, 409 for a conflict), and
    # the statuses the document marks as depending on state. One operation each, by its name: separate
    # include-method and include-path filters would each match (POST matching every POST operation).
    operations = "\n".join(
        f'[[operations]]\ninclude-name = "{method} {path}"\n'
        f'checks.positive_data_acceptance.expected-statuses = {json.dumps(["2xx", "404", "409", *codes])}\n'
        for method, path, codes in state_dependent(document))
    return CONFIG.format(seed=seed, examples=examples, operations=operations, names=json.dumps(names),
                         doomed=json.dumps(doomed), topics=json.dumps(topics), groups=json.dumps(groups))


def unexpected_errors(log: str) -> list[str]:
    """The log records at ERROR (with their tracebacks) that are neither a failed connector or task
    nor the HTTP parser refusing a malformed request."""
    starts = [m.start() for m in _LOG_LINE.finditer(log)] + [len(log)]
    out = []
    for begin, end in zip(starts, starts[1:], strict=False):
        record = log[begin:end]
        head = record.split("\n", 1)[0]
        if " ERROR " not in head and " CRITICAL " not in head:
            continue
        match = EXPECTED_ERRORS.search(head)
        if match and (match.group(1) != "aiohttp.server" or PARSER_REFUSAL in record):
            continue
        out.append(record.strip())
    return out


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


def run_counts(report: dict[str, Any]) -> tuple[int, int, int, int]:
    """(operations tested, test cases generated, test cases with failures, errors) from schemathesis's
    JSON report."""
    cases = report["test_cases"]
    return (int(report["operations"]["tested"]), int(cases["generated"]), int(cases["with_failures"]),
            len(report["errors"]) + int(cases["errored"]))


def test_schemathesis_finds_nothing_and_the_worker_stays_healthy(connect: ConnectProcess, tmp_path: Path) -> None:
    fuzz(connect, tmp_path, EXAMPLES)


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectProcess]:
    """A worker with Kafka's basic authentication on (JAAS file and credentials file)."""
    base = tmp_path_factory.mktemp("rest-fuzz-auth")
    jaas = basic_auth_files(base / "security")
    with ConnectProcess(base, settings={"rest.extension.classes": BASIC_AUTH_EXTENSION,
                                        "java.security.auth.login.config": str(jaas)},
                        headers=basic("admin", USERS["admin"])) as proc:
        yield proc
        print(f"headwater up log: {proc.log_file}")


def test_schemathesis_with_basic_auth_finds_nothing(secured: ConnectProcess, tmp_path: Path) -> None:
    """The same run, shorter, with credentials: authentication changes no answer into a server error."""
    fuzz(secured, tmp_path, AUTH_EXAMPLES, ["--auth", f"admin:{USERS['admin']}"])


def fuzz(connect: ConnectProcess, tmp_path: Path, examples: int, extra: list[str] | None = None) -> None:
    """Run schemathesis (``examples`` per operation and phase, ``extra`` arguments) and check what it found and
    how the worker is afterwards."""
    existing = unique("fuzz-existing")  # not offered to the fuzzer: it must run on untouched
    src = tmp_path / "existing.txt"
    src.write_text("a\nb\n")
    connect.create(existing, source_config(src, unique("fuzz-topic")))
    topic = unique("fuzz-target")
    # Offered to the fuzzer, running and STOPPED, source and sink: anything may happen to them.
    targets = {unique("fuzz-source"): source_config(src, topic),
               unique("fuzz-sink"): sink_config(tmp_path / "o1", topic),
               unique("fuzz-stopped-source"): source_config(src, topic),
               unique("fuzz-stopped-sink"): sink_config(tmp_path / "o2", topic)}
    # The only ones DELETE /connectors/{name} is given.
    doomed = {unique("fuzz-doomed-source"): source_config(src, topic),
              unique("fuzz-doomed-sink"): sink_config(tmp_path / "o3", topic)}
    for name, config in {**targets, **doomed}.items():
        connect.create(name, config, **({"initial_state": "STOPPED"} if "stopped" in name else {}))
    connect.wait_state(existing, "RUNNING", tasks=1)

    # the /admin topic and group routes get names that exist half the time, as the connector routes do
    sink_groups = [f"connect-{name}" for name in targets if "sink" in name and "stopped" not in name]
    document = connect.ok("GET", "/openapi.json", expect=200)
    (tmp_path / "schemathesis.toml").write_text(schemathesis_config(examples, SEED, list(targets), list(doomed),
                                                                    [topic], sink_groups, document))
    report_path = tmp_path / "report.json"
    hooks = Path(__file__).with_name("rest_fuzz_checks.py")  # the checks of this test's own, with schemathesis's
    env = {**os.environ, "SCHEMATHESIS_HOOKS": hooks.stem,
           "PYTHONPATH": os.pathsep.join([str(hooks.parent), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run([*schemathesis_command(), "--config-file", str(tmp_path / "schemathesis.toml"), "run",
                          f"{connect.rest}/openapi.json", "--checks", "all", "--no-color", *(extra or []),
                          "--report", "json", "--report-json-path", str(report_path)],
                         cwd=tmp_path, capture_output=True, text=True, timeout=280, env=env)
    out = run.stdout + run.stderr
    summary = out[out.rfind("SUMMARY"):] if "SUMMARY" in out else out[-3000:]
    assert report_path.exists(), out[-12000:]
    operations, cases, failures, errors = run_counts(json.loads(report_path.read_text()))
    print(f"\nschemathesis: {operations} operations tested, {cases} test cases, {failures} with failures, "
          f"{errors} errors, exit code {run.returncode}\n{summary}")
    assert run.returncode == 0 and failures == 0 and errors == 0, out[-12000:]
    assert operations >= 30, summary
    assert cases >= 30 * examples, summary

    # Afterwards: the worker answers, still runs what it ran, and can take a new connector.
    assert connect.get("/").status == 200
    assert connect.get("/health").status == 200
    connect.wait_state(existing, "RUNNING", tasks=1)
    name = unique("fuzz-after")
    connect.create(name, source_config(src, unique("fuzz-after-topic")))
    connect.wait_state(name, "RUNNING", tasks=1)
    # Every connector the fuzzer left behind has a status in Kafka Connect's states: none is stuck
    # without one, and what failed says so there.
    statuses = connect.ok("GET", "/connectors", expect=200, expand="status")
    for conn, entry in statuses.items():
        status = entry["status"]
        assert status["connector"]["state"] in STATES, (conn, status)
        assert all(t["state"] in STATES for t in status["tasks"]), (conn, status)
    # Nothing went wrong that only the log knows about: no 500 (the REST layer logs each), no
    # background task of the herder or the stores that failed, no exception asyncio had to report.
    logged = unexpected_errors(connect.log_text())
    assert not logged, "\n\n".join(logged[:10])
