"""GUI/BI tools' catalog queries through psycopg 3: replays, in order and on
one connection, the SQL that DBeaver, Metabase and Grafana send to a
PostgreSQL server when they connect and while they browse a database
(gui_startup/<tool>.sql, transcribed from each tool's public sources; the
comment above each statement names the file it comes from).

Every statement must run without an error; a test fails listing every
failing statement with its error, not only the first. Results are not
compared, except where a tool breaks on an empty answer.

In the .sql files statements are separated by a line holding only ";" and
lines starting with "--" are comments. Bind parameters a tool fills with
object ids it read earlier are written {{name}} and replaced with the ids the
server reports (see PLACEHOLDERS).
"""

import re
from pathlib import Path

import psycopg
import pytest

DIR = Path(__file__).parent / "gui_startup"
TOOLS = ["dbeaver", "metabase", "grafana"]

SETUP = [
    "CREATE TABLE gui_orders (id bigserial PRIMARY KEY, customer text NOT NULL,"
    " amount numeric(10,2), placed date)",
    "CREATE INDEX gui_orders_customer ON gui_orders (customer)",
    "CREATE VIEW gui_big AS SELECT * FROM gui_orders WHERE amount > 100",
    "CREATE MATERIALIZED VIEW gui_totals AS"
    " SELECT customer, sum(amount) AS total FROM gui_orders GROUP BY customer",
    "INSERT INTO gui_orders (customer, amount, placed) VALUES"
    " ('ada', 250.00, '2024-03-01'), ('bob', 42.50, '2024-03-02'),"
    " ('ada', 99.99, '2024-04-15')",
]

# How the tools learn the ids they bind: from their own earlier catalog reads.
PLACEHOLDERS = {
    "dbname": "SELECT current_database()",
    "public_oid": "SELECT oid FROM pg_catalog.pg_namespace WHERE nspname = 'public'",
    "gui_orders_oid": "SELECT c.oid FROM pg_catalog.pg_class c"
    " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
    " WHERE n.nspname = 'public' AND c.relname = 'gui_orders'",
    "gui_big_oid": "SELECT c.oid FROM pg_catalog.pg_class c"
    " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
    " WHERE n.nspname = 'public' AND c.relname = 'gui_big'",
}

# Statements (as written in the files, without a trailing ";") whose answer
# the tool cannot do without: the minimum number of rows they must return.
MIN_ROWS = {
    "SELECT 1": 1,
    "SELECT version()": 1,
    "SELECT current_setting('server_version_num')::int/100 as version": 1,
    "SELECT current_setting('server_version_num')::int/100": 1,
    "SELECT current_schema(),session_user": 1,
    "SHOW search_path": 1,
    "SHOW TRANSACTION ISOLATION LEVEL": 1,
    "show timezone": 1,
    "SELECT db.oid,db.* FROM pg_catalog.pg_database db WHERE datname='{{dbname}}'": 1,
}


# Statements Freshet cannot run yet, by tool: a line of the statement and
# why. Each must still fail (so that fixing it updates this list); every
# other statement must pass.
KNOWN_GAPS: dict[str, dict[str, str]] = {}


def statements(tool):
    """The file's statements, comments dropped, in order."""
    chunks, current = [], []
    for line in (DIR / f"{tool}.sql").read_text().splitlines():
        if line.strip() == ";":
            chunks.append("\n".join(current))
            current = []
        elif not line.lstrip().startswith("--"):
            current.append(line)
    chunks.append("\n".join(current))
    return [c.strip() for c in chunks if c.strip()]


def create_objects(conn):
    for sql in SETUP:
        conn.execute(sql)


def run_file(conn, tool):
    """Runs every statement of the tool's file; returns the failures."""
    failures, values = [], {}
    used = set(re.findall(r"\{\{(\w+)\}\}", (DIR / f"{tool}.sql").read_text()))
    for name, sql in PLACEHOLDERS.items():
        if name not in used:
            continue
        try:
            row = conn.execute(sql).fetchone()
            values[name] = str(row[0]) if row else "0"
            if not row:
                failures.append((sql, f"(placeholder {name}) {sql}\n    -> no row"))
        except psycopg.Error as e:
            values[name] = "0"
            failures.append((sql, f"(placeholder {name}) {sql}\n    -> {describe(e)}"))

    for sql in statements(tool):
        text = re.sub(r"\{\{(\w+)\}\}", lambda m: values[m.group(1)], sql)
        try:
            with conn.cursor() as cur:
                cur.execute(text)
                rows = cur.fetchall() if cur.description is not None else []
        except psycopg.Error as e:
            failures.append((sql, f"{text[:200]}\n    -> {describe(e)}"))
            continue
        need = MIN_ROWS.get(sql.rstrip(";").strip(), 0)
        if len(rows) < need:
            failures.append(
                (sql, f"{text[:200]}\n    -> returned {len(rows)} rows, the tool needs {need}")
            )
    return failures


def describe(e):
    state = getattr(e, "sqlstate", None)
    return f"[{state}] {str(e).strip()}" if state else str(e).strip()


@pytest.fixture(scope="module")
def objects(conninfo):
    with psycopg.connect(conninfo, autocommit=True) as c:
        create_objects(c)
    return conninfo


@pytest.mark.parametrize("tool", TOOLS)
def test_gui_tool_startup_queries(objects, tool):
    with psycopg.connect(objects, autocommit=True) as conn:
        failures = run_file(conn, tool)
    gaps = KNOWN_GAPS.get(tool, {})
    unexpected = [text for sql, text in failures if not any(g in sql for g in gaps)]
    count = len(statements(tool))
    assert not unexpected, (
        f"{len(unexpected)} of {count} {tool} statements failed:\n\n" + "\n\n".join(unexpected)
    )
    for gap, why in gaps.items():
        assert any(gap in sql for sql, _ in failures), (
            f"a known gap of {tool} now passes ({why}): remove it from KNOWN_GAPS"
        )
