import java.sql.*;
import java.util.*;

/**
 * pgJDBC against Freshet: DatabaseMetaData as tools call it (schemas,
 * catalogs, tables, views, materialized views, columns), prepared
 * statement batches, dates and timestamps, transactions, arrays and errors.
 * Run as `java -cp postgresql.jar JdbcCheck.java <jdbc-url>`; exits non-zero
 * on the first check that fails (tests/drivers/test_jdbc.py runs it).
 */
public class JdbcCheck {
    static void check(boolean ok, String what) {
        if (!ok) throw new AssertionError(what);
    }

    static void eq(Object expected, Object actual, String what) {
        if (!Objects.equals(expected, actual))
            throw new AssertionError(what + ": expected <" + expected + "> but was <" + actual + ">");
    }

    static List<String> column(ResultSet rs, String name) throws SQLException {
        List<String> out = new ArrayList<>();
        while (rs.next()) out.add(rs.getString(name));
        rs.close();
        return out;
    }

    public static void main(String[] args) throws Exception {
        try (Connection c = DriverManager.getConnection(args[0])) {
            try (Statement s = c.createStatement()) {
                s.execute("CREATE TABLE jd_items (id bigserial PRIMARY KEY, name text NOT NULL, "
                        + "price numeric(10,2), added date, seen timestamptz, tags text[])");
                s.execute("CREATE INDEX jd_items_name ON jd_items (name)");
                s.execute("CREATE VIEW jd_cheap AS SELECT id, name FROM jd_items WHERE price < 10");
                s.execute("CREATE MATERIALIZED VIEW jd_counts AS SELECT name, count(*) AS n FROM jd_items GROUP BY name");
            }

            // A prepared INSERT batch: one row counted per statement.
            try (PreparedStatement p = c.prepareStatement(
                    "INSERT INTO jd_items (name, price, added, seen) VALUES (?, ?, ?, ?)")) {
                for (int i = 1; i <= 3; i++) {
                    p.setString(1, "item" + i);
                    p.setBigDecimal(2, new java.math.BigDecimal(i * 5 + ".25"));
                    p.setDate(3, java.sql.Date.valueOf("2024-02-0" + i));
                    p.setTimestamp(4, Timestamp.valueOf("2024-02-0" + i + " 10:30:00"));
                    p.addBatch();
                }
                int[] counts = p.executeBatch();
                eq("[1, 1, 1]", Arrays.toString(counts), "batch update counts");
            }
            // Generated keys (RETURNING).
            try (PreparedStatement p = c.prepareStatement(
                    "INSERT INTO jd_items (name) VALUES (?)", Statement.RETURN_GENERATED_KEYS)) {
                p.setString(1, "keyed");
                eq(1, p.executeUpdate(), "insert count");
                ResultSet keys = p.getGeneratedKeys();
                check(keys.next(), "a generated key");
                eq(4L, keys.getLong("id"), "generated id");
            }
            // Reads with typed parameters; a date comes back as set.
            try (PreparedStatement p = c.prepareStatement(
                    "SELECT name, price, added, seen FROM jd_items WHERE added = ? AND price > ?")) {
                p.setDate(1, java.sql.Date.valueOf("2024-02-02"));
                p.setInt(2, 1);
                ResultSet rs = p.executeQuery();
                check(rs.next(), "a row for the date");
                eq("item2", rs.getString(1), "name");
                eq(new java.math.BigDecimal("10.25"), rs.getBigDecimal(2), "price");
                eq(java.sql.Date.valueOf("2024-02-02"), rs.getDate(3), "date");
                eq(Timestamp.valueOf("2024-02-02 10:30:00"), rs.getTimestamp(4), "timestamp");
                check(!rs.next(), "one row");
            }
            // Arrays both ways.
            try (PreparedStatement p = c.prepareStatement("UPDATE jd_items SET tags = ? WHERE id = ?")) {
                p.setArray(1, c.createArrayOf("text", new String[] {"a", "b c", null}));
                p.setLong(2, 1);
                eq(1, p.executeUpdate(), "array update");
            }
            try (Statement s = c.createStatement();
                 ResultSet rs = s.executeQuery("SELECT tags FROM jd_items WHERE id = 1")) {
                check(rs.next(), "array row");
                eq("[a, b c, null]", Arrays.toString((Object[]) rs.getArray(1).getArray()), "array value");
            }

            // Transactions: read, write, commit; write, rollback.
            c.setAutoCommit(false);
            try (Statement s = c.createStatement()) {
                ResultSet rs = s.executeQuery("SELECT count(*) FROM jd_items");
                rs.next();
                long n = rs.getLong(1);
                s.executeUpdate("INSERT INTO jd_items (name) VALUES ('txn" + n + "')");
                c.commit();
                s.executeUpdate("DELETE FROM jd_items");
                c.rollback();
                rs = s.executeQuery("SELECT count(*) FROM jd_items");
                rs.next();
                eq(n + 1, rs.getLong(1), "rows after commit and rollback");
                c.commit();
            }
            c.setAutoCommit(true);
            eq(Connection.TRANSACTION_SERIALIZABLE, c.getTransactionIsolation(), "isolation");

            // DatabaseMetaData, as tools (DBeaver, IDEs) call it.
            DatabaseMetaData md = c.getMetaData();
            check(md.getDatabaseProductName().equals("PostgreSQL"), "product name");
            check(column(md.getSchemas(), "TABLE_SCHEM").contains("public"), "schemas");
            check(column(md.getCatalogs(), "TABLE_CAT").contains("freshet"), "catalogs");
            List<String> tables = column(md.getTables(null, "public", "jd_%", new String[] {"TABLE"}), "TABLE_NAME");
            eq(List.of("jd_items"), tables, "tables");
            List<String> views = column(md.getTables(null, "public", "jd_%", new String[] {"VIEW"}), "TABLE_NAME");
            eq(List.of("jd_cheap"), views, "views");
            List<String> mvs = column(md.getTables(null, "public", "jd_%", new String[] {"MATERIALIZED VIEW"}), "TABLE_NAME");
            eq(List.of("jd_counts"), mvs, "materialized views");
            ResultSet cols = md.getColumns(null, "public", "jd_items", "%");
            List<String> names = new ArrayList<>();
            List<String> types = new ArrayList<>();
            while (cols.next()) {
                names.add(cols.getString("COLUMN_NAME"));
                types.add(cols.getString("TYPE_NAME"));
                if (cols.getString("COLUMN_NAME").equals("id")) {
                    eq("YES", cols.getString("IS_AUTOINCREMENT"), "id autoincrement");
                    eq("NO", cols.getString("IS_NULLABLE"), "id nullable");
                }
                if (cols.getString("COLUMN_NAME").equals("price")) {
                    eq(10, cols.getInt("COLUMN_SIZE"), "price precision");
                    eq(2, cols.getInt("DECIMAL_DIGITS"), "price scale");
                }
            }
            eq(List.of("id", "name", "price", "added", "seen", "tags"), names, "columns");
            eq(List.of("bigserial", "text", "numeric", "date", "timestamptz", "_text"), types, "column types");
            eq(List.of("id"), column(md.getPrimaryKeys(null, "public", "jd_items"), "COLUMN_NAME"), "primary key");
            ResultSet idx = md.getIndexInfo(null, "public", "jd_items", false, false);
            Map<String, String> indexColumns = new TreeMap<>();
            while (idx.next()) {
                indexColumns.put(idx.getString("INDEX_NAME"),
                        idx.getString("COLUMN_NAME") + (idx.getBoolean("NON_UNIQUE") ? "" : " unique"));
            }
            eq("{jd_items_name=name, jd_items_pkey=id unique}", indexColumns.toString(), "index info");
            eq(List.of("id"), column(md.getBestRowIdentifier(null, "public", "jd_items",
                    DatabaseMetaData.bestRowSession, false), "COLUMN_NAME"), "best row identifier");
            // Type info: every base type once, with its java.sql.Types code.
            ResultSet ti = md.getTypeInfo();
            Map<String, Integer> typeCodes = new HashMap<>();
            while (ti.next()) typeCodes.put(ti.getString("TYPE_NAME"), ti.getInt("DATA_TYPE"));
            eq(Types.BIGINT, typeCodes.get("int8"), "int8 type code");
            eq(Types.VARCHAR, typeCodes.get("text"), "text type code");
            eq(Types.NUMERIC, typeCodes.get("numeric"), "numeric type code");
            eq(Types.TIMESTAMP, typeCodes.get("timestamptz"), "timestamptz type code");
            eq(Types.ARRAY, typeCodes.get("_int4"), "int4[] type code");
            // Freshet has no foreign keys: none imported, exported or between.
            eq(List.of(), column(md.getImportedKeys(null, "public", "jd_items"), "FKCOLUMN_NAME"), "imported keys");
            eq(List.of(), column(md.getExportedKeys(null, "public", "jd_items"), "FKCOLUMN_NAME"), "exported keys");
            eq(List.of(), column(md.getCrossReference(null, "public", "jd_items", null, "public", "jd_items"),
                    "FKCOLUMN_NAME"), "cross reference");
            eq(List.of(), column(md.getUDTs(null, "public", "%", null), "TYPE_NAME"), "user-defined types");
            check(column(md.getTableTypes(), "TABLE_TYPE").contains("MATERIALIZED VIEW"), "table types");
            eq(List.of(), column(md.getFunctions(null, "public", "%"), "FUNCTION_NAME"), "functions");
            eq(List.of(), column(md.getProcedures(null, "public", "%"), "PROCEDURE_NAME"), "procedures");

            // Errors carry their SQLSTATE; the connection keeps working.
            try (Statement s = c.createStatement()) {
                try {
                    s.executeQuery("SELECT nosuch FROM jd_items");
                    throw new AssertionError("no error for a missing column");
                } catch (SQLException e) {
                    eq("42703", e.getSQLState(), "missing column SQLSTATE");
                }
                try {
                    s.executeUpdate("INSERT INTO jd_items (id, name) VALUES (1, 'dup')");
                    throw new AssertionError("no error for a duplicate key");
                } catch (SQLException e) {
                    eq("23505", e.getSQLState(), "duplicate key SQLSTATE");
                }
                ResultSet rs = s.executeQuery("SELECT n FROM jd_counts WHERE name = 'item1'");
                check(rs.next(), "materialized view row");
                eq(1L, rs.getLong(1), "materialized view count");
            }
        }
        System.out.println("jdbc checks passed");
    }
}
