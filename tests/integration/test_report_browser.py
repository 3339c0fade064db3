"""report.html in a real browser: headless Chromium renders a real run's page, offline.

The page must load nothing from the network. Chromium records every URL request in
its NetLog (`--log-net-log`); requests a page makes carry the page's origin as
initiator, the browser's own background requests (update checks) carry "not an
origin". The check is shown to work on a control page with two remote images.
All host names resolve to nothing (`--host-resolver-rules`), so no test leaks out.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import edgebuild, make_tiny_onnx

CHROMIUM = Path("/usr/bin/chromium")

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(),
                       reason=f"{CHROMIUM} not found: apt-get install chromium "
                              "(scripts/setup.sh installs it)"),
]

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--host-resolver-rules=MAP * ~NOTFOUND"]

RECIPE = """\
name: tiny-html
model: {onnx: tiny.onnx}
inputs: [{name: x, shape: [1, 4]}]
outputs: [y]
datasets:
  samples: {kind: npz, path: samples.npz, labels: y}
passes:
  - onnx-optimize
targets:
  host-cpu:
    measure: {warmup_iterations: 5, min_iterations: 300, max_busy_share: null, min_seconds: 0,
              profile: true}
    gates:
      accuracy: {dataset: samples, min_top1_agreement: 99}
      latency: {budget_ms: 1000}
      size: {max_mb: 1}
      memory: {max_mb: 1000}
  android:                      # TFLite timed on this host: LiteRT in the measuring process
    options: {latency_on: host}
    measure: {warmup_iterations: 5, min_iterations: 50, max_busy_share: null, min_seconds: 0,
              threads: 1}
    gates:
      latency: {budget_ms: 1000}
      memory: {max_mb: 1000}
  host-cpu-tight:
    profile: host-cpu
    measure: {warmup_iterations: 5, min_iterations: 300, max_busy_share: null, min_seconds: 0}
    gates:
      accuracy: {dataset: samples, min_top1_agreement: 99}
      latency: {percentile: 90, budget_ms: 0.000001}
      size: {max_mb: 1}
"""


def chromium(url: str, *extra: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """Run headless Chromium on `url`; returns the process and the URLs the page requested."""
    with tempfile.TemporaryDirectory() as profile:
        netlog = Path(profile) / "netlog.json"
        proc = subprocess.run(
            [str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}/data",
             f"--log-net-log={netlog}", *extra, url],
            capture_output=True, text=True, timeout=120, check=False)
        return proc, page_requests(netlog)


def page_requests(netlog: Path) -> list[str]:
    """URLs of the non-file requests a page started (not Chromium's own background
    traffic, which has no initiating origin)."""
    text = netlog.read_text().rstrip()
    try:
        log: dict[str, Any] = json.loads(text)
    except json.JSONDecodeError:  # a log cut at exit lacks its closing brackets
        log = json.loads(text.rstrip(",") + "]}")
    names = {number: name for name, number in log["constants"]["logEventTypes"].items()}
    found = set()
    for event in log["events"]:
        params = event.get("params", {})
        if (names.get(event["type"]) == "URL_REQUEST_START_JOB" and "url" in params
                and params.get("initiator") != "not an origin"
                and not params["url"].startswith(("file:", "data:", "blob:"))):
            found.add(params["url"])
    return sorted(found)


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """report.html of a real two-target run (one target fails its latency budget)."""
    import numpy as np

    project = tmp_path_factory.mktemp("project")
    make_tiny_onnx(project / "tiny.onnx")
    rng = np.random.default_rng(0)
    np.savez(project / "samples.npz", x=rng.standard_normal((16, 4)).astype(np.float32),
             y=rng.integers(0, 3, 16))
    (project / "tiny.yaml").write_text(textwrap.dedent(RECIPE))
    out = project / "out"
    result = edgebuild("run", "-q", str(project / "tiny.yaml"), "--out", str(out),
                       "--cache-dir", str(project / "cache"))
    assert result.returncode == 1, result.stdout + result.stderr  # the tight budget fails
    assert "report.html" in result.stdout
    return out / "report.html"


def test_the_network_check_catches_a_remote_reference(tmp_path: Path) -> None:
    control = tmp_path / "control.html"
    control.write_text('<!DOCTYPE html><html><body><p>control</p>'
                       '<img src="http://edgebuild-remote.invalid/a.png">'
                       '<img src="https://cdn.example.com/b.png"></body></html>')
    proc, requested = chromium(control.as_uri(), "--dump-dom")
    assert "control" in proc.stdout, proc.stderr[-2000:]
    assert requested == ["http://edgebuild-remote.invalid/a.png",
                         "https://cdn.example.com/b.png"]


@pytest.mark.slow
def test_report_renders_offline(page: Path, tmp_path: Path) -> None:
    proc, requested = chromium(page.as_uri(), "--dump-dom")
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = proc.stdout
    assert requested == []
    assert "host-cpu-tight" in dom and "Build graph" in dom
    assert dom.count("<svg") >= 4  # trade-off, two latency plots, build graph
    # host-cpu's profile (the tiny model's MatMul and Relu) and its peak memory
    assert "Where the time and memory go" in dom and "runtime peak" in dom
    assert "<code>MatMul</code>" in dom
    # android's peak memory too: TFLite on this host is measured as ONNX Runtime is.
    android = dom.split('<section class="target" id="t-android"', 1)[1].split("</section>")[0]
    assert "runtime peak" in android and "memory" in android
    assert "<script" not in dom


@pytest.mark.slow
def test_report_screenshot(page: Path, tmp_path: Path,
                           record_property: Callable[[str, object], None]) -> None:
    from PIL import Image

    shot = tmp_path / "report.png"
    proc, requested = chromium(page.as_uri(), f"--screenshot={shot}", "--window-size=1280,2000")
    assert shot.is_file(), proc.stderr[-2000:]
    assert requested == []
    size = shot.stat().st_size
    record_property("screenshot_bytes", size)
    assert size > 20_000
    with Image.open(shot) as image:
        assert image.size == (1280, 2000)
        colours = image.convert("RGB").getcolors(maxcolors=1 << 16)
        assert colours is None or len(colours) > 50  # None: more than 65,536 colours
