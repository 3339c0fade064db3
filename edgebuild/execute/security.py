"""Who may use a Dask cluster: mutual TLS, and no plain text off this machine.

Dask's protocol carries pickles: whoever can talk to a scheduler can run code in its
workers, and through `run_on_scheduler` or a task's result, in the client. So
(docs/distributed.md, docs/security.md):

    local:N          TLS with a certificate made for this run only, kept in memory;
                     no HTTP server (no dashboard, no /health, no /json)
    tls://HOST:PORT  mutual TLS: --tls-ca/--tls-cert/--tls-key, or Dask's
                     distributed.comm.tls config
    tcp://HOST:PORT  only to a loopback address, unless --insecure says the network
                     is private (the scheduler is then open to anyone on it)
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgebuild.errors import EdgebuildError

_ADDRESS = re.compile(r"^(tcp|tls|ucx)://(\[[^\]]+\]|[^\s/:]+):(\d+)$")


@dataclass(frozen=True)
class TlsFiles:
    """The PEM files of one side of mutual TLS: the CA that signs every member of the
    cluster, this member's certificate, and its key (None: inside the certificate file)."""

    ca: Path
    cert: Path
    key: Path | None = None

    @classmethod
    def from_args(cls, ca: Path | None, cert: Path | None, key: Path | None) -> TlsFiles | None:
        if ca is None and cert is None and key is None:
            return None
        if ca is None or cert is None:
            raise EdgebuildError("--tls-ca and --tls-cert go together (and --tls-key, unless "
                                 "the key is in the certificate file)",
                                 "docs/distributed.md: a cluster with mutual TLS")
        for flag, path in (("--tls-ca", ca), ("--tls-cert", cert), ("--tls-key", key)):
            if path is not None and not path.is_file():
                raise EdgebuildError(f"{flag} {path}: no such file")
        return cls(ca, cert, key)


def is_loopback(host: str) -> bool:
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name: it may resolve anywhere


def check_address(address: str, tls: TlsFiles | None, insecure: bool) -> None:
    """Refuse a scheduler address this machine must not talk to as asked (a usage error)."""
    match = _ADDRESS.match(address)
    if match is None:
        raise EdgebuildError(f"{address!r}: not a scheduler address",
                             "tls://HOST:PORT (or tcp://127.0.0.1:PORT on this machine)")
    scheme, host = match.group(1), match.group(2)
    if scheme == "tls":
        if tls is None and not _configured_tls():
            raise EdgebuildError(
                f"{address}: TLS needs this machine's certificate",
                "give --tls-ca, --tls-cert and --tls-key (or set Dask's "
                "distributed.comm.tls config)")
        return
    if tls is not None:
        raise EdgebuildError(f"--tls-* were given, but {address} is not a tls:// address",
                             f"use tls://{address.split('://', 1)[1]}")
    if not is_loopback(host) and not insecure:
        raise EdgebuildError(
            f"refusing plain {scheme}:// to {host}: anyone who can reach that scheduler "
            "can run code in its workers and in this process (Dask sends pickles), and "
            "every model and dataset crosses the network unencrypted",
            f"use tls://{address.split('://', 1)[1]} with --tls-ca/--tls-cert/--tls-key, or "
            "--insecure on a network only you can reach (docs/distributed.md)")


def _configured_tls() -> bool:
    import dask

    return bool(dask.config.get("distributed.comm.tls.ca-file", None))


def client_security(address: str, tls: TlsFiles | None) -> Any:
    """The `distributed.Security` a client connects to `address` with."""
    from distributed import Security

    if tls is not None:
        return Security(tls_ca_file=str(tls.ca), tls_client_cert=str(tls.cert),
                        tls_client_key=str(tls.key) if tls.key else None,
                        require_encryption=True)
    return Security()  # Dask's config (distributed.comm.tls.*), or plain loopback tcp


def worker_security(address: str, tls: TlsFiles | None) -> Any:
    """The `distributed.Security` a worker joins `address` with."""
    from distributed import Security

    if tls is not None:
        return Security(tls_ca_file=str(tls.ca), tls_worker_cert=str(tls.cert),
                        tls_worker_key=str(tls.key) if tls.key else None,
                        require_encryption=True)
    return Security()


# The HTTP server Dask's scheduler always starts: on a random loopback port (not :8787,
# where another cluster's dashboard may be), no dashboard, until close_http stops it.
LOOPBACK_HTTP: dict[str, object] = {"dashboard": False, "dashboard_address": "127.0.0.1:0"}
# Dask's HTTP routes (dashboard, /json, /info, /health, prometheus, the proxy): none.
NO_HTTP_ROUTES: dict[str, list[str]] = {"distributed.scheduler.http.routes": [],
                  "distributed.worker.http.routes": []}


def close_http(cluster: Any, client: Any) -> None:
    """Stop the HTTP servers a scheduler and its workers start even without a dashboard.

    distributed (2026.8) always starts the scheduler's HTTP server, on :8787 when no
    dashboard address is given, and each worker's on a random port: `dashboard=False`
    only leaves the dashboard's pages out of it. Nothing of edgebuild's uses them. A
    worker plugin stops each worker's, also a worker's that its nanny restarts.
    """
    server = getattr(cluster.scheduler, "http_server", None)
    if server is not None:
        server.stop()
    from distributed import WorkerPlugin

    class NoHttp(WorkerPlugin):  # type: ignore[misc]
        name = "edgebuild-no-http"

        def setup(self, worker: Any) -> None:
            http = getattr(worker, "http_server", None)
            if http is not None:
                http.stop()

    client.register_plugin(NoHttp())
