"""pgbench against Freshet: `pgbench -i` (drop, create, client-side COPY
with FREEZE, VACUUM, primary keys added to filled tables), then scripts in
each query mode (`simple`, `extended`, `prepared`), checked by the
invariants of the bank the scripts keep: money moves, none appears."""

import glob
import re
import shutil
import subprocess

import psycopg
import pytest


def _pgbench() -> str:
    found = shutil.which("pgbench") or next(
        iter(sorted(glob.glob("/usr/lib/postgresql/*/bin/pgbench"))), None
    )
    assert found, "pgbench is not installed (Debian: postgresql-client)"
    return found


def _run(conninfo: str, *args: str) -> str:
    parts = dict(p.split("=", 1) for p in conninfo.split())
    proc = subprocess.run(
        [
            _pgbench(),
            "-h", parts["host"],
            "-p", parts["port"],
            "-U", parts["user"],
            *args,
            parts["dbname"],
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    return out


def _stat(out: str, name: str) -> int:
    m = re.search(rf"{re.escape(name)}: (\d+)", out)
    assert m, out
    return int(m.group(1))


# One account per transaction, so the two clients rarely meet; when they
# do, COMMIT fails with 40001 and pgbench retries.
TRANSFER = """\
\\set aid random(1, 100000)
\\set delta random(-5000, 5000)
BEGIN;
UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (1, 1, :aid, :delta, CURRENT_TIMESTAMP);
END;
"""


@pytest.fixture(scope="module")
def initialized(conninfo):
    out = _run(conninfo, "-i", "-s", "1")
    assert "done in" in out, out
    return conninfo


def test_init_loads_and_keys_the_tables(initialized):
    with psycopg.connect(initialized, autocommit=True) as c:
        counts = {
            t: c.execute(f"SELECT count(*) FROM pgbench_{t}").fetchone()[0]
            for t in ("branches", "tellers", "accounts", "history")
        }
        assert counts == {"branches": 1, "tellers": 10, "accounts": 100000, "history": 0}
        keys = c.execute(
            "SELECT conrelid::regclass::text, pg_get_constraintdef(oid) FROM pg_constraint "
            "WHERE contype = 'p' AND conrelid::regclass::text LIKE 'pgbench%' ORDER BY 1"
        ).fetchall()
        assert keys == [
            ("pgbench_accounts", "PRIMARY KEY (aid)"),
            ("pgbench_branches", "PRIMARY KEY (bid)"),
            ("pgbench_tellers", "PRIMARY KEY (tid)"),
        ]
        # The key added after the load holds for later writes.
        with pytest.raises(psycopg.errors.UniqueViolation):
            c.execute("INSERT INTO pgbench_accounts (aid, bid, abalance) VALUES (7, 1, 0)")


@pytest.mark.parametrize("mode", ["simple", "extended", "prepared"])
def test_transfer_script_in_each_query_mode(initialized, mode, tmp_path):
    script = tmp_path / "transfer.sql"
    script.write_text(TRANSFER)
    with psycopg.connect(initialized, autocommit=True) as c:
        before = c.execute("SELECT count(*) FROM pgbench_history").fetchone()[0]
    out = _run(
        initialized, "-n", "-M", mode, "-c", "2", "-t", "15", "--max-tries", "100",
        "-f", str(script),
    )
    assert _stat(out, "number of transactions actually processed") == 30, out
    assert _stat(out, "number of failed transactions") == 0, out
    with psycopg.connect(initialized, autocommit=True) as c:
        after = c.execute("SELECT count(*) FROM pgbench_history").fetchone()[0]
        assert after - before == 30
        accounts, history = c.execute(
            "SELECT (SELECT sum(abalance) FROM pgbench_accounts), "
            "(SELECT sum(delta) FROM pgbench_history)"
        ).fetchone()
        assert accounts == history


def test_builtin_tpcb_and_select_only(initialized):
    # Without -n, pgbench vacuums branches and tellers and truncates the
    # history first.
    out = _run(initialized, "-M", "prepared", "-c", "1", "-t", "10")
    assert _stat(out, "number of transactions actually processed") == 10, out
    with psycopg.connect(initialized, autocommit=True) as c:
        branches, tellers, history, n = c.execute(
            "SELECT (SELECT sum(bbalance) FROM pgbench_branches), "
            "(SELECT sum(tbalance) FROM pgbench_tellers), "
            "(SELECT sum(delta) FROM pgbench_history), "
            "(SELECT count(*) FROM pgbench_history)"
        ).fetchone()
        assert n == 10
        assert branches == tellers == history
    out = _run(initialized, "-S", "-M", "extended", "-c", "2", "-t", "20")
    assert _stat(out, "number of transactions actually processed") == 40, out
