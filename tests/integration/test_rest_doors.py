"""The REST API's doors on real workers over TCP: HTTPS listeners (PEM and PKCS12 keystores, client
certificates), KIP-495's admin.listeners, Kafka's basic authentication with its JAAS and credentials files,
a third-party REST extension, the Host allow-list, the Origin check and CORS; and the keys a worker cannot
honour failing its start naming the key."""

from __future__ import annotations

import os
import re
import ssl
import subprocess
import sys
import urllib.error
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.connectproc import ConnectProcess, http, source_config, unique
from support.restdoors import (
    BASIC_AUTH_EXTENSION,
    USERS,
    Pki,
    basic,
    basic_auth_files,
    https_settings,
    make_pki,
)

pytestmark = pytest.mark.timeout(120)

REPO = Path(__file__).resolve().parents[2]
UI_ORIGIN = "https://ui.example.com"
_SERVES = re.compile(r"REST listener (https?)://\S+ on port (\d+) serves (the API|/admin)$", re.MULTILINE)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def https_worker(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[ConnectProcess]:
    """HTTPS (PEM keystore, listeners.https.*) and HTTP listeners, /admin on a listener of its own, CORS
    configured for one origin."""
    settings = {"listeners": "https://127.0.0.1:0,http://127.0.0.1:0", "rest.advertised.listener": "https",
                "admin.listeners": "http://127.0.0.1:0", **https_settings(pki),
                "access.control.allow.origin": UI_ORIGIN, "access.control.allow.methods": "GET,POST,PUT,DELETE"}
    with ConnectProcess(tmp_path_factory.mktemp("https-worker"), settings=settings,
                        ssl_context=pki.context()) as proc:
        # the ports each listener got, from the worker's log
        served = {(m.group(1), m.group(3)): int(m.group(2)) for m in _SERVES.finditer(proc.log_text(True))}
        assert proc.rest_port == served[("https", "the API")], served
        proc.plain = f"http://127.0.0.1:{served[('http', 'the API')]}"  # type: ignore[attr-defined]
        proc.admin = f"http://127.0.0.1:{served[('http', '/admin')]}"  # type: ignore[attr-defined]
        yield proc


@pytest.fixture(scope="module")
def mtls_worker(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[ConnectProcess]:
    """HTTPS only, with the worker's own ssl.* (a PKCS12 keystore) and ssl.client.auth=required; /admin off."""
    settings = {"listeners": "https://127.0.0.1:0", "admin.listeners": "",
                **https_settings(pki, prefix="", pkcs12=True, client_auth="required")}
    with ConnectProcess(tmp_path_factory.mktemp("mtls-worker"), settings=settings,
                        ssl_context=pki.context(client=True)) as proc:
        yield proc


@pytest.fixture(scope="module")
def auth_worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectProcess]:
    """Basic authentication as Kafka configures it: the extension's Java name and the JAAS file in KAFKA_OPTS."""
    base = tmp_path_factory.mktemp("auth-worker")
    jaas = basic_auth_files(base / "security")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("KAFKA_OPTS", f"-Xmx1G -Djava.security.auth.login.config={jaas}")
        proc = ConnectProcess(base, settings={"rest.extension.classes": BASIC_AUTH_EXTENSION},
                              headers=basic("admin", USERS["admin"])).__enter__()  # started under KAFKA_OPTS
    try:
        yield proc
    finally:
        proc.__exit__(None, None, None)


def call(url: str, method: str = "GET", body: object = None, headers: dict[str, str] | None = None,
         context: ssl.SSLContext | None = None) -> tuple[int, dict[str, str], object]:
    answer = http(method, url, body=body, headers=headers, context=context)
    is_json = answer.headers.get("content-type", "").startswith("application/json")
    return answer.status, answer.headers, answer.json if is_json else answer.body


# -- HTTPS -------------------------------------------------------------------------------------------------


def test_https_listener_serves_the_api_with_the_pem_keystore(https_worker: ConnectProcess, pki: Pki) -> None:
    assert https_worker.rest.startswith("https://127.0.0.1:")  # rest.advertised.listener=https
    status, _, body = call(https_worker.rest + "/", context=pki.context())
    assert status == 200 and isinstance(body, dict) and "version" in body
    # the certificate is the configured one: a client that trusts only the system's CAs refuses it
    with pytest.raises(urllib.error.URLError) as refused:
        call(https_worker.rest + "/", context=pki.context(trust=False))
    assert isinstance(refused.value.reason, ssl.SSLCertVerificationError)
    # the http listener beside it serves the same API
    plain = https_worker.plain  # type: ignore[attr-defined]
    assert call(plain + "/connectors")[0] == 200
    name = unique("over-https")
    https_worker.create(name, source_config(https_worker.base / "in.txt", unique("topic")))
    assert name in call(plain + "/connectors")[2]  # type: ignore[operator]


def test_client_certificate_required(mtls_worker: ConnectProcess, pki: Pki) -> None:
    assert call(mtls_worker.rest + "/connectors", context=pki.context(client=True))[0] == 200
    with pytest.raises((urllib.error.URLError, ssl.SSLError, ConnectionError)):
        call(mtls_worker.rest + "/connectors", context=pki.context(client=False))


def test_admin_listeners(https_worker: ConnectProcess, mtls_worker: ConnectProcess, auth_worker: ConnectProcess,
                         pki: Pki) -> None:
    admin = https_worker.admin  # type: ignore[attr-defined]
    # a list: /admin only there, and only /admin there
    assert call(admin + "/admin/loggers")[0] == 200
    assert call(admin + "/connectors")[0] == 404
    assert call(https_worker.rest + "/admin/loggers", context=pki.context())[0] == 404
    assert call(https_worker.plain + "/admin/loggers")[0] == 404  # type: ignore[attr-defined]
    # empty: not served at all
    assert call(mtls_worker.rest + "/admin/loggers", context=pki.context(client=True))[0] == 404
    # unset: on the main listeners
    assert auth_worker.get("/admin/loggers").status == 200


# -- basic authentication ----------------------------------------------------------------------------------


def test_basic_auth_with_kafkas_jaas_and_credentials_files(auth_worker: ConnectProcess) -> None:
    url = auth_worker.rest + "/connectors"
    for headers in ({}, basic("admin", "wrong"), basic("nobody", USERS["admin"]), {"Authorization": "Bearer x"},
                    {"Authorization": "Basic not-base64!"}):
        status, answer_headers, body = call(url, headers=headers)
        assert status == 401, headers
        assert answer_headers.get("www-authenticate", "").startswith('Basic realm="'), answer_headers
        assert body == {"error_code": 401, "message": "User cannot access the resource."}
    assert call(url, headers=basic("admin", USERS["admin"]))[0] == 200
    assert call(url, headers=basic("ops", USERS["ops"]))[0] == 200  # split at the first colon, as Kafka does
    # writes too, and the console's pages
    name = unique("authed")
    created = call(url, "POST", {"name": name, "config": source_config(auth_worker.base / "in.txt", unique("t"))},
                   headers=basic("ops", USERS["ops"]))
    assert created[0] == 201, created
    assert call(auth_worker.rest + "/ui/")[0] == 401
    assert call(auth_worker.rest + "/ui/", headers=basic("admin", USERS["admin"]))[0] == 200


def test_internal_requests_are_not_asked_for_credentials(auth_worker: ConnectProcess) -> None:
    # a follower's task configs (signed instead, KIP-507): past the extension, to the handler, which refuses it
    # for its missing signature, not its missing credentials
    status, headers, body = call(auth_worker.rest + f"/connectors/{unique('missing')}/tasks", "POST", [])
    assert status == 403, body
    assert "signature" in str(body) and "WWW-Authenticate" not in headers, body
    # the same path with another method is an ordinary request
    assert call(auth_worker.rest + f"/connectors/{unique('missing')}/tasks")[0] == 401


# -- a REST extension of a third party ---------------------------------------------------------------------

TOKEN_PLUGIN = '''
from aiohttp import web

from headwater.connect.api import hookimpl
from headwater.connect.api.rest_extension import RestExtension


class HeaderTokenAuth(RestExtension):
    """Requests must carry X-Api-Token (as an OIDC extension would check a bearer token)."""

    def configure(self, configs):
        self.token = configs["header.token.auth.token"]

    def register(self, context):
        @web.middleware
        async def check(request, handler):
            if context.is_internal_request(request) or request.headers.get("X-Api-Token") == self.token:
                request["principal"] = "token-user"
                return await handler(request)
            return context.error(401, "X-Api-Token missing or wrong", {"WWW-Authenticate": "Token"})

        async def whoami(request):
            return web.json_response({"principal": request["principal"]})

        context.add_middleware(check)
        context.add_route("GET", "/whoami", whoami)


@hookimpl
def headwater_rest_extensions():
    return [HeaderTokenAuth]
'''


def test_a_third_party_rest_extension_adds_authentication_and_a_route(tmp_path: Path) -> None:
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "token_auth_plugin.py").write_text(TOKEN_PLUGIN)
    settings = {"rest.extension.classes": "HeaderTokenAuth", "header.token.auth.token": "t0ken"}
    with ConnectProcess(tmp_path / "worker", plugin_path=plugins, settings=settings,
                        headers={"X-Api-Token": "t0ken"}) as proc:
        assert call(proc.rest + "/connectors")[0] == 401
        assert call(proc.rest + "/connectors", headers={"X-Api-Token": "nope"})[0] == 401
        assert call(proc.rest + "/connectors", headers={"X-Api-Token": "t0ken"})[0] == 200
        assert call(proc.rest + "/whoami", headers={"X-Api-Token": "t0ken"})[2] == {"principal": "token-user"}
        # the worker's own checks still come first
        assert call(proc.rest + "/whoami", headers={"X-Api-Token": "t0ken", "Host": "evil.example"})[0] == 421


