"""SQLAlchemy 2 on a default engine (psycopg2 and psycopg 3): Core and
ORM writes in transactions, `create_all`, full reflection (columns,
keys, indexes, views, materialized views), and pandas `to_sql` /
`read_sql_table`."""

import pandas as pd
import pytest
import sqlalchemy as sa
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column


def url(conninfo, driver):
    parts = dict(p.split("=", 1) for p in conninfo.split())
    return f"postgresql+{driver}://{parts['user']}@{parts['host']}:{parts['port']}/{parts['dbname']}"


@pytest.mark.parametrize("driver", ["psycopg2", "psycopg"])
def test_orm_and_reflection(conninfo, driver):
    engine = sa.create_engine(url(conninfo, driver))

    class Base(DeclarativeBase):
        pass

    class Item(Base):
        __tablename__ = f"item_{driver}"
        id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=False)
        sku: Mapped[str] = mapped_column(sa.String(20), unique=True)
        qty: Mapped[int] = mapped_column(sa.Integer, nullable=True, index=True)
        price: Mapped[float] = mapped_column(sa.Numeric(10, 2), nullable=True)

    Base.metadata.create_all(engine)
    Base.metadata.create_all(engine)  # checks for the table, creates nothing
    name = Item.__tablename__
    with Session(engine) as s:
        s.add_all([Item(id=i, sku=f"s{i}", qty=i % 3, price=i * 1.5) for i in range(6)])
        s.commit()
        item = s.get(Item, 4)
        item.qty = 10
        s.delete(s.get(Item, 5))
        s.commit()
        assert [(i.id, i.qty) for i in s.scalars(sa.select(Item).where(Item.qty > 1))] == [
            (2, 2),
            (4, 10),
        ]
        s.add(Item(id=1, sku="dup"))
        with pytest.raises(sa.exc.IntegrityError):
            s.commit()
        s.rollback()
    with engine.begin() as c:
        c.execute(sa.text(f"CREATE VIEW {name}_v AS SELECT qty, count(*) AS n FROM {name} GROUP BY qty"))
        c.execute(sa.text(f"CREATE MATERIALIZED VIEW {name}_mv AS SELECT qty, sum(id) AS s FROM {name} GROUP BY qty"))
    insp = sa.inspect(engine)
    assert name in insp.get_table_names()
    columns = {c["name"]: (str(c["type"]), c["nullable"]) for c in insp.get_columns(name)}
    assert columns == {
        "id": ("INTEGER", False),
        "sku": ("VARCHAR(20)", False),
        "qty": ("INTEGER", True),
        "price": ("NUMERIC(10, 2)", True),
    }
    assert insp.get_pk_constraint(name)["constrained_columns"] == ["id"]
    assert [u["column_names"] for u in insp.get_unique_constraints(name)] == [["sku"]]
    indexes = {i["name"]: i["column_names"] for i in insp.get_indexes(name)}
    assert indexes[f"ix_{name}_qty"] == ["qty"]
    assert f"{name}_v" in insp.get_view_names()
    assert f"{name}_mv" in insp.get_materialized_view_names()
    assert [c["name"] for c in insp.get_columns(f"{name}_mv")] == ["qty", "s"]
    assert "count(*)" in insp.get_view_definition(f"{name}_v")
    assert "public" in insp.get_schema_names()
    reflected = sa.Table(name, sa.MetaData(), autoload_with=engine)
    assert reflected.c.keys() == ["id", "sku", "qty", "price"]
    with engine.connect() as c:
        rows = c.execute(sa.text(f"SELECT qty, s FROM {name}_mv ORDER BY qty")).all()
    assert rows == [(0, 3), (1, 1), (2, 2), (10, 4)]
    engine.dispose()


