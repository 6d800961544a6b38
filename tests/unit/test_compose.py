"""docker-compose.yml must be a valid Compose file even where no Docker engine runs."""

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("docker-compose") is None,
                    reason="docker-compose is not installed (.ci/run installs it)")
def test_compose_file_is_valid_and_has_the_cluster() -> None:
    checked = subprocess.run(["docker-compose", "config", "-q"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stderr
    services = subprocess.run(["docker-compose", "config", "--services"], cwd=ROOT, capture_output=True, text=True,
                              timeout=60)
    assert set(services.stdout.split()) == {"broker", "worker1", "worker2", "worker3", "postgres",
                                              "spark-master", "spark-worker", "broker-b", "mirror"}


def test_dockerfile_installs_the_project() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert "pip install" in text and 'ENTRYPOINT ["headwater"]' in text