# -- Host, Origin, CORS ------------------------------------------------------------------------------------


def test_a_foreign_host_is_refused(auth_worker: ConnectProcess) -> None:
    port = auth_worker.rest_port
    creds = basic("admin", USERS["admin"])
    for host in ("attacker.example", f"attacker.example:{port}", f"127.0.0.1.nip.io:{port}"):
        status, _, body = call(auth_worker.rest + "/connectors", headers={**creds, "Host": host})
        assert status == 421 and isinstance(body, dict) and body["error_code"] == 421, (host, body)
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost", f"[::1]:{port}"):
        assert call(auth_worker.rest + "/connectors", headers={**creds, "Host": host})[0] == 200, host


def test_a_foreign_origin_cannot_change_anything(auth_worker: ConnectProcess) -> None:
    creds = basic("admin", USERS["admin"])
    name = unique("origin")
    config = source_config(auth_worker.base / "in.txt", unique("t"))
    auth_worker.create(name, config)
    own = auth_worker.rest
    foreign = ({"Origin": "https://attacker.example"}, {"Origin": "null"},
               {"Origin": own.replace("127.0.0.1", "localhost")}, {"Sec-Fetch-Site": "cross-site"})
    writes = [("POST", "/connectors", {"name": unique("x"), "config": config}),
              ("POST", f"/connectors/{name}/restart", None),  # body-less: a form or fetch could send it
              ("PUT", f"/connectors/{name}/pause", None), ("PUT", f"/connectors/{name}/config", config),
              ("PATCH", f"/connectors/{name}/config", {"tasks.max": "1"}), ("DELETE", f"/connectors/{name}", None)]
    for method, path, body in writes:
        for extra in foreign:
            status, _, answer = call(own + path, method, body, headers={**creds, **extra})
            assert status == 403, (method, path, extra, answer)
    # reads are not refused for their origin (the browser keeps a foreign page from reading the answer)
    assert call(own + f"/connectors/{name}", headers={**creds, "Origin": "https://attacker.example"})[0] == 200
    assert auth_worker.status(name)["connector"]["state"] == "RUNNING"  # nothing above reached it
    # the same requests from the worker's own origin (the console's) go through
    same = {**creds, "Origin": own, "Sec-Fetch-Site": "same-origin"}
    for method, path, body in writes[1:]:
        status, _, answer = call(own + path, method, body, headers=same)
        assert status < 300, (method, path, answer)
    # no CORS unless configured
    status, headers, _ = call(own + "/connectors", "OPTIONS", headers={
        "Origin": "https://attacker.example", "Access-Control-Request-Method": "POST"})
    assert "access-control-allow-origin" not in headers and status >= 400
    assert "access-control-allow-origin" not in call(own + "/connectors", headers={**creds, "Origin": own})[1]


