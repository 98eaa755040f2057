"""Indexes through psycopg 3, which binds parameters server-side
(extended protocol): key lookups on an indexed materialized view and an
indexed view take the fast path and agree with the general path."""

import psycopg
import pytest


def rows(conn, sql, params=None, **kw):
    with conn.cursor(**kw) as cur:
        cur.execute(sql, params)
        return sorted(cur.fetchall(), key=repr)


def test_lookups_on_indexed_objects_agree_with_the_general_path(conn):
    conn.execute("CREATE TABLE t (k int, v text, amount numeric(10,2))")
    conn.execute(
        "INSERT INTO t SELECT value % 10, 'v' || value, value * 1.25 "
        "FROM generate_series(1, 200)"
    )
    conn.execute("CREATE MATERIALIZED VIEW t_mv AS SELECT k, v, amount FROM t")
    conn.execute("CREATE INDEX t_mv_k ON t_mv (k)")
    conn.execute("CREATE VIEW totals AS SELECT k, sum(amount) AS total FROM t GROUP BY k")
    conn.execute("CREATE DEFAULT INDEX ON totals")
    # The same queries over a view nobody indexed take the general path.
    conn.execute("CREATE VIEW plain AS SELECT k, v, amount FROM t")
    conn.execute(
        "CREATE VIEW plain_totals AS SELECT k, sum(amount) AS total FROM t GROUP BY k"
    )

    plan = conn.execute("EXPLAIN SELECT * FROM t_mv WHERE k = 3").fetchall()
    assert plan[0][0].startswith("Fast path: Peek index t_mv_k"), plan

    for key in [0, 3, 9, 10, -1]:
        fast = rows(conn, "SELECT * FROM t_mv WHERE k = %s", (key,))
        general = rows(conn, "SELECT * FROM plain WHERE k = %s", (key,))
        assert fast == general, key
        assert len(fast) == (20 if 0 <= key < 10 else 0), key
        # Named prepared statements and binary results too.
        assert rows(conn, "SELECT * FROM t_mv WHERE k = %s", (key,), binary=True) == general
        with conn.cursor() as cur:
            cur.execute("SELECT * FROM t_mv WHERE k = %s", (key,), prepare=True)
            assert sorted(cur.fetchall(), key=repr) == general

    assert rows(conn, "SELECT * FROM totals") == rows(conn, "SELECT * FROM plain_totals")
    for key in [0, 5]:
        got = rows(conn, "SELECT * FROM totals WHERE k = %s AND total = %s",
                   (key, rows(conn, "SELECT total FROM plain_totals WHERE k = %s", (key,))[0][0]))
        assert len(got) == 1, key

    # A write is visible to the next lookup.
    conn.execute("INSERT INTO t VALUES (3, 'late', 1)")
    assert ("late",) in [(r[1],) for r in rows(conn, "SELECT * FROM t_mv WHERE k = %s", (3,))]


def test_an_error_in_an_indexed_view_fails_lookups_until_retracted(conn):
    conn.execute("CREATE TABLE d (k int)")
    conn.execute("INSERT INTO d VALUES (1), (2)")
    conn.execute("CREATE VIEW inv AS SELECT k, 10 / k AS q FROM d")
    conn.execute("CREATE INDEX inv_k ON inv (k)")
    assert rows(conn, "SELECT * FROM inv WHERE k = %s", (2,)) == [(2, 5)]
    conn.execute("INSERT INTO d VALUES (0)")
    with pytest.raises(psycopg.errors.DivisionByZero):
        rows(conn, "SELECT * FROM inv WHERE k = %s", (2,))
    conn.execute("DELETE FROM d WHERE k = 0")
    assert rows(conn, "SELECT * FROM inv WHERE k = %s", (1,)) == [(1, 10)]
