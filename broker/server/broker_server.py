"""The asyncio listener: framing, dispatch through the API registry, ordered answers.

Each connection has a reader that parses frames and starts each request's handler in arrival order: a
handler that does not wait is answered in the reader's own step, one that waits carries on in a Task
(answers.py); answers are written in request order, so clients can pipeline. A frame that
cannot be parsed, an unknown API or an unsupported version closes that connection
with a log line (ApiVersions excepted: it answers UNSUPPORTED_VERSION in the v0 layout);
every other connection carries on.

Each listener's security is decided once, at start (security/listeners.py): an SSL listener's server
wraps its sockets in TLS and a client certificate names the connection's principal; a SASL listener
runs the authentication exchange (``_authenticate``) before the connection's requests are read as
usual. What differs per listener is settled when a client connects, not per request.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import struct
import time
from typing import TYPE_CHECKING, Any

from headwater.properties import ConfigError

from .. import apis
from ..access.service import ANONYMOUS, Access
from ..config.broker_config import BrokerConfig, Listener
from ..group.coordinator import GroupCoordinator
from ..protocol.codec import (
    MalformedRequest,
    RequestHeader,
    decode_request,
    encode_response,
    encode_unsupported_api_versions,
    parse_request_header,
    request_class,
)
from ..protocol.hot_paths import decode_fast, encode_fast
from ..security.listeners import ListenerSecurity
from ..security.principal import NoMatchingRule
from ..security.session import SaslSession
from ..security.settings import BadSetting
from ..security.tls import peer_principal
from ..topics.cluster import Cluster
from ..topics.housekeeping import LogHousekeeping
from ..topics.producer_state import ProducerIdManager
from ..txn import TransactionCoordinator
from .answers import Answers, Pending, Ready, start_eagerly
from .background import start_background
from .connection_limits import ConnectionLimits, ConnectionSlot
from .open_files import raise_open_files_limit

if TYPE_CHECKING:
    from ..access.quotas import Throttler
    from ..cluster.membership import ClusterMembership
    from ..cluster.security_state import ClusterSecurity
    from ..metrics.prometheus import MetricsEndpoint
    from ..replication.manager import ReplicaManager
    from ..security.credentials import CredentialChange

__all__ = ["BrokerServer"]

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
API_VERSIONS = 18
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
_BEFORE_AUTHENTICATION = frozenset({API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE})
MAX_IN_FLIGHT = 64  # per connection; reading pauses beyond this
_WRITE_BUFFERED = 1 << 16  # answers the transport holds unsent beyond which reading waits for the client
_READ_SIZE = 1 << 18  # the most one read takes from the connection's buffer
_FETCH_KEY = b"\x00\x01"  # a request frame's first bytes: its API key, int16


_LEAVE_WAIT_S = 1.0  # how long a refused client is given to read its answer and go


async def _until_client_leaves(reader: asyncio.StreamReader) -> None:
    """Wait (briefly) for a refused client to close its end, as Kafka delays the close of a failed
    authentication: closing right behind the answer lets the answer and the end of the stream arrive together,
    and kafka-python then reports the lost connection instead of the refusal."""
    with contextlib.suppress(TimeoutError, ConnectionError, asyncio.IncompleteReadError):
        await asyncio.wait_for(reader.read(1 << 16), _LEAVE_WAIT_S)


class _Close(Exception):
    """Close this connection (the reason has been logged)."""


class _Refused(_Close):
    """Close this connection once its answers are out and the client has left (or ``_LEAVE_WAIT_S`` passed):
    a refused authentication, whose answer the client must get to read."""


class _Mute:
    """Until when a connection's requests are not read: a client over its quota is throttled."""

    __slots__ = ("until",)

    def __init__(self) -> None:
        self.until = 0.0

    def extend(self, ms: int) -> None:
        self.until = max(self.until, time.monotonic() + ms / 1000)

    async def wait(self) -> None:
        delay = self.until - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)