def test_cors_when_configured(https_worker: ConnectProcess, pki: Pki) -> None:
    url, ctx = https_worker.rest + "/connectors", pki.context()
    status, headers, _ = call(url, "OPTIONS", headers={"Origin": UI_ORIGIN, "Access-Control-Request-Method": "DELETE",
                                                       "Access-Control-Request-Headers": "content-type"}, context=ctx)
    assert status == 204 and headers["access-control-allow-origin"] == UI_ORIGIN, headers
    assert set(headers["access-control-allow-methods"].split(",")) == {"GET", "POST", "PUT", "DELETE"}
    status, headers, _ = call(url, headers={"Origin": UI_ORIGIN}, context=ctx)
    assert status == 200 and headers["access-control-allow-origin"] == UI_ORIGIN
    # the allowed origin may write, with the methods allowed; PATCH is not among them, nor another origin
    name = unique("cors")
    config = source_config(https_worker.base / "in.txt", unique("t"))
    assert call(url, "POST", {"name": name, "config": config}, {"Origin": UI_ORIGIN, "Sec-Fetch-Site": "cross-site"},
                ctx)[0] == 201
    assert call(f"{url}/{name}/config", "PATCH", {"tasks.max": "1"}, {"Origin": UI_ORIGIN}, ctx)[0] == 403
    assert call(f"{url}/{name}", "DELETE", None, {"Origin": "https://other.example.com"}, ctx)[0] == 403
    status, headers, _ = call(url, "OPTIONS", headers={"Origin": "https://other.example.com",
                                                       "Access-Control-Request-Method": "POST"}, context=ctx)
    assert "access-control-allow-origin" not in headers
    assert call(f"{url}/{name}", "DELETE", None, {"Origin": UI_ORIGIN}, ctx)[0] == 204


