#!/usr/bin/env python3
"""The 22 TPC-H queries on DataFusion and DuckDB, in memory, on this machine.

The reference column next to `freshet-bench --tpch-queries`: the same CSV
files, the same query texts, the same timing rule (median of three runs
after a warm-up, wall time including fetching the whole result), both
engines at their defaults (all cores). Columns are typed as TPC-H declares
them (DECIMAL(15,2), DATE, CHAR), as Freshet and PostgreSQL load them.

    python3 -m venv V && V/bin/pip install datafusion==55.0.0 duckdb
    V/bin/python bench/scripts/tpch_engines.py --data DIR --sql ../shared/bench/tpch

prints a Markdown table of seconds per query and the totals.
"""

import argparse
import pathlib
import statistics
import time

import datafusion
import duckdb

# Columns as bench/src/tpch_load.rs declares them (types only; the keys do
# not matter to engines without indexes).
TABLES = {
    "nation": "n_nationkey INTEGER, n_name CHAR(25), n_regionkey INTEGER, n_comment VARCHAR(152)",
    "region": "r_regionkey INTEGER, r_name CHAR(25), r_comment VARCHAR(152)",
    "part": "p_partkey INTEGER, p_name VARCHAR(55), p_mfgr CHAR(25), p_brand CHAR(10), "
    "p_type VARCHAR(25), p_size INTEGER, p_container CHAR(10), p_retailprice DECIMAL(15,2), "
    "p_comment VARCHAR(23)",
    "supplier": "s_suppkey INTEGER, s_name CHAR(25), s_address VARCHAR(40), s_nationkey INTEGER, "
    "s_phone CHAR(15), s_acctbal DECIMAL(15,2), s_comment VARCHAR(101)",
    "partsupp": "ps_partkey INTEGER, ps_suppkey INTEGER, ps_availqty INTEGER, "
    "ps_supplycost DECIMAL(15,2), ps_comment VARCHAR(199)",
    "customer": "c_custkey INTEGER, c_name VARCHAR(25), c_address VARCHAR(40), c_nationkey INTEGER, "
    "c_phone CHAR(15), c_acctbal DECIMAL(15,2), c_mktsegment CHAR(10), c_comment VARCHAR(117)",
    "orders": "o_orderkey INTEGER, o_custkey INTEGER, o_orderstatus CHAR(1), "
    "o_totalprice DECIMAL(15,2), o_orderdate DATE, o_orderpriority CHAR(15), o_clerk CHAR(15), "
    "o_shippriority INTEGER, o_comment VARCHAR(79)",
    "lineitem": "l_orderkey INTEGER, l_partkey INTEGER, l_suppkey INTEGER, l_linenumber INTEGER, "
    "l_quantity DECIMAL(15,2), l_extendedprice DECIMAL(15,2), l_discount DECIMAL(15,2), "
    "l_tax DECIMAL(15,2), l_returnflag CHAR(1), l_linestatus CHAR(1), l_shipdate DATE, "
    "l_commitdate DATE, l_receiptdate DATE, l_shipinstruct CHAR(25), l_shipmode CHAR(10), "
    "l_comment VARCHAR(44)",
}


def statements(text):
    """A query file's statements (q15 creates and drops a view)."""
    return [s.strip() for s in text.split(";") if s.strip()]


class DataFusion:
    name = "DataFusion"

    def __init__(self, data):
        self.ctx = datafusion.SessionContext()
        for table, columns in TABLES.items():
            path = data / f"{table}.csv"
            self.ctx.sql(
                f"CREATE EXTERNAL TABLE {table}_csv ({columns}) STORED AS CSV "
                f"LOCATION '{path}' OPTIONS ('format.has_header' 'true')"
            ).collect()
            self.ctx.sql(f"CREATE TABLE {table} AS SELECT * FROM {table}_csv").collect()

    def run(self, sqls):
        rows = 0
        for sql in sqls:
            rows = max(rows, sum(b.num_rows for b in self.ctx.sql(sql).collect()))
        return rows


class DuckDB:
    name = "DuckDB"

    def __init__(self, data):
        self.con = duckdb.connect()
        for table, columns in TABLES.items():
            self.con.execute(f"CREATE TABLE {table} ({columns})")
            self.con.execute(f"COPY {table} FROM '{data / (table + '.csv')}' (HEADER true)")

    def run(self, sqls):
        rows = 0
        for sql in sqls:
            result = self.con.execute(sql)
            rows = max(rows, len(result.fetchall()) if result.description else 0)
        return rows


def time_query(engine, sqls, runs):
    engine.run(sqls)  # warm-up
    times = []
    rows = 0
    for _ in range(runs):
        start = time.perf_counter()
        rows = engine.run(sqls)
        times.append(time.perf_counter() - start)
    return statistics.median(times), rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=pathlib.Path, required=True, help="tpchgen-cli CSV dir")
    parser.add_argument("--sql", type=pathlib.Path, required=True, help="q1.sql ... q22.sql")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    queries = [(f"q{i}", statements((args.sql / f"q{i}.sql").read_text())) for i in range(1, 23)]
    results = {}
    for make in (DataFusion, DuckDB):
        start = time.perf_counter()
        engine = make(args.data.resolve())
        load = time.perf_counter() - start
        results[make.name] = {"load": load}
        for name, sqls in queries:
            results[make.name][name] = time_query(engine, sqls, args.runs)
        del engine
    names = list(results)
    print("| query | " + " | ".join(f"{n} s | {n} rows" for n in names) + " |")
    print("|---|" + "---:|---:|" * len(names))
    for name, _ in queries:
        cells = " | ".join(f"{results[n][name][0]:.3f} | {results[n][name][1]}" for n in names)
        print(f"| {name} | {cells} |")
    for label, chosen in (
        ("all 22", [q for q, _ in queries]),
        ("the 20 without q17, q20", [q for q, _ in queries if q not in ("q17", "q20")]),
    ):
        totals = ", ".join(f"{n} {sum(results[n][q][0] for q in chosen):.2f} s" for n in names)
        print(f"\nTotal over {label}: {totals}.")
    print("\nLoad (CSV into memory): " + ", ".join(f"{n} {results[n]['load']:.1f} s" for n in names))


if __name__ == "__main__":
    main()