class _Served:
    """One listener as served: its security, and the address its clients are told (Metadata)."""

    __slots__ = ("endpoint", "security")

    def __init__(self, security: ListenerSecurity, endpoint: Listener) -> None:
        self.security, self.endpoint = security, endpoint


class _Connection:
    """What every request of one connection shares: the peer, the principal (decided once, when the client
    connects or authenticates) and whether the ACLs apply to it at all, the mute its throttles set, the
    listener's advertised address and, on a SASL listener, the authentication state."""

    __slots__ = ("authorizing", "endpoint", "extend_mute", "mute", "peer", "principal", "sasl", "slot")
    slot: ConnectionSlot  # its place under max.connections and connections.max.idle.ms

    def __init__(self, peer: str, principal: str, authorizing: bool, endpoint: Listener | None = None,
                 sasl: SaslSession | None = None) -> None:
        self.peer, self.principal, self.authorizing = peer, principal, authorizing
        self.endpoint, self.sasl = endpoint, sasl
        self.mute = _Mute()
        self.extend_mute = self.mute.extend  # bound once, not per request


class BrokerServer:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.cluster = Cluster(config)
        self.housekeeping = LogHousekeeping(self.cluster, config)
        self.limits = ConnectionLimits(config)
        self._servers: list[asyncio.Server] = []
        self._connections: set[asyncio.Task[None]] = set()
        self._background: list[asyncio.Task[None]] = []
        self._closing = False
        self.bound: list[Listener] = []
        self._served: dict[str, _Served] = {}
        self._metrics: MetricsEndpoint | None = None
        self._replication: ReplicaManager | None = None  # started here (cluster mode), stopped here
        self._security: ClusterSecurity | None = None  # the cluster's ACLs, credentials and quotas (cluster mode)
        self.add_scram: list[CredentialChange] = []  # --add-scram's, written to ZooKeeper once joined (cluster)
        self.metrics_url: str | None = None  # where Prometheus scrapes, once served
        self._is_closing = lambda: self._closing  # every request's context asks this; made once
        self._serving = False  # started whole: a stop then begins with a controlled shutdown (cluster mode)

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        raise_open_files_limit()  # before the logs open: their descriptor budget follows the limit
        self.cluster.load()
        self.access = Access(self.config, self.cluster.log_dir)
        self.groups = GroupCoordinator(self.cluster, self.config)
        self.groups.load()
        producer_ids = ProducerIdManager(self.cluster.log_dir)
        from ..txn.marker_sender import marker_sender  # it imports the inter-broker client, which imports this

        self.transactions = TransactionCoordinator(self.cluster, self.config, producer_ids, self.groups.offsets,
                                                   marker_sender(self.cluster, self.groups.offsets))
        await self.transactions.load()
        self.services = apis.Services(self.access, producer_ids, self.groups, self.transactions)
        try:
            security = self.config.listener_security(self.services)  # keystores read, mechanisms ready
        except BadSetting as exc:
            self.cluster.close()
            raise ConfigError(str(exc)) from None
        self.groups.start()
        advertised = {a.name: a for a in self.config.advertised_listener_list()} \
            if self.config.advertised_listeners else {}
        for listener in self.config.listener_list():
            sec = security[listener.name]
            served = self._served[listener.name] = _Served(sec, listener)
            server = await asyncio.start_server(functools.partial(self._on_connection, served), listener.host or None,
                                                listener.port, ssl=sec.ssl_context, reuse_address=True,
                                                limit=1 << 20)
            port = server.sockets[0].getsockname()[1]
            self.bound.append(Listener(name=listener.name, host=listener.host, port=port))
            # Port 0 means "any": a listener not in advertised.listeners advertises the port actually bound.
            served.endpoint = advertised.get(listener.name) or \
                Listener(name=listener.name, host=listener.host or "localhost", port=port)
            self._servers.append(server)
        self.cluster.advertised = [self._endpoint(b.name) for b in self.bound]
        if self.config.zookeeper_connect:
            await self._start_replication()  # first: the partition states handed over while joining reach it
            await self._join_cluster()
        self._background = [
            start_background("flush scheduler", self.housekeeping.run_flush_scheduler, log),
            start_background("retention", self.housekeeping.run_retention, log),
            start_background("log cleaner", self.housekeeping.run_cleaner, log),
            start_background("transaction coordinator", self.transactions.run, log),
        ]
        if self.config.metrics_listener:
            try:
                await self.serve_metrics(self.config.metrics_listener)
            except OSError:
                await self.stop()  # leave nothing half started: the caller gets only the error
                raise
        self._serving = True

    async def _join_cluster(self) -> None:
        """Register in ZooKeeper (broker/cluster/); a refusal stops what started and is raised to the caller."""
        from ..cluster.config_sync import ClusterConfigs  # kazoo loads only in cluster mode
        from ..cluster.membership import ClusterMembership

        # Set before joining: a client that connects meanwhile sees no brokers and no controller yet (as
        # Kafka's brokers answer before their first metadata update), never a single-node answer.
        membership = self.cluster.membership = ClusterMembership(self.config, self.cluster)
        try:
            await membership.start(self.cluster.advertised)
        except BaseException:
            self.cluster.membership = None  # start stopped it already
            await self.stop()
            raise
        self.services.producer_ids.use_blocks(membership.reserve_producer_ids)  # ids unique in the cluster
        membership.configs = ClusterConfigs(self.cluster, membership)  # topic and broker configs: the cluster's
        membership.configs.install()
        await self._share_security(membership)

    async def _share_security(self, membership: ClusterMembership) -> None:
        """ACLs, SCRAM credentials and client quotas from ZooKeeper, shared by every broker."""
        from ..cluster.security_state import ClusterSecurity

        assert membership.config_changes is not None
        security = ClusterSecurity(membership.zk, membership.config_changes, self.access.acls, self.access.quotas,
                                   self.access.scram)
        try:
            await security.start()
            if self.add_scram:  # a user whose credential could not be written is named; the broker serves on
                for user, why in (await security.alter_scram(self.add_scram, only_absent=True)).items():
                    log.error("--add-scram: the credentials of user %r were not written: %s", user, why)
        except BaseException:
            await self.stop()
            raise
        self._security = self.access.shared = security

    async def _start_replication(self) -> None:
        """Leaders and followers of the cluster's partitions (broker/replication/), their ISR changes written
        to ZooKeeper through the membership's writer. ConfigError (nothing started) when the inter-broker
        listener cannot be used for replication."""
        from ..replication.manager import ReplicaManager

        if self.cluster.replication is not None:  # a hook set by whoever embeds the server: theirs to run
            return
        try:
            manager = ReplicaManager(self.cluster, self.config)
        except BaseException:
            await self.stop()  # leave nothing half started: the caller gets only the error
            raise
        manager.listeners.append(self.groups)  # group coordinators move with __consumer_offsets' leadership
        manager.listeners.append(self.transactions)  # transaction coordinators with __transaction_state's
        self.cluster.replication = self._replication = manager
        manager.start()

    async def serve_metrics(self, listener: str) -> str:
        """Serve Prometheus metrics on ``listener`` (``http://HOST:PORT``) until ``stop``; returns the
        scrape URL. OSError naming ``metrics.listener`` when the address cannot be bound."""
        from ..metrics.prometheus import (
            MetricsEndpoint,  # prometheus-client and aiohttp load only when metrics are served
        )

        endpoint = MetricsEndpoint(self.cluster, self.groups, self.transactions)
        self.metrics_url = await endpoint.start(listener)
        self._metrics = endpoint
        return self.metrics_url

    async def stop(self) -> None:
        """In a cluster, move this broker's leaderships away first (controlled shutdown) while still serving; then
        stop accepting, end connections, flush and close every log."""
        if self._serving and self.cluster.membership is not None and self.config.controlled_shutdown_enable:
            from .controlled_shutdown import shut_down_controlled  # (cluster mode only)

            self._serving = False
            await shut_down_controlled(self.cluster.membership, self.config)
        self._serving = False
        self._closing = True
        if self._replication is not None:  # no more fetching or ISR changes; high watermarks saved
            replication, self._replication = self._replication, None
            self.cluster.replication = None
            await replication.stop()
        if self._security is not None:
            security, self._security = self._security, None
            await security.stop()
        if self.cluster.membership is not None:  # leave the cluster first: the others elect at once
            membership, self.cluster.membership = self.cluster.membership, None
            await membership.stop()
        if self._metrics is not None:
            await self._metrics.stop()
        for server in self._servers:
            server.close()
        for task in self._background:
            task.cancel()
        self.cluster.notify_data()  # long-polling fetches answer now
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, *self._background, return_exceptions=True)
        await self.groups.stop()
        self.transactions.stop()
        for server in self._servers:
            try:
                await server.wait_closed()
            except Exception:  # stopping goes on: the logs must still be flushed
                log.warning("a listener did not close cleanly", exc_info=True)
        self.cluster.close()  # flushes every log, with one sync of the filesystem
        log.info("broker stopped; all logs flushed")

    def _endpoint(self, name: str) -> Listener:
        return self._served[name].endpoint

    def listener_urls(self) -> list[str]:
        return [f"{b.name}://{b.host or '0.0.0.0'}:{b.port}" for b in self.bound]

    # -- connections ----------------------------------------------------------------------

    async def _on_connection(self, served: _Served, reader: asyncio.StreamReader,
                             writer: asyncio.StreamWriter) -> None:
        try:
            await self._serve_connection(served, reader, writer)
        except asyncio.CancelledError:
            pass  # shutdown cancels connections; asyncio would log a cancelled client task as an error

    def _open(self, served: _Served, writer: asyncio.StreamWriter, peer: str) -> _Connection:
        """The connection's shared state: its principal from the client certificate on an SSL listener, its
        SASL state on a SASL one. _Close when the certificate's subject maps to no principal."""
        sec = served.security
        principal = ANONYMOUS
        sasl = None
        if sec.mechanisms is not None:
            sasl = SaslSession(sec.name, sec.mechanisms, sec.mechanism_reauth_ms)
        elif sec.mapper is not None:
            try:
                principal = peer_principal(writer.get_extra_info("ssl_object"), sec.mapper) or ANONYMOUS
            except NoMatchingRule as exc:
                self.cluster.stats.authentication_done(sec.name, ok=False)
                log.warning("closing connection from %s on listener %s: %s", peer, sec.name, exc)
                raise _Close from None
            self.cluster.stats.authentication_done(sec.name, ok=True)
        return _Connection(peer, principal, self.access.acls_apply(principal), served.endpoint, sasl)

    async def _serve_connection(self, served: _Served, reader: asyncio.StreamReader,
                                writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        peer = writer.get_extra_info("peername")
        slot = self.limits.admit(peer, writer.transport)
        if slot is None:  # over max.connections or max.connections.per.ip (logged)
            writer.close()
            return
        self._connections.add(task)
        peer_str = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        answers = Answers(writer, peer_str, MAX_IN_FLIGHT)
        refused = False
        try:
            conn = self._open(served, writer, peer_str)
            conn.slot = slot
            if conn.sasl is not None:
                await self._authenticate(reader, writer, conn, served.security)
            await self._read_requests(reader, writer, answers, conn)
        except _Refused:
            refused = True
        except (_Close, ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass
        finally:
            # Let answers already under way go out, unless we are shutting down.
            if self._closing:
                answers.cancel()
            else:
                with contextlib.suppress(asyncio.CancelledError):
                    await answers.written()
                    if refused:
                        await _until_client_leaves(reader)
            writer.close()
            try:
                await writer.wait_closed()
            except Exception as exc:  # e.g. the client reset the connection: nothing left to do
                log.debug("connection from %s closed: %r", peer_str, exc)
            self._connections.discard(task)
            self.limits.release(slot)

    async def _authenticate(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, conn: _Connection,
                            sec: ListenerSecurity) -> None:
        """A SASL listener's exchange, before any other request is served: ApiVersions, SaslHandshake and
        SaslAuthenticate only (anything else closes the connection, as Kafka does), or bare tokens after a
        v0 handshake. Returns once authenticated, with the connection's principal set; _Close otherwise."""
        sasl = conn.sasl
        assert sasl is not None
        while sasl.principal is None:
            head = await reader.readexactly(4)
            (size,) = _SIZE.unpack(head)
            if size < 0 or size > sec.max_receive:
                log.warning("closing connection from %s: %d bytes before authentication (sasl.server.max.receive.size "
                            "%d)", conn.peer, size, sec.max_receive)
                raise _Close
            frame = await reader.readexactly(size)
            if sasl.raw:  # after a v0 handshake: a bare token in, the server's token (if any) out
                result = sasl.authenticate(frame)
                if sasl.failed is not None:
                    self.cluster.stats.authentication_done(sec.name, ok=False)
                    log.info("authentication failed on listener %s from %s: %s", sec.name, conn.peer, sasl.failed)
                    await asyncio.sleep(self.config.connection_failed_authentication_delay_ms / 1000)
                    raise _Close
                if result.completed:
                    self.cluster.stats.authentication_done(sec.name, ok=True)
                writer.write(_SIZE.pack(len(result.token)) + result.token)
                await writer.drain()
                continue
            view = memoryview(frame)
            try:
                api_key = parse_request_header(view).api_key
            except MalformedRequest as exc:
                log.warning("closing connection from %s: %s", conn.peer, exc)
                raise _Close from None
            if api_key not in _BEFORE_AUTHENTICATION:
                log.warning("closing connection from %s on SASL listener %s: API key %d before authentication",
                            conn.peer, sec.name, api_key)
                raise _Close
            pending, _ = self._start_request(view, conn)
            answer = pending.answer if isinstance(pending, Ready) else await pending
            if isinstance(pending, Ready) and pending.error is not None:
                raise pending.error
            if answer is not None:
                writer.write(answer)
                await writer.drain()
            if sasl.failed is not None:
                raise _Refused
        conn.principal = sasl.principal
        conn.authorizing = self.access.acls_apply(sasl.principal)

    async def _read_requests(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, answers: Answers,
                             conn: _Connection) -> None:
        """Serve the connection's requests: each read takes whatever has arrived, the requests whole in it are
        started in order, and the answers ready by then leave together (a frame cut by the read is completed
        with one exact read of what it misses)."""
        max_size = self.config.socket_request_max_bytes
        rest = b""
        while not answers.failed:
            data = await reader.read(_READ_SIZE)
            if not data:
                raise asyncio.IncompleteReadError(rest, None)
            if rest:
                data = rest + data
            view = memoryview(data)
            pos, end = 0, len(data)
            while end - pos >= 4:
                (size,) = _SIZE.unpack_from(data, pos)
                if size < 10 or size > max_size:
                    log.warning("closing connection from %s: request size %d outside 10..%d "
                                "(socket.request.max.bytes)", conn.peer, size, max_size)
                    raise _Close
                pos += 4
                if pos + size > end:  # the rest of this request has not arrived yet
                    answers.flush()
                    frame = memoryview(data[pos:] + await reader.readexactly(pos + size - end))
                    pos = end
                else:
                    frame = view[pos : pos + size]
                    pos += size
                await self._serve_request(frame, writer, answers, conn)
                if answers.failed:
                    return
            rest = data[pos:]
            answers.flush()

    async def _serve_request(self, frame: memoryview, writer: asyncio.StreamWriter, answers: Answers,
                             conn: _Connection) -> None:
        if conn.mute.until:  # a throttled client's next requests wait (Kafka mutes the channel)
            answers.flush()
            await conn.mute.wait()
        if len(answers) >= MAX_IN_FLIGHT:
            await answers.room()
        if frame[:2] == _FETCH_KEY and len(answers):  # one fetch answer held per connection, not 64
            await answers.written()
        if writer.transport.get_write_buffer_size() > _WRITE_BUFFERED:
            await writer.drain()  # the client reads its answers slower than it sends requests
        pending, serial = self._start_request(frame, conn)
        self.limits.started(conn.slot, pending)
        answers.add(pending)
        if serial:  # its throttle mutes the connection before the next request is read, as in Kafka
            answers.flush()
            if not isinstance(pending, Ready):
                await asyncio.wait((pending,))
            if conn.sasl is not None and conn.sasl.failed is not None:  # a re-authentication failed
                raise _Refused

    def _start_request(self, frame: memoryview, conn: _Connection) -> tuple[Pending, bool]:
        """The request's handling, and whether it must finish before the next request is read: the produce
        and fetch requests of a client with a byte-rate quota. Others are read ahead (pipelined)."""
        received = time.perf_counter()  # Kafka's TotalTimeMs starts once the request is read
        peer = conn.peer
        try:
            header = parse_request_header(frame)
        except MalformedRequest as exc:
            log.warning("closing connection from %s: %s", peer, exc)
            raise _Close from None
        spec = apis.REGISTRY.get(header.api_key)
        if spec is None or request_class(header.api_key) is None:
            log.warning("closing connection from %s: unsupported API key %d (client %s)", peer, header.api_key,
                        header.client_id)
            raise _Close
        if not spec.min_version <= header.api_version <= spec.max_version:
            if header.api_key == API_VERSIONS:
                answer = encode_unsupported_api_versions(header.correlation_id, (spec.min_version, spec.max_version))
                return Ready(answer), False
            cls = request_class(header.api_key)
            log.warning("closing connection from %s: %s v%d is not supported (served: %d-%d)", peer,
                        cls.name if cls is not None else f"API {header.api_key}", header.api_version,
                        spec.min_version, spec.max_version)
            raise _Close
        request = decode_fast(header.api_key, header.api_version, frame, header.body_offset)
        try:
            if request is None:  # every API and version the hot paths do not take, and anything irregular
                request = decode_request(header, frame)
        except MalformedRequest as exc:
            log.warning("closing connection from %s: %s", peer, exc)
            raise _Close from None
        throttler = self.access.throttler_for(header.api_key, conn.principal, header.client_id or "")
        serial = throttler is not None
        if conn.sasl is not None:
            if header.api_key == SASL_HANDSHAKE or header.api_key == SASL_AUTHENTICATE:
                serial = True  # a re-authentication: settled before the next request is read
            elif conn.sasl.expired:  # KIP-368: past its session's lifetime only a re-authentication is served
                log.info("closing connection from %s: its SASL session expired (connections.max.reauth.ms)", peer)
                raise _Close
        pending = start_eagerly(self._handle(spec, header, request, conn, received, len(frame) + 4, throttler), peer)
        return pending, serial

    async def _handle(self, spec: apis.ApiSpec, header: RequestHeader, request: Any, conn: _Connection,
                      received: float, size: int, throttler: Throttler | None) -> bytes | bytearray | None:
        ctx = apis.RequestContext(self.cluster, header, conn.peer, self.services, self._is_closing,
                                  principal=conn.principal, mute=conn.extend_mute, request_size=size,
                                  authorizing=conn.authorizing, throttler=throttler, endpoint=conn.endpoint,
                                  sasl=conn.sasl)
        body = await spec.handler(ctx, request)
        answer: bytes | bytearray | None = None
        if body is not None:
            answer = encode_fast(header.api_key, header.api_version, header.correlation_id, body)
            if answer is None:
                answer = encode_response(ctx.response(body), header.correlation_id)
        self.cluster.stats.request_done(header.api_key, header.api_version, time.perf_counter() - received)
        return answer