# -- keys a worker cannot honour -----------------------------------------------------------------------------


def _standalone(tmp_path: Path, *settings: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    args = [sys.executable, "-m", "headwater", "connect", "standalone",
            str(REPO / "configs" / "worker-standalone.properties"), "--set", "bootstrap.servers=127.0.0.1:1",
            "--set", f"plugin.path={tmp_path}"]
    for setting in settings:
        args += ["--set", setting]
    return subprocess.run(args, capture_output=True, text=True, timeout=60, cwd=tmp_path,
                          env={**os.environ, **(env or {})})


@pytest.mark.parametrize(("settings", "named"), [
    (("listeners=ftp://127.0.0.1:8083",), "listeners"),
    (("listeners=http://127.0.0.1:0", "admin.listeners=tcp://127.0.0.1:9000"), "admin.listeners"),
    (("listeners=http://127.0.0.1:0", "rest.advertised.listener=https"), "rest.advertised.listener"),
    (("listeners=http://127.0.0.1:0", "rest.extension.classes=com.example.NoSuchExtension"), "rest.extension.classes"),
    (("listeners=https://127.0.0.1:0", "listeners.https.ssl.keystore.type=PEM",
      "listeners.https.ssl.keystore.location=/nonexistent/keystore.pem"), "listeners.https.ssl.keystore.location"),
    (("listeners=https://127.0.0.1:0",), "listeners"),
    (("listeners=http://127.0.0.1:0", f"rest.extension.classes={BASIC_AUTH_EXTENSION}"),
     "java.security.auth.login.config"),
])
def test_a_key_the_worker_cannot_honour_fails_its_start(tmp_path: Path, settings: tuple[str, ...], named: str) -> None:
    run = _standalone(tmp_path, *settings, env={"KAFKA_OPTS": ""})
    assert run.returncode == 2, run.stdout[-3000:] + run.stderr[-3000:]
    assert "invalid worker configuration" in run.stderr and named + ":" in run.stderr, run.stderr[-3000:]
    assert "Traceback" not in run.stderr


def test_a_jaas_file_without_the_kafkaconnect_section_fails_the_start(tmp_path: Path) -> None:
    jaas = tmp_path / "jaas.conf"
    jaas.write_text('KafkaServer { org.apache.kafka.common.security.plain.PlainLoginModule required; };\n')
    run = _standalone(tmp_path, "listeners=http://127.0.0.1:0", f"rest.extension.classes={BASIC_AUTH_EXTENSION}",
                      f"java.security.auth.login.config={jaas}")
    assert run.returncode == 2 and "KafkaConnect" in run.stderr and "java.security.auth.login.config:" in run.stderr
