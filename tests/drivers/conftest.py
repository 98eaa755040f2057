"""Starts a real `freshet` server for the driver tests.

The binary is `$FRESHET_BIN` (default: `target/debug/freshet` under
`$CARGO_TARGET_DIR` or the repository), on a fresh temp data directory and
free loopback ports.
"""

import os
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg
import pytest

REPO = Path(__file__).resolve().parents[2]


def _binary() -> str:
    if os.environ.get("FRESHET_BIN"):
        return os.environ["FRESHET_BIN"]
    target = os.environ.get("CARGO_TARGET_DIR", str(REPO / "target"))
    return str(Path(target) / "debug" / "freshet")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def conninfo():
    """A running server's connection string; the server stops after the module."""
    with tempfile.TemporaryDirectory(prefix="freshet-drivers-") as data:
        port = _free_port()
        proc = subprocess.Popen(
            [
                _binary(),
                "--data-dir", data,
                "--listen", f"127.0.0.1:{port}",
                "--http-listen", f"127.0.0.1:{_free_port()}",
                "--log-filter", "warn",
            ],
        )
        try:
            deadline = time.monotonic() + 60
            while True:
                assert proc.poll() is None, "freshet exited during startup"
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    assert time.monotonic() < deadline, "freshet did not start"
                    time.sleep(0.05)
            yield f"host=127.0.0.1 port={port} user=freshet dbname=freshet"
        finally:
            proc.terminate()
            proc.wait(timeout=30)


@pytest.fixture
def conn(conninfo):
    with psycopg.connect(conninfo, autocommit=True) as c:
        yield c