@pytest.mark.parametrize("driver", ["psycopg2", "psycopg"])
def test_autoincrement_keys(conninfo, driver):
    """The ORM's default integer primary key is SERIAL; batches of new
    objects are inserted with SQLAlchemy's sentinel form (INSERT ...
    SELECT ... FROM (VALUES ...) ORDER BY ... RETURNING) and get their ids."""
    engine = sa.create_engine(url(conninfo, driver))

    class Base(DeclarativeBase):
        pass

    class Note(Base):
        __tablename__ = f"note_{driver}"
        id: Mapped[int] = mapped_column(primary_key=True)
        body: Mapped[str]

    class Event(Base):
        __tablename__ = f"event_{driver}"
        id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=True), primary_key=True)
        kind: Mapped[str]

    Base.metadata.create_all(engine)
    with Session(engine) as s:
        notes = [Note(body=f"n{i}") for i in range(5)]
        s.add_all(notes)
        s.add(Event(kind="created"))
        s.commit()
        assert sorted(n.id for n in notes) == [1, 2, 3, 4, 5]
        one = Note(body="single")
        s.add(one)
        s.commit()
        assert one.id == 6
        assert s.scalars(sa.select(Event.id)).all() == [1]
    column = {c["name"]: c for c in sa.inspect(engine).get_columns(f"note_{driver}")}["id"]
    assert column["default"] == f"nextval('note_{driver}_id_seq'::regclass)"
    assert column["autoincrement"] is True
    engine.dispose()


@pytest.mark.parametrize("driver", ["psycopg2", "psycopg"])
def test_explicit_sequences(conninfo, driver):
    """A `Sequence` on a column: create_all creates it, the ORM draws ids
    from it (pre-executing `nextval`), reflection lists it, drop_all drops
    it after its table."""
    engine = sa.create_engine(url(conninfo, driver))
    seq = sa.Sequence(f"order_id_seq_{driver}", start=100, increment=10)

    class Base(DeclarativeBase):
        pass

    class Order(Base):
        __tablename__ = f"order_{driver}"
        id: Mapped[int] = mapped_column(sa.BigInteger, seq, primary_key=True)
        what: Mapped[str]

    Base.metadata.create_all(engine)
    insp = sa.inspect(engine)
    assert seq.name in insp.get_sequence_names()
    assert insp.has_sequence(seq.name)
    with Session(engine) as s:
        orders = [Order(what=w) for w in ("a", "b", "c")]
        s.add_all(orders)
        s.commit()
        assert sorted(o.id for o in orders) == [100, 110, 120]
    with engine.connect() as c:
        assert c.execute(seq.next_value()).scalar() == 130
        assert c.execute(sa.text(f"SELECT currval('{seq.name}')")).scalar() == 130
        c.execute(sa.text(f"SELECT setval('{seq.name}', 1000)"))
        assert c.execute(seq.next_value()).scalar() == 1010
    Base.metadata.drop_all(engine)
    assert seq.name not in sa.inspect(engine).get_sequence_names()
    engine.dispose()


def test_copy_numbers_each_row(conn):
    conn.execute("CREATE TABLE copied (id serial, v text)")
    with conn.cursor().copy("COPY copied (v) FROM STDIN") as copy:
        for v in ["a", "b", "c"]:
            copy.write_row((v,))
    rows = conn.execute("SELECT id, v FROM copied ORDER BY id").fetchall()
    assert rows == [(1, "a"), (2, "b"), (3, "c")]


def test_pandas_round_trip(conninfo):
    engine = sa.create_engine(url(conninfo, "psycopg2"))
    df = pd.DataFrame({"a": [1, 2, 3], "b": ["x", "y", None], "c": [1.5, None, 3.0]})
    df.to_sql("frame", engine, index=False)
    back = pd.read_sql_table("frame", engine).sort_values("a").reset_index(drop=True)
    assert back["a"].tolist() == [1, 2, 3]
    assert back["b"].tolist()[:2] == ["x", "y"] and back["b"].isna().tolist() == [False, False, True]
    df.to_sql("frame", engine, index=False, if_exists="append")
    assert pd.read_sql("SELECT count(*) AS n FROM frame", engine)["n"][0] == 6
    df.to_sql("frame", engine, index=False, if_exists="replace")
    assert pd.read_sql("SELECT count(*) AS n FROM frame", engine)["n"][0] == 3
    engine.dispose()
