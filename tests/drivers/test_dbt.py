"""dbt-postgres against Freshet: the project in tests/dbt/project (seeds,
a view, a table, two incremental models — merge by key, which stages rows
in a temporary table, and append — a materialized_view model and data
tests), `dbt seed && dbt run && dbt test`, then new data and the same
again, checked against what the models must hold."""

import os
import shutil
import subprocess
import time
from decimal import Decimal
from pathlib import Path

import psycopg
import pytest

REPO = Path(__file__).resolve().parents[2]


def _dbt() -> str:
    if os.environ.get("FRESHET_DBT"):
        return os.environ["FRESHET_DBT"]
    target = os.environ.get("CARGO_TARGET_DIR", str(REPO / "target"))
    dbt = Path(target) / "dbt-venv" / "bin" / "dbt"
    assert dbt.exists(), f"{dbt} is missing (scripts/test.sh installs dbt-postgres there)"
    return str(dbt)


@pytest.fixture(scope="module")
def project(conninfo, tmp_path_factory):
    parts = dict(p.split("=", 1) for p in conninfo.split())
    root = tmp_path_factory.mktemp("dbt")
    shutil.copytree(REPO / "tests" / "dbt" / "project", root / "project")
    (root / "profiles.yml").write_text(
        "freshet:\n"
        "  target: dev\n"
        "  outputs:\n"
        "    dev:\n"
        "      type: postgres\n"
        f"      host: {parts['host']}\n"
        f"      port: {parts['port']}\n"
        f"      user: {parts['user']}\n"
        "      password: ''\n"
        f"      dbname: {parts['dbname']}\n"
        "      schema: public\n"
        "      threads: 2\n"
    )
    return root


def dbt(project, *args):
    run = subprocess.run(
        [_dbt(), *args, "--profiles-dir", str(project), "--project-dir", str(project / "project")],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "DBT_SEND_ANONYMOUS_USAGE_STATS": "false"},
    )
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout


def test_seed_run_test_and_again_with_new_data(project, conninfo):
    assert "PASS=2" in dbt(project, "seed")
    assert "PASS=5" in dbt(project, "run")
    assert "PASS=10" in dbt(project, "test")
    with psycopg.connect(conninfo, autocommit=True) as c:
        kinds = dict(
            c.execute(
                "SELECT relname, relkind FROM pg_class WHERE relname IN "
                "('stg_orders', 'customer_totals', 'orders_incremental', 'orders_appended', "
                "'status_counts')"
            ).fetchall()
        )
        assert kinds == {
            "stg_orders": "v",
            "customer_totals": "r",
            "orders_incremental": "r",
            "orders_appended": "r",
            "status_counts": "m",
        }
        totals = c.execute(
            "SELECT customer, country, orders, total FROM customer_totals ORDER BY customer"
        ).fetchall()
        assert totals == [
            ("ada", "uk", 2, Decimal("42.50")),
            ("bob", "us", 2, Decimal("27.24")),
            ("cy", "fr", 1, Decimal("5.00")),
        ]
        # New data: the materialized view follows at once, without dbt.
        c.execute(
            "INSERT INTO raw_orders VALUES (6, 'cy', 8.00, 'shipped', '2024-03-05'), "
            "(3, 'ada', 31.00, 'returned', '2024-03-05')"
        )
        c.execute("DELETE FROM raw_orders WHERE id = 3 AND status = 'shipped'")
        assert c.execute(
            "SELECT n FROM status_counts WHERE status = 'shipped'"
        ).fetchone() == (2,)

    # Again: the view and table are rebuilt, the incremental models take
    # the new rows (merge replaces order 3, append adds 6), the
    # materialized view is kept.
    assert "PASS=5" in dbt(project, "run")
    assert "PASS=10" in dbt(project, "test")
    with psycopg.connect(conninfo, autocommit=True) as c:
        merged = c.execute(
            "SELECT id, status FROM orders_incremental ORDER BY id"
        ).fetchall()
        assert merged == [
            (1, "shipped"), (2, "placed"), (3, "returned"), (4, "returned"),
            (5, "placed"), (6, "shipped"),
        ]
        appended = [r[0] for r in c.execute("SELECT id FROM orders_appended ORDER BY id")]
        assert appended == [1, 2, 3, 4, 5, 6]
        counts = c.execute(
            "SELECT status, n FROM status_counts ORDER BY status"
        ).fetchall()
        assert counts == [("placed", 2), ("returned", 2), ("shipped", 2)]
        # dbt's sessions are over: their temporary tables went with them.
        deadline = time.monotonic() + 10
        while c.execute(
            "SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'pg_temp_%'"
        ).fetchone()[0]:
            assert time.monotonic() < deadline, "temporary schemas outlived their sessions"
            time.sleep(0.1)
