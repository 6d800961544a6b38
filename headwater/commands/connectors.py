"""``headwater connectors list|status|create|pause|resume|restart|delete`` over the Connect REST API."""

from __future__ import annotations

import argparse
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

from . import URL
from .output import fail, print_json, table

__all__ = ["add_parser"]


class RestError(Exception):
    pass


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("connectors", help="manage connectors through a worker's REST API")
    actions = parser.add_subparsers(dest="action", required=True)
    actions.add_parser("list", help="every connector with its state and tasks")
    status = actions.add_parser("status", help="a connector's and its tasks' states, traces and figures")
    status.add_argument("name")
    status.add_argument("--follow", "-f", action="store_true", help="print again whenever it changes (Ctrl-C stops)")
    status.add_argument("--interval", type=float, default=1.0, help="seconds between looks with --follow")
    create = actions.add_parser("create", help="create (or with --replace, update) a connector from a file")
    create.add_argument("--file", "-f", required=True, help="a connector config (.json or .properties)")
    create.add_argument("--replace", action="store_true", help="update the config when the connector exists")
    for name, text in (("pause", "pause a connector and its tasks"), ("resume", "resume a paused connector"),
                       ("stop", "stop a connector (its tasks are removed, its config kept)"),
                       ("delete", "delete a connector")):
        p = actions.add_parser(name, help=text)
        p.add_argument("name")
    restart = actions.add_parser("restart", help="restart a connector (and with --include-tasks its tasks)")
    restart.add_argument("name")
    restart.add_argument("--include-tasks", action="store_true")
    restart.add_argument("--only-failed", action="store_true")
    for p in actions.choices.values():
        p.add_argument("--url", default=URL, help="a worker's REST API (default %(default)s)")
        p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.set_defaults(func=_run)


def _call(url: str, method: str, path: str, body: Any = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url.rstrip("/") + path, data=data, method=method,
                                     headers={"Content-Type": "application/json", "Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            text = response.read()
    except urllib.error.HTTPError as exc:
        try:
            message = json.loads(exc.read()).get("message", exc.reason)
        except ValueError:
            message = exc.reason
        raise RestError(f"{method} {path}: {exc.code} {message}") from None
    except urllib.error.URLError as exc:
        raise RestError(f"cannot reach the REST API at {url}: {exc.reason}") from None
    return json.loads(text) if text else None


def _run(args: argparse.Namespace) -> int:
    try:
        return _ACTIONS[args.action](args)
    except RestError as exc:
        return fail(f"headwater connectors {args.action}: {exc}")
    except (OSError, ValueError) as exc:
        return fail(f"headwater connectors {args.action}: {exc}", 2)
    except KeyboardInterrupt:
        return 0


def _list(args: argparse.Namespace) -> int:
    found = _call(args.url, "GET", "/connectors?expand=status") or {}
    rows = []
    for name in sorted(found):
        st = found[name]["status"]
        tasks = st.get("tasks", [])
        running = sum(1 for t in tasks if t["state"] == "RUNNING")
        rows.append((name, st.get("type", ""), st["connector"]["state"], f"{running}/{len(tasks)}",
                     st["connector"].get("worker_id", "")))
    if args.json:
        print_json([{"name": n, "type": t, "state": s, "tasks_running": r, "worker_id": w} for n, t, s, r, w in rows])
    else:
        table(["NAME", "TYPE", "STATE", "TASKS", "WORKER"], rows)
    return 0


def _status_text(status: dict[str, Any], metrics: dict[int, dict[str, Any]]) -> str:
    lines = [f"{status['name']} ({status.get('type', '')}): {status['connector']['state']} on "
             f"{status['connector'].get('worker_id', '-')}"]
    if status["connector"].get("trace"):
        lines.append("  " + status["connector"]["trace"].strip().replace("\n", "\n  "))
    for t in status.get("tasks", []):
        lines.append(f"  task {t['id']}: {t['state']} on {t.get('worker_id', '-')}")
        figures = metrics.get(t["id"])
        if figures:
            lines.append("    " + ", ".join(f"{k}={json.dumps(v)}" for k, v in sorted(figures.items())
                                          if not isinstance(v, dict | list))[:400])
        if t.get("trace"):
            lines.append("    " + t["trace"].strip().replace("\n", "\n    "))
    return "\n".join(lines)


def _metrics(args: argparse.Namespace, status: dict[str, Any]) -> dict[int, dict[str, Any]]:
    out = {}
    for t in status.get("tasks", []):
        if t["state"] == "RUNNING":
            try:
                out[t["id"]] = (_call(args.url, "GET", f"/connectors/{args.name}/tasks/{t['id']}/metrics") or {}
                                ).get("metrics", {})
            except RestError:
                continue
    return out


def _status(args: argparse.Namespace) -> int:
    last = None
    while True:
        status = _call(args.url, "GET", f"/connectors/{args.name}/status")
        metrics = _metrics(args, status)
        if args.json:
            text = json.dumps({**status, "metrics": {str(k): v for k, v in metrics.items()}}, indent=2)
        else:
            text = _status_text(status, metrics)
        if text != last:
            if last is not None:
                print(time.strftime("--- %H:%M:%S"))
            print(text, flush=True)
            last = text
        if not args.follow:
            return 0
        time.sleep(args.interval)


def _create(args: argparse.Namespace) -> int:
    from headwater.connect.main import load_connector_file

    name, config = load_connector_file(args.file)
    if args.replace:
        result = _call(args.url, "PUT", f"/connectors/{name}/config", config)
    else:
        result = _call(args.url, "POST", "/connectors", {"name": name, "config": config})
    if args.json:
        print_json(result)
    else:
        print(f"Connector {name} {'configured' if args.replace else 'created'}.")
    return 0


def _simple(method: str, path: str, done: str) -> Callable[[argparse.Namespace], int]:
    def action(args: argparse.Namespace) -> int:
        query = ""
        if args.action == "restart":
            query = f"?includeTasks={str(args.include_tasks).lower()}&onlyFailed={str(args.only_failed).lower()}"
        result = _call(args.url, method, path.format(name=args.name) + query)
        if args.json:
            print_json(result or {"name": args.name, "done": args.action})
        else:
            print(f"Connector {args.name} {done}.")
        return 0
    return action


_ACTIONS = {"list": _list, "status": _status, "create": _create,
            "pause": _simple("PUT", "/connectors/{name}/pause", "paused"),
            "resume": _simple("PUT", "/connectors/{name}/resume", "resumed"),
            "stop": _simple("PUT", "/connectors/{name}/stop", "stopped"),
            "restart": _simple("POST", "/connectors/{name}/restart", "restarted"),
            "delete": _simple("DELETE", "/connectors/{name}", "deleted")}
