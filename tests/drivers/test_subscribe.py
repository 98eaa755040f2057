"""SUBSCRIBE through psycopg 3: the COPY stream (`cursor.copy`), cursors
with FETCH timeouts, the upsert envelope, and cancellation."""

import os
import threading
import time

import psycopg


def lines(copy):
    """Rows of a text COPY stream, split into fields."""
    for row in copy:
        for line in bytes(row).decode().splitlines():
            yield line.split("\t")


def until_progress(stream):
    """Data rows up to the next progress row that follows some data."""
    data = []
    for fields in stream:
        if fields[1] == "t":
            if data:
                return data
            continue
        data.append(fields)
    raise AssertionError("the subscribe ended")


def test_copy_subscribe_streams_changes(conninfo, conn):
    conn.execute("CREATE TABLE s (k int, v text)")
    conn.execute("INSERT INTO s VALUES (1, 'a')")
    with psycopg.connect(conninfo, autocommit=True) as sub, sub.cursor() as cur:
        with cur.copy("COPY (SUBSCRIBE s WITH (PROGRESS)) TO STDOUT") as copy:
            stream = lines(copy)
            snapshot = until_progress(stream)
            assert [f[2:] for f in snapshot] == [["1", "1", "a"]]
            conn.execute("UPDATE s SET v = 'b' WHERE k = 1")
            update = until_progress(stream)
            assert sorted(f[2:] for f in update) == [["-1", "1", "a"], ["1", "1", "b"]]
            assert update[0][0] == update[1][0]
            assert int(update[0][0]) > int(snapshot[0][0])
            # Cancel ends the stream with 57014 and frees the connection.
            sub.cancel_safe()
            try:
                for _ in stream:
                    pass
                raise AssertionError("a cancelled subscribe ends with an error")
            except psycopg.errors.QueryCanceled:
                pass
        assert sub.execute("SELECT count(*) FROM s").fetchone() == (1,)


def test_cursor_fetch_with_timeout_and_upsert_envelope(conninfo, conn):
    conn.execute("CREATE TABLE u (k int, v text)")
    conn.execute("INSERT INTO u VALUES (1, 'a'), (2, 'b')")
    with psycopg.connect(conninfo) as sub:  # not autocommit: DECLARE needs a transaction
        cur = sub.cursor()
        cur.execute("DECLARE c CURSOR FOR SUBSCRIBE u ENVELOPE UPSERT (KEY (k))")
        cur.execute("FETCH ALL c")
        assert [d.name for d in cur.description] == ["mz_timestamp", "mz_state", "k", "v"]
        assert sorted(r[1:] for r in cur.fetchall()) == [("upsert", 1, "a"), ("upsert", 2, "b")]
        cur.execute("FETCH ALL c WITH (timeout = '50ms')")
        assert cur.fetchall() == []

        # A waiting FETCH returns as soon as the write lands.
        def write():
            time.sleep(0.3)
            conn.execute("DELETE FROM u WHERE k = 2")

        writer = threading.Thread(target=write)
        writer.start()
        cur.execute("FETCH 10 c WITH (timeout = '30s')")
        writer.join()
        got = cur.fetchall()
        assert [r[1:] for r in got] == [("delete", 2, None)]
        # mz_timestamp is numeric: psycopg reads it as a Decimal.
        assert int(got[0][0]) > 0
        sub.rollback()


def holds_on(conn, table):
    return conn.execute(
        "SELECT count(*) FROM freshet_internal.read_holds WHERE object_name LIKE %s",
        ("%." + table,),
    ).fetchone()[0]


def test_a_vanished_client_releases_its_subscribe(conninfo, conn):
    conn.execute("CREATE TABLE gone (k int)")
    conn.execute("INSERT INTO gone VALUES (1)")
    sub = psycopg.connect(conninfo, autocommit=True)
    cur = sub.cursor()
    # Entered by hand (and kept referenced) so that no context exit cancels
    # the COPY on our behalf.
    streaming = cur.copy("COPY (SUBSCRIBE gone) TO STDOUT")
    copy = streaming.__enter__()
    first = next(lines(copy))
    assert first[1:] == ["1", "1"]
    assert holds_on(conn, "gone") == 1
    # The client goes away mid-stream without a word (no Terminate, no
    # cancel): the socket just closes, while no rows are flowing.
    os.close(sub.pgconn.socket)
    deadline = time.time() + 30
    while holds_on(conn, "gone") > 0:
        assert time.time() < deadline, "the subscribe's holds were not released"
        time.sleep(0.05)
