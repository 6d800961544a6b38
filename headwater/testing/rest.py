"""A small client of the Connect REST API for tests, with waits that say what they last saw."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .waiting import wait_until

__all__ = ["ConnectClient", "Response", "send"]


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)  # names in lower case

    @property
    def json(self) -> Any:
        return json.loads(self.body) if self.body else None

    def __repr__(self) -> str:
        return f"Response({self.status}, {self.body[:1000]!r})"


def send(method: str, url: str, data: bytes | None = None, headers: dict[str, str] | None = None,
         timeout: float = 30.0, context: ssl.SSLContext | None = None) -> Response:
    """One HTTP request with exactly these bytes and headers; 4xx and 5xx answers are returned, not raised.
    ``context``: the TLS client settings for an https URL (trust, a client certificate)."""
    request = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as answer:
            return Response(answer.status, answer.read(), {k.lower(): v for k, v in answer.headers.items()})
    except urllib.error.HTTPError as exc:
        return Response(exc.code, exc.read(), {k.lower(): v for k, v in exc.headers.items()})


class ConnectClient:
    """Calls on a worker's REST API at ``url``. Methods named after an endpoint expect it to succeed and
    return its JSON (an AssertionError naming the call and the answer otherwise); ``call`` returns any
    answer. Connectors created through it are listed in ``created`` (``delete_created`` removes them)."""

    def __init__(self, url: str, timeout: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.created: list[str] = []

    # -- plumbing -----------------------------------------------------------------------------------

    def call(self, method: str, path: str, body: Any = None, **params: Any) -> Response:
        query = urllib.parse.urlencode({k: str(v).lower() if isinstance(v, bool) else v for k, v in params.items()})
        data = None if body is None else json.dumps(body).encode()
        return send(method, self.url + path + (f"?{query}" if query else ""), data,
                    {"Content-Type": "application/json", "Accept": "application/json"}, self.timeout)

    def ok(self, method: str, path: str, body: Any = None, expect: Iterable[int] = (200, 201, 202, 204),
           **params: Any) -> Any:
        answer = self.call(method, path, body, **params)
        assert answer.status in set(expect), f"{method} {path} answered {answer.status}: {answer.body[:2000]!r}"
        return answer.json

    @staticmethod
    def _quote(name: str) -> str:
        return urllib.parse.quote(name, safe="")

    # -- connectors -----------------------------------------------------------------------------------

    def connectors(self) -> list[str]:
        return list(self.ok("GET", "/connectors"))

    def create(self, name: str, config: dict[str, Any], initial_state: str | None = None) -> dict[str, Any]:
        """POST /connectors (``initial_state``: RUNNING, PAUSED or STOPPED); the connector is remembered
        for ``delete_created``."""
        body: dict[str, Any] = {"name": name, "config": config}
        if initial_state is not None:
            body["initial_state"] = initial_state
        info = self.ok("POST", "/connectors", body, expect=(201,))
        self.created.append(name)
        return dict(info)

    def put_config(self, name: str, config: dict[str, Any]) -> dict[str, Any]:
        """PUT /connectors/{name}/config: create or replace."""
        info = self.ok("PUT", f"/connectors/{self._quote(name)}/config", config, expect=(200, 201))
        if name not in self.created:
            self.created.append(name)
        return dict(info)

    def config(self, name: str) -> dict[str, str]:
        return dict(self.ok("GET", f"/connectors/{self._quote(name)}/config"))

    def info(self, name: str) -> dict[str, Any]:
        return dict(self.ok("GET", f"/connectors/{self._quote(name)}"))

    def status(self, name: str) -> dict[str, Any]:
        return dict(self.ok("GET", f"/connectors/{self._quote(name)}/status"))

    def tasks(self, name: str) -> list[dict[str, Any]]:
        return list(self.ok("GET", f"/connectors/{self._quote(name)}/tasks"))

    def task_metrics(self, name: str, task: int = 0) -> dict[str, Any]:
        return dict(self.ok("GET", f"/connectors/{self._quote(name)}/tasks/{task}/metrics"))

    def offsets(self, name: str) -> list[dict[str, Any]]:
        """The connector's committed offsets: ``[{"partition": ..., "offset": ...}]``."""
        return list(self.ok("GET", f"/connectors/{self._quote(name)}/offsets")["offsets"])

    def pause(self, name: str) -> None:
        self.ok("PUT", f"/connectors/{self._quote(name)}/pause")

    def resume(self, name: str) -> None:
        self.ok("PUT", f"/connectors/{self._quote(name)}/resume")

    def stop(self, name: str) -> None:
        self.ok("PUT", f"/connectors/{self._quote(name)}/stop")

    def restart(self, name: str, include_tasks: bool = False, only_failed: bool = False) -> Any:
        return self.ok("POST", f"/connectors/{self._quote(name)}/restart", includeTasks=include_tasks,
                       onlyFailed=only_failed)

    def restart_task(self, name: str, task: int = 0) -> None:
        self.ok("POST", f"/connectors/{self._quote(name)}/tasks/{task}/restart")

    def delete(self, name: str) -> None:
        self.ok("DELETE", f"/connectors/{self._quote(name)}")
        if name in self.created:
            self.created.remove(name)

    def delete_created(self) -> None:
        """Delete every connector created through this client that still exists."""
        for name in list(self.created):
            if self.call("DELETE", f"/connectors/{self._quote(name)}").status in (204, 404):
                self.created.remove(name)

    # -- plugins ------------------------------------------------------------------------------------

    def plugins(self, connectors_only: bool = True) -> list[dict[str, str]]:
        return list(self.ok("GET", "/connector-plugins", connectorsOnly=connectors_only))

    def validate(self, connector_class: str, config: dict[str, Any]) -> dict[str, Any]:
        """PUT /connector-plugins/{class}/config/validate; the answer's ``configs``."""
        return dict(self.ok("PUT", f"/connector-plugins/{self._quote(connector_class)}/config/validate", config))

    @staticmethod
    def errors_by_key(validation: dict[str, Any]) -> dict[str, list[str]]:
        """The keys of a validate answer that have errors, with their messages."""
        return {c["value"]["name"]: list(c["value"]["errors"]) for c in validation.get("configs", [])
                if c["value"]["errors"]}

    # -- waiting --------------------------------------------------------------------------------------

    def wait_for_state(self, name: str, state: str = "RUNNING", tasks: int | None = None,
                       timeout: float = 30.0) -> dict[str, Any]:
        """Wait until the connector and every task of it are in ``state`` (and, with ``tasks``, there are
        that many; a RUNNING or PAUSED connector needs at least one); returns the status."""
        least = tasks if tasks is not None else (1 if state in ("RUNNING", "PAUSED") else 0)

        def reached() -> dict[str, Any]:
            answer = self.call("GET", f"/connectors/{self._quote(name)}/status")
            if answer.status != 200:
                return {}
            status = answer.json
            states = [t["state"] for t in status["tasks"]]
            count_ok = len(states) == tasks if tasks is not None else len(states) >= least
            if status["connector"]["state"] == state and count_ok and all(s == state for s in states):
                return dict(status)
            return {}

        what = f"connector {name} and {'its ' + str(tasks) if tasks is not None else 'all its'} tasks to be {state}"
        return wait_until(reached, what, timeout, 0.05, seen=lambda: self.describe(name))

    def wait_for_task_state(self, name: str, task: int, state: str = "RUNNING", timeout: float = 30.0) -> None:
        def reached() -> bool:
            answer = self.call("GET", f"/connectors/{self._quote(name)}/tasks/{task}/status")
            return answer.status == 200 and answer.json["state"] == state

        wait_until(reached, f"task {task} of {name} to be {state}", timeout, 0.05, seen=lambda: self.describe(name))

    def wait_for_offsets(self, name: str, timeout: float = 30.0) -> list[dict[str, Any]]:
        """The connector's committed offsets, once there are some."""
        return wait_until(lambda: self.offsets(name), f"committed offsets of connector {name}", timeout, 0.1,
                          seen=lambda: self.describe(name))

    def wait_gone(self, name: str, timeout: float = 30.0) -> None:
        wait_until(lambda: self.call("GET", f"/connectors/{self._quote(name)}").status == 404,
                   f"connector {name} to be gone", timeout, 0.05, seen=lambda: self.describe(name))

    def describe(self, name: str) -> Any:
        """The connector's status, or the answer that says why there is none (for failure messages)."""
        answer = self.call("GET", f"/connectors/{self._quote(name)}/status")
        return answer.json if answer.status == 200 else answer
