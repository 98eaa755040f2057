"""asyncpg, which speaks only the extended protocol with binary values:
its start-up (`client_encoding` sent as `'utf-8'`), the type introspection
it runs for arrays (a correlated `WITH RECURSIVE` over pg_type, with
`set_config`), uuid/jsonb/date/timestamptz/array parameters described with
their own types, binary COPY both ways, transactions, pools (whose release
runs `RESET ALL`), and errors with their SQLSTATE classes."""

import asyncio
import datetime
import decimal
import json
import re
import uuid

import asyncpg
import pytest


def _params(conninfo):
    fields = dict(kv.split("=", 1) for kv in conninfo.split())
    return dict(
        host=fields["host"],
        port=int(fields["port"]),
        user=fields["user"],
        database=fields["dbname"],
    )


def run(coro):
    return asyncio.run(coro)


def test_asyncpg_round_trips_typed_values(conninfo):
    async def main():
        c = await asyncpg.connect(**_params(conninfo))
        try:
            await c.execute(
                "CREATE TABLE ap_types (id int PRIMARY KEY, u uuid, j jsonb, d date, "
                "ts timestamptz, n numeric(10,2), iv interval, b bytea, "
                "ints int[], texts text[])"
            )
            u = uuid.UUID("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11")
            ts = datetime.datetime(2024, 2, 2, 12, 30, tzinfo=datetime.timezone.utc)
            await c.execute(
                "INSERT INTO ap_types VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
                1, u, json.dumps({"k": [1, 2]}), datetime.date(2024, 2, 2), ts,
                decimal.Decimal("12.34"), datetime.timedelta(days=2, seconds=5),
                b"\x00\xff", [1, None, 3], ["a", "b,c"],
            )
            row = await c.fetchrow("SELECT * FROM ap_types WHERE u = $1", u)
            assert row["id"] == 1
            assert row["u"] == u
            assert json.loads(row["j"]) == {"k": [1, 2]}
            assert row["d"] == datetime.date(2024, 2, 2)
            assert row["ts"] == ts
            assert row["n"] == decimal.Decimal("12.34")
            assert row["iv"] == datetime.timedelta(days=2, seconds=5)
            assert row["b"] == b"\x00\xff"
            assert row["ints"] == [1, None, 3]
            assert row["texts"] == ["a", "b,c"]
            # An array parameter, compared element-wise.
            found = await c.fetch(
                "SELECT id FROM ap_types WHERE id = ANY($1::int[])", [5, 1, 7]
            )
            assert [r["id"] for r in found] == [1]
            # The parameter of a uuid comparison is described as uuid (so
            # a str is refused by asyncpg's uuid codec only if malformed).
            stmt = await c.prepare("SELECT id FROM ap_types WHERE u = $1 AND d = $2")
            assert [t.name for t in stmt.get_parameters()] == ["uuid", "date"]
            assert await stmt.fetchval(u, datetime.date(2024, 2, 2)) == 1
        finally:
            await c.close()

    run(main())


