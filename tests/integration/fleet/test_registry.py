"""publish → promote → agent through a real OCI registry: Debian's `docker-registry`
(CNCF distribution 2.8) started on 127.0.0.1 by the test, with its own config (the
packaged default listens on every interface). Skipped, with the reason, where the
package is absent (scripts/setup.sh installs it). Also: the agent works from a layout
folder with no network at all (`unshare -n`)."""

from __future__ import annotations

import http.server
import shutil
import socket
import subprocess
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from edgebuild.core.manifest import read_manifest
from edgebuild.errors import ExitCode
from tests.conftest import edgebuild
from tests.integration.fleet.conftest import active_target, ok, state

pytestmark = pytest.mark.onnxruntime
pytest.importorskip("onnxruntime", reason="the tiny build and the model check need onnxruntime")
def agent(source: str, root: Path, trusted: Path, target: str = "host-cpu") -> Any:
    return edgebuild("agent", "--from", source, "--channel", "production", "--target", target,
                     "--root", str(root), "--trust", str(trusted))


@pytest.fixture
def released(build: Path, registry: tuple[str, Path],
             keys: dict[str, Path]) -> str:
    url, _ = registry
    repository = f"{url}/fleet/tiny"
    text = ok(edgebuild("publish", str(build), "--to", repository, "--version", "1.0.0"))
    assert "2 target(s)" in text
    again = ok(edgebuild("publish", str(build), "--to", repository, "--version", "1.0.0"))
    assert "0 new blob(s)" in again  # idempotent: every blob and manifest is there
    ok(edgebuild("promote", f"{repository}:1.0.0", "production", "--key",
                 str(keys["release"])))
    return repository


def test_agents_pull_their_variant_from_a_registry(released: str, keys: dict[str, Path],
                                                    tmp_path: Path) -> None:
    for target in ("host-cpu", "edge-box"):
        root = tmp_path / target
        text = ok(agent(released, root, keys["trusted"], target))
        assert "1.0.0 activated (sequence " in text and "ran one inference" in text
        assert active_target(root) == target


@pytest.mark.slow
def test_a_blob_the_registry_serves_corrupted_is_refused(
        build: Path, released: str, registry: tuple[str, Path],
        keys: dict[str, Path], tmp_path: Path) -> None:
    _, data = registry
    model = read_manifest(build / "artifacts" / "host-cpu" / "manifest.json").files[0]
    stored = next(data.rglob(f"blobs/sha256/{model.sha256[:2]}/{model.sha256}/data"))
    corrupted = bytearray(stored.read_bytes())
    corrupted[10] ^= 0x01
    stored.write_bytes(bytes(corrupted))  # distribution serves it as it is
    root = tmp_path / "device"
    text = ok(agent(released, root, keys["trusted"]), ExitCode.STAGE_FAILED)
    assert "does not match its digest and size" in text
    assert not (root / "current").exists() and state(root)["active"] is None
    assert not list((root / "downloads").glob("*.part"))  # wrong bytes are not resumed


class CuttingProxy(http.server.ThreadingHTTPServer):
    """Forwards to the registry; the first download of `digest` is cut after `keep`
    bytes (headers promise the whole blob, then the connection closes)."""

    def __init__(self, upstream: str, digest: str, keep: int) -> None:
        self.upstream, self.digest, self.keep = upstream, digest, keep
        self.cut = False
        self.ranges: list[str] = []
        super().__init__(("127.0.0.1", 0), _Forward)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Forward(http.server.BaseHTTPRequestHandler):
    server: CuttingProxy

    def do_GET(self) -> None:  # http.server's name
        headers = {k: v for k, v in self.headers.items() if k.lower() in ("accept", "range")}
        request = urllib.request.Request(self.server.upstream + self.path, headers=headers)
        blob = self.path.endswith(f"/blobs/{self.server.digest}")
        if blob:
            self.server.ranges.append(self.headers.get("Range", ""))
        try:
            reply = urllib.request.urlopen(request, timeout=30)
        except urllib.error.HTTPError as exc:
            reply = exc
        body = reply.read()
        self.send_response(reply.status if hasattr(reply, "status") else reply.code)
        for key, value in reply.headers.items():
            if key.lower() not in ("connection", "transfer-encoding", "date", "server"):
                self.send_header(key, value)
        self.end_headers()
        if blob and not self.server.cut:
            self.server.cut = True
            self.wfile.write(body[:self.server.keep])
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.slow
def test_an_interrupted_download_resumes(build: Path, released: str,
                                         keys: dict[str, Path], tmp_path: Path) -> None:
    built = read_manifest(build / "artifacts" / "host-cpu" / "manifest.json")
    model = built.files[0]
    upstream, _, repository = released.partition("/fleet")
    proxy = CuttingProxy(upstream, f"sha256:{model.sha256}", keep=model.size // 2)
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    try:
        source = f"{proxy.url}/fleet{repository}"
        root = tmp_path / "device"
        cut = ok(agent(source, root, keys["trusted"]), ExitCode.STAGE_FAILED)
        assert f"interrupted after {model.size // 2} of {model.size} bytes" in cut
        assert not (root / "current").exists()
        partial = root / "downloads" / f"{model.sha256}.part"
        assert partial.stat().st_size == model.size // 2
        ok(agent(source, root, keys["trusted"]))
        assert proxy.ranges == ["", f"bytes={model.size // 2}-"]
        active = state(root)["active"]
        layers = sum(d.size for d in _layers(build))
        # Counted: everything but the half of the model that arrived before the cut.
        assert active["downloaded_bytes"] == layers - model.size // 2
        assert not partial.exists() and active_target(root) == "host-cpu"
    finally:
        proxy.shutdown()
        proxy.server_close()


def _layers(build: Path) -> list[Any]:
    """The host-cpu manifest's layers, as published (files, manifest, report slice)."""
    from edgebuild.fleet.layout import Layout
    from edgebuild.fleet.publish import publish

    layout = Layout(build.parent / "layout-for-sizes")
    done = publish(build, layout, "sizes")
    return list(layout.manifest(done.targets["host-cpu"]).layers)


@pytest.mark.slow
def test_the_agent_needs_no_network_for_a_layout(build: Path, keys: dict[str, Path],
                                                  tmp_path: Path) -> None:
    probe = subprocess.run(["unshare", "-n", "true"], capture_output=True, check=False) \
        if shutil.which("unshare") else None
    if probe is None or probe.returncode != 0:
        pytest.skip("unshare -n is not available here (needs user or network namespaces)")
    layout = tmp_path / "layout"
    ok(edgebuild("publish", str(build), "--to", f"oci-layout:{layout}", "--version", "1.0.0"))
    ok(edgebuild("promote", f"oci-layout:{layout}:1.0.0", "production", "--key",
                 str(keys["release"])))
    import sys

    done = subprocess.run(
        ["unshare", "-n", sys.executable, "-m", "edgebuild", "agent", "--from",
         f"oci-layout:{layout}", "--channel", "production", "--target", "host-cpu",
         "--root", str(tmp_path / "device"), "--trust", str(keys["trusted"])],
        capture_output=True, text=True, check=False, timeout=600)
    assert "1.0.0 activated" in ok(done)
    assert active_target(tmp_path / "device") == "host-cpu"
