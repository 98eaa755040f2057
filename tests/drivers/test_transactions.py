"""Transactions as drivers and ORMs use them: psycopg2 in its default
(non-autocommit) mode, psycopg 3's prepared statements, nested
transactions (savepoints) and server-side cursors, and the 40001 a
read-then-write transaction gets when what it read changed before its
COMMIT."""

import psycopg
import psycopg2
import psycopg2.errors
import pytest


def test_psycopg2_default_mode_reads_then_writes(conninfo):
    setup = psycopg.connect(conninfo, autocommit=True)
    setup.execute("CREATE TABLE p2 (id int PRIMARY KEY, n int)")
    conn = psycopg2.connect(conninfo)
    assert not conn.autocommit
    cur = conn.cursor()
    # psycopg2 opens a transaction before the first statement: a read,
    # then writes that depend on it, in one transaction.
    cur.execute("SELECT count(*) FROM p2")
    (count,) = cur.fetchone()
    cur.execute("INSERT INTO p2 VALUES (%s, %s)", (count + 1, 10))
    cur.execute("UPDATE p2 SET n = n + 1 WHERE id = %s", (count + 1,))
    cur.execute("SELECT id, n FROM p2")
    assert cur.fetchall() == [(1, 11)]  # its own writes, before COMMIT
    assert setup.execute("SELECT count(*) FROM p2").fetchone() == (0,)
    conn.commit()
    assert setup.execute("SELECT id, n FROM p2").fetchall() == [(1, 11)]
    # A failed statement aborts the transaction until rollback.
    with pytest.raises(psycopg2.errors.DivisionByZero):
        cur.execute("SELECT 1 / 0")
    with pytest.raises(psycopg2.errors.InFailedSqlTransaction):
        cur.execute("SELECT 1")
    conn.rollback()
    cur.execute("DELETE FROM p2 WHERE id = 1")
    conn.rollback()
    assert setup.execute("SELECT count(*) FROM p2").fetchone() == (1,)
    conn.close()


def test_a_changed_read_fails_commit_with_40001_and_a_retry_succeeds(conninfo):
    setup = psycopg.connect(conninfo, autocommit=True)
    setup.execute("CREATE TABLE acct (id int PRIMARY KEY, bal int)")
    setup.execute("INSERT INTO acct VALUES (1, 100), (2, 0)")
    a = psycopg.connect(conninfo)
    b = psycopg.connect(conninfo)

    def transfer(conn, amount):
        (bal,) = conn.execute("SELECT bal FROM acct WHERE id = 1").fetchone()
        conn.execute("UPDATE acct SET bal = %s WHERE id = 1", (bal - amount,))
        conn.execute("UPDATE acct SET bal = bal + %s WHERE id = 2", (amount,))

    transfer(a, 10)
    transfer(b, 20)
    a.commit()
    with pytest.raises(psycopg.errors.SerializationFailure) as e:
        b.commit()
    assert e.value.sqlstate == "40001"
    assert "acct" in e.value.diag.message_detail
    # Nothing of b's applied; its retry reads the new balance.
    assert setup.execute("SELECT bal FROM acct ORDER BY id").fetchall() == [(90,), (10,)]
    transfer(b, 20)
    b.commit()
    assert setup.execute("SELECT bal FROM acct ORDER BY id").fetchall() == [(70,), (30,)]
    # A write to a table the transaction did not read is no conflict.
    setup.execute("CREATE TABLE other (x int)")
    transfer(a, 1)
    setup.execute("INSERT INTO other VALUES (1)")
    a.commit()
    assert setup.execute("SELECT bal FROM acct WHERE id = 1").fetchone() == (69,)


def test_nested_transactions_are_savepoints(conn, conninfo):
    conn.execute("CREATE TABLE sp (x int)")
    c = psycopg.connect(conninfo)
    with c.transaction():
        c.execute("INSERT INTO sp VALUES (1)")
        with pytest.raises(psycopg.errors.DivisionByZero):
            with c.transaction():
                c.execute("INSERT INTO sp VALUES (2)")
                c.execute("SELECT 1 / 0")
        # The inner block rolled back to its savepoint; the outer goes on.
        c.execute("INSERT INTO sp VALUES (3)")
        assert c.execute("SELECT x FROM sp ORDER BY x").fetchall() == [(1,), (3,)]
    assert conn.execute("SELECT x FROM sp ORDER BY x").fetchall() == [(1,), (3,)]


def test_prepared_statements_survive_deallocate_all(conn):
    conn.execute("CREATE TABLE prep (k int, v text)")
    conn.execute("INSERT INTO prep VALUES (1, 'a'), (2, 'b')")
    # psycopg 3 prepares a statement on the server after 5 executions, and
    # sends DEALLOCATE ALL when the schema changes.
    for _ in range(8):
        assert conn.execute("SELECT v FROM prep WHERE k = %s", (2,)).fetchone() == ("b",)
    conn.execute("CREATE TABLE prep2 (x int)")
    conn.execute("DEALLOCATE ALL")
    for _ in range(8):
        assert conn.execute("SELECT v FROM prep WHERE k = %s", (1,)).fetchone() == ("a",)
    conn.execute("PREPARE byk (int) AS SELECT v FROM prep WHERE k = $1")
    assert conn.execute("EXECUTE byk (2)").fetchone() == ("b",)
    conn.execute("DEALLOCATE byk")
    with pytest.raises(psycopg.errors.InvalidSqlStatementName):
        conn.execute("EXECUTE byk (2)")


def test_server_side_cursors_fetch_in_pieces(conn, conninfo):
    conn.execute("CREATE TABLE big (x int)")
    conn.execute("INSERT INTO big SELECT * FROM generate_series(1, 1000)")
    c = psycopg.connect(conninfo)
    with c.cursor(name="walk") as cur:
        cur.itersize = 100
        cur.execute("SELECT x FROM big WHERE x %% 2 = %s ORDER BY x", (0,))
        assert [d.name for d in cur.description] == ["x"]
        first = cur.fetchmany(3)
        rest = cur.fetchall()
    assert first == [(2,), (4,), (6,)]
    assert len(rest) == 497 and rest[-1] == (1000,)
    c.commit()