def test_asyncpg_binary_copy_both_ways(conninfo):
    async def main():
        c = await asyncpg.connect(**_params(conninfo))
        try:
            await c.execute(
                "CREATE TABLE ap_copy (id int, name text, u uuid, tags text[], at timestamptz)"
            )
            at = datetime.datetime(2024, 5, 6, 7, 8, 9, tzinfo=datetime.timezone.utc)
            records = [
                (i, f"n{i}", uuid.UUID(int=i), [f"t{i}", None], at) for i in range(500)
            ]
            records.append((500, None, None, None, None))
            tag = await c.copy_records_to_table(
                "ap_copy", records=records, columns=["id", "name", "u", "tags", "at"]
            )
            assert tag == "COPY 501"
            assert await c.fetchval("SELECT count(*) FROM ap_copy") == 501
            assert await c.fetchval("SELECT name FROM ap_copy WHERE id = 42") == "n42"
            assert await c.fetchval("SELECT u FROM ap_copy WHERE id = 7") == uuid.UUID(int=7)

            # Out in binary, then back in: the same rows.
            out = []

            async def sink(chunk):
                out.append(chunk)

            tag = await c.copy_from_query(
                "SELECT * FROM ap_copy ORDER BY id", output=sink, format="binary"
            )
            assert tag == "COPY 501"
            data = b"".join(out)
            assert data.startswith(b"PGCOPY\n\xff\r\n\x00")
            assert data.endswith(b"\xff\xff")
            await c.execute(
                "CREATE TABLE ap_copy2 (id int, name text, u uuid, tags text[], at timestamptz)"
            )

            async def chunks():
                for i in range(0, len(data), 1000):
                    yield data[i : i + 1000]

            tag = await c.copy_to_table("ap_copy2", source=chunks(), format="binary")
            assert tag == "COPY 501"
            assert await c.fetch("SELECT * FROM ap_copy2 ORDER BY id") == await c.fetch(
                "SELECT * FROM ap_copy ORDER BY id"
            )
            # No rows: still a valid binary file.
            out.clear()
            tag = await c.copy_from_query(
                "SELECT * FROM ap_copy WHERE false", output=sink, format="binary"
            )
            assert tag == "COPY 0"
            assert b"".join(out) == b"PGCOPY\n\xff\r\n\x00" + bytes(8) + b"\xff\xff"
            # Malformed binary data is refused, and nothing is written.
            with pytest.raises(asyncpg.exceptions.BadCopyFileFormatError):
                await c.copy_to_table(
                    "ap_copy2", source=_once(b"PGCOPY\n\xff\r\n\x00" + bytes(8) + b"\x00\x05"),
                    format="binary",
                )
            assert await c.fetchval("SELECT count(*) FROM ap_copy2") == 501
        finally:
            await c.close()

    run(main())


async def _once(data):
    yield data


def test_asyncpg_transactions_pools_and_errors(conninfo):
    async def main():
        pool = await asyncpg.create_pool(**_params(conninfo), min_size=1, max_size=2)
        try:
            async with pool.acquire() as c:
                await c.execute("CREATE TABLE ap_tx (id int PRIMARY KEY, n int)")
                async with c.transaction():
                    await c.execute("INSERT INTO ap_tx VALUES (1, 10)")
                    # Reads see the transaction's own writes.
                    assert await c.fetchval("SELECT n FROM ap_tx WHERE id = $1", 1) == 10
                with pytest.raises(ZeroDivisionError):
                    async with c.transaction():
                        await c.execute("INSERT INTO ap_tx VALUES (2, 20)")
                        raise ZeroDivisionError
                assert await c.fetchval("SELECT count(*) FROM ap_tx") == 1
                # A connection-level setting, then a release (RESET ALL).
                await c.execute("SET application_name = 'ap-test'")
                assert await c.fetchval("SELECT current_setting('application_name')") == "ap-test"
                assert await c.fetchval(
                    "SELECT set_config('application_name', 'changed', false)"
                ) == "changed"
                assert await c.fetchval("SHOW application_name") == "changed"
            async with pool.acquire() as c:
                assert await c.fetchval("SHOW application_name") != "changed"
                with pytest.raises(asyncpg.exceptions.UndefinedColumnError):
                    await c.fetch("SELECT nosuch FROM ap_tx")
                with pytest.raises(asyncpg.exceptions.UndefinedTableError):
                    await c.fetch("SELECT * FROM nosuch")
                with pytest.raises(asyncpg.exceptions.UniqueViolationError):
                    await c.execute("INSERT INTO ap_tx VALUES (1, 0)")
                with pytest.raises(asyncpg.exceptions.DataError):
                    await c.execute("INSERT INTO ap_tx VALUES ($1, $2)", 3, "x")
                # The connection still works after the errors.
                assert await c.fetchval("SELECT count(*) FROM ap_tx") == 1
                rows = await c.fetch(
                    "SELECT version() AS v, current_database() AS db"
                )
                assert re.match(r"PostgreSQL 15", rows[0]["v"])
        finally:
            await pool.close()

    run(main())
