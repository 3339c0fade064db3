"""Which cluster addresses edgebuild talks to, and how (issue 28.5): no plain text off this
machine unless --insecure, TLS only with this machine's certificate. No cluster needed."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgebuild.errors import EdgebuildError, ExitCode
from edgebuild.execute.security import TlsFiles, check_address, is_loopback
from tests.conftest import edgebuild


@pytest.mark.parametrize("host", ["127.0.0.1", "127.3.4.5", "localhost", "[::1]"])
def test_plain_tcp_to_this_machine_is_allowed(host: str) -> None:
    assert is_loopback(host)
    check_address(f"tcp://{host}:8786", None, insecure=False)


@pytest.mark.parametrize("host", ["10.0.0.5", "0.0.0.0", "scheduler", "build.example.org"])
def test_plain_tcp_to_another_machine_needs_insecure(host: str) -> None:
    with pytest.raises(EdgebuildError, match="refusing plain tcp://") as caught:
        check_address(f"tcp://{host}:8786", None, insecure=False)
    assert caught.value.exit_code is ExitCode.USAGE
    assert "--tls-ca" in caught.value.hint and "--insecure" in caught.value.hint
    check_address(f"tcp://{host}:8786", None, insecure=True)


def test_tls_needs_a_certificate_and_tls_files_need_tls(tmp_path: Path) -> None:
    with pytest.raises(EdgebuildError, match="TLS needs this machine's certificate"):
        check_address("tls://10.0.0.5:8786", None, insecure=False)
    pem = tmp_path / "a.pem"
    pem.write_text("x")
    tls = TlsFiles.from_args(pem, pem, None)
    check_address("tls://10.0.0.5:8786", tls, insecure=False)
    with pytest.raises(EdgebuildError, match="not a tls:// address"):
        check_address("tcp://127.0.0.1:8786", tls, insecure=False)
    with pytest.raises(EdgebuildError, match="go together"):
        TlsFiles.from_args(None, pem, pem)
    with pytest.raises(EdgebuildError, match="no such file"):
        TlsFiles.from_args(pem, tmp_path / "missing.pem", None)


def test_the_cli_refuses_plain_tcp_off_loopback_before_anything_runs() -> None:
    for args in (["run", "recipes/quickstart.yaml", "--cluster", "tcp://10.9.8.7:8786"],
                 ["worker", "tcp://10.9.8.7:8786"],
                 ["worker", "tls://10.9.8.7:8786"]):
        result = edgebuild(*args)
        assert result.returncode == 2, result.stderr
        assert len(result.stderr.strip().splitlines()) == 2, result.stderr  # message + hint
        assert "refusing plain tcp://" in result.stderr or "TLS needs" in result.stderr


def test_dask_warnings_a_retry_makes_good_stay_off_the_terminal() -> None:
    """After a worker death the executor runs the stage again and sends its inputs
    again: Dask's own "Restarting worker" and "lose scattered data" are not problems."""
    import logging

    from edgebuild.cli import _DaskOneLine
    from edgebuild.execute.logs import _OneLine

    def record(name: str, msg: str) -> logging.LogRecord:
        return logging.LogRecord(name, logging.WARNING, __file__, 1, msg, (), None)

    for keep in (_DaskOneLine(), _OneLine()):
        assert not keep.filter(record("distributed.nanny", "Restarting worker"))
        assert not keep.filter(record(
            "distributed.scheduler", "Removing worker %r caused the cluster to lose "
            "scattered data, which can't be recovered: {'f'}"))
        assert keep.filter(record("distributed.worker", "Compute Failed"))
        assert keep.filter(record("edgebuild", "Restarting worker"))


def test_a_local_cluster_puts_daskss_http_server_on_a_random_loopback_port(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Dask's scheduler always starts an HTTP server (on :8787 by default, until
    close_http stops it): a local run asks for a random loopback port, no dashboard."""
    distributed = pytest.importorskip("distributed")
    from edgebuild.execute.cluster import ClusterSpec, DaskExecutor

    asked: dict[str, object] = {}

    def fake(**kwargs: object) -> None:
        asked.update(kwargs)
        raise OSError("not started in this test")

    monkeypatch.setattr(distributed, "LocalCluster", fake)
    with pytest.raises(EdgebuildError, match="not started in this test"):
        DaskExecutor(ClusterSpec.parse("local:1"))._start()
    assert asked["scheduler_kwargs"] == {"dashboard": False,
                                         "dashboard_address": "127.0.0.1:0"}
