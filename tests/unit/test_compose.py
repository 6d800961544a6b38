"""docker-compose.yml must be a valid Compose file even where no Docker engine runs, and start closed:
ports on 127.0.0.1 only, non-root processes, no password written in it (they come from a .env the user
makes, and compose refuses to start without one)."""

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
SECRET_NAME = re.compile(r"PASSWORD|PASSWD|SECRET|TOKEN|_KEY$", re.IGNORECASE)
# ${NAME:?message}: compose stops with the message when NAME is unset or empty
REQUIRED_VARIABLE = re.compile(r"^\$\{[A-Z][A-Z0-9_]*:\?[^}]+\}$")
# images that switch to their own user themselves (postgres: root only to set up its data folder)
OWN_USER_IMAGES = ("postgres:", "zookeeper:")  # their entrypoints drop root for their own user

needs_compose = pytest.mark.skipif(shutil.which("docker-compose") is None,
                                   reason="docker-compose is not installed (.ci/run installs it)")


def services() -> dict[str, dict[str, Any]]:
    return dict(yaml.safe_load(COMPOSE.read_text())["services"])


def compose(env_file: Path, password: str | None, *args: str) -> subprocess.CompletedProcess[str]:
    """docker-compose on the repository's file with only ``env_file`` (not a developer's own .env) and
    POSTGRES_PASSWORD set to ``password`` (None: unset)."""
    import os

    env = {k: v for k, v in os.environ.items() if k != "POSTGRES_PASSWORD"}
    if password is not None:
        env["POSTGRES_PASSWORD"] = password
    return subprocess.run(["docker-compose", "-f", str(COMPOSE), "--env-file", str(env_file), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, env=env)


@needs_compose
def test_compose_file_is_valid_and_has_the_cluster(tmp_path: Path) -> None:
    empty = tmp_path / "empty.env"
    empty.write_text("")
    checked = compose(empty, "a-password-for-the-test", "config", "-q")
    assert checked.returncode == 0, checked.stderr
    listed = compose(empty, "a-password-for-the-test", "config", "--services")
    assert set(listed.stdout.split()) == {"broker", "worker1", "worker2", "worker3", "postgres",
                                          "spark-master", "spark-worker", "broker-b", "mirror",
                                          "zookeeper", "cbroker1", "cbroker2", "cbroker3"}
    # the replicated cluster (docs/CLUSTER.md) starts only with its profile
    for name in ("zookeeper", "cbroker1", "cbroker2", "cbroker3"):
        assert services()[name]["profiles"] == ["cluster"], name
    assert all("profiles" not in service for name, service in services().items() if not name.startswith(("cb", "zoo")))


@needs_compose
def test_compose_refuses_to_start_without_a_password_in_env(tmp_path: Path) -> None:
    example = tmp_path / ".env"
    shutil.copy(ROOT / ".env.example", example)  # copied as shipped: the password is still empty
    for password in (None, ""):
        refused = compose(example, password, "config", "-q")
        assert refused.returncode != 0
        assert "set POSTGRES_PASSWORD in .env" in refused.stderr, refused.stderr
    example.write_text(example.read_text().replace("POSTGRES_PASSWORD=\n", "POSTGRES_PASSWORD=chosen-by-the-user\n"))
    accepted = compose(example, None, "config")
    assert accepted.returncode == 0, accepted.stderr
    assert "chosen-by-the-user" in accepted.stdout  # the .env's value is what the services get


def test_every_published_port_is_on_loopback_only() -> None:
    published = 0
    for name, service in services().items():
        for port in service.get("ports", []):
            text = port if isinstance(port, str) else None
            if isinstance(port, dict):  # the long syntax
                assert port.get("host_ip") == "127.0.0.1", (name, port)
            else:
                assert text is not None and text.startswith("127.0.0.1:") and text.count(":") == 2, (name, port)
            published += 1
    assert published >= 8  # broker, broker-b, three workers, the Spark master's two, postgres


def test_every_headwater_process_runs_as_a_non_root_user() -> None:
    for name, service in services().items():
        if str(service.get("image", "")).startswith(OWN_USER_IMAGES):
            continue
        user = str(service.get("user", ""))
        assert user and user.split(":")[0] not in ("root", "0"), (name, user)
    dockerfile = (ROOT / "Dockerfile").read_text()
    users = re.findall(r"^USER\s+(\S+)", dockerfile, re.MULTILINE)
    assert users and users[-1] not in ("root", "0")  # the image itself does not run as root either


def test_no_password_is_written_in_the_compose_file() -> None:
    found = 0
    for name, service in services().items():
        environment = service.get("environment", {})
        items = environment.items() if isinstance(environment, dict) else \
            (entry.split("=", 1) if "=" in entry else (entry, "") for entry in environment)
        for key, value in items:
            if SECRET_NAME.search(key):
                assert REQUIRED_VARIABLE.match(str(value)), f"{name}: {key} must come from .env, not {value!r}"
                found += 1
    assert found >= 1  # postgres's at least
    assert ".env" in (ROOT / ".gitignore").read_text().splitlines()
    example = (ROOT / ".env.example").read_text()
    assert re.search(r"^POSTGRES_PASSWORD=$", example, re.MULTILINE)  # a name to fill in, no value


def test_connect_workers_bound_what_connectors_touch() -> None:
    for name, service in services().items():
        command = service.get("command") or []
        if command[:2] == ["connect", "distributed"]:
            assert "connector.allowed.paths=/var/lib/headwater/lake" in command, name


def test_dockerfile_installs_the_project() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert "pip install" in text and 'ENTRYPOINT ["headwater"]' in text
