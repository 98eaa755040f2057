//! Smoke tests with the real `psql` client: a walkthrough script (DDL, DML,
//! `\copy` in text and CSV, `\x`, `\pset`, variables, transactions, a view)
//! must run to completion with the output psql users expect, and a failing
//! statement under `ON_ERROR_STOP` must stop the script with exit code 3.
//!
//! psql is `/usr/bin/psql` (or `$FRESHET_PSQL`); the tests fail when it is
//! missing. psql's listing meta-commands (`\d`, `\dt`, `\dv`, `\dm`, `\di`,
//! `\dn`, `\l`) must list what the session sees, from `pg_catalog`.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::harness::Server;

/// How long one psql run may take.
const PSQL_TIMEOUT: Duration = Duration::from_secs(60);

/// The psql binary under test.
fn psql_binary() -> PathBuf {
    let path = std::env::var_os("FRESHET_PSQL")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/psql"));
    assert!(
        path.is_file(),
        "psql not found at {} (install the PostgreSQL client, or set FRESHET_PSQL)",
        path.display()
    );
    path
}

/// What one psql run printed and how it exited.
struct PsqlRun {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

impl PsqlRun {
    /// Panic, showing both streams, unless stdout contains `expected`.
    fn assert_stdout_contains(&self, expected: &str) {
        assert!(
            self.stdout.contains(expected),
            "psql output lacks:\n{expected}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.stdout,
            self.stderr
        );
    }
}

/// Run `psql -f script` against `server` with `ON_ERROR_STOP` on or off.
///
/// The environment is pinned so that the output does not depend on the
/// caller's locale or libpq settings. Output goes to files in `dir`, which
/// avoids pipe deadlocks while polling for the timeout.
fn run_psql(server: &Server, dir: &Path, script: &Path, on_error_stop: bool) -> PsqlRun {
    run_psql_at(
        server.port,
        "freshet",
        "freshet",
        dir,
        script,
        on_error_stop,
    )
}

/// psql on a script against any server on 127.0.0.1.
fn run_psql_at(
    port: u16,
    user: &str,
    database: &str,
    dir: &Path,
    script: &Path,
    on_error_stop: bool,
) -> PsqlRun {
    let stdout_path = dir.join("psql.stdout");
    let stderr_path = dir.join("psql.stderr");
    let stdout = std::fs::File::create(&stdout_path).expect("create psql stdout file");
    let stderr = std::fs::File::create(&stderr_path).expect("create psql stderr file");
    let mut command = Command::new(psql_binary());
    command
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(["-U", user, "-d", database, "-X"])
        .args(["-v", &format!("ON_ERROR_STOP={}", u8::from(on_error_stop))])
        .arg("-f")
        .arg(script)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr);
    for var in [
        "PGHOST",
        "PGPORT",
        "PGUSER",
        "PGDATABASE",
        "PGPASSWORD",
        "PGSERVICE",
    ] {
        command.env_remove(var);
    }
    command
        .env("LC_ALL", "C")
        .env("PGCLIENTENCODING", "UTF8")
        .env("PGCONNECT_TIMEOUT", "10");
    let mut child = command.spawn().expect("spawn psql");
    let deadline = Instant::now() + PSQL_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for psql") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("psql did not finish within {PSQL_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    PsqlRun {
        status,
        stdout: std::fs::read_to_string(&stdout_path).expect("read psql stdout"),
        stderr: std::fs::read_to_string(&stderr_path).expect("read psql stderr"),
    }
}

/// Lines joined into text, each ending in a newline (keeps trailing blanks
/// of psql's aligned output visible in the source).
fn block(lines: &[&str]) -> String {
    lines.iter().map(|l| format!("{l}\n")).collect()
}

/// Write `text` to `dir/name` and return the path.
fn write_file(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    path
}

/// The walkthrough script; `tsv` and `csv` are the files `\copy` loads.
fn walkthrough_script(tsv: &Path, csv: &Path) -> String {
    format!(
        r"\echo walkthrough start
CREATE TABLE fruit (id int, name text, price numeric(6,2));
INSERT INTO fruit VALUES (10, 'fig', 3.00);
\copy fruit FROM '{tsv}'
\copy fruit FROM '{csv}' WITH (FORMAT csv, HEADER true)
SELECT id, name, price FROM fruit ORDER BY id;
\x on
SELECT id, name FROM fruit WHERE id = 3;
\x off
CREATE VIEW cheap AS SELECT name FROM fruit WHERE price < 5;
SELECT * FROM cheap ORDER BY name;
BEGIN;
INSERT INTO fruit VALUES (20, 'grape', 4.00);
INSERT INTO fruit VALUES (21, 'grapefruit', 5.00);
ROLLBACK;
SELECT count(*) AS after_rollback FROM fruit;
BEGIN;
INSERT INTO fruit VALUES (30, 'kiwi', 0.50);
INSERT INTO fruit VALUES (31, 'lime', 0.25);
COMMIT;
UPDATE fruit SET price = price * 2 WHERE id = 1;
DELETE FROM fruit WHERE id = 10;
BEGIN;
SELECT count(*) AS after_commit FROM fruit;
COMMIT;
\pset format unaligned
SELECT name, price FROM fruit ORDER BY id LIMIT 2;
\pset format aligned
\copy (SELECT id, name FROM fruit ORDER BY id) TO STDOUT WITH (FORMAT csv)
\set n 3
SELECT :n + 1 AS n_plus_one;
SELECT NULL::text AS nothing, '' AS empty;
COPY (SUBSCRIBE (SELECT 'sub' || 'scribed' AS c)) TO STDOUT;
BEGIN;
DECLARE fc CURSOR FOR SUBSCRIBE (SELECT name FROM fruit WHERE id = 1) ENVELOPE UPSERT (KEY (name));
FETCH ALL fc;
FETCH ALL fc WITH (timeout = '10ms');
COMMIT;
\echo walkthrough end
",
        tsv = tsv.display(),
        csv = csv.display()
    )
}

#[test]
fn psql_walkthrough_produces_the_expected_output() {
    let server = Server::start();
    let dir = tempfile::tempdir().expect("create a temp dir for psql files");
    let tsv = write_file(
        dir.path(),
        "fruit.tsv",
        "1\tapple\t1.50\n2\tbanana\t\\N\n3\tcherry pie\t10.00\n",
    );
    let csv = write_file(
        dir.path(),
        "fruit.csv",
        "id,name,price\n4,\"date, dried\",2.25\n5,elder,\n",
    );
    let script = write_file(dir.path(), "walk.sql", &walkthrough_script(&tsv, &csv));
    let run = run_psql(&server, dir.path(), &script, true);

    assert_eq!(
        run.status.code(),
        Some(0),
        "psql failed\n--- stdout ---\n{}\n--- stderr ---\n{}",
        run.stdout,
        run.stderr
    );
    assert_eq!(run.stderr, "", "psql wrote to stderr");
    run.assert_stdout_contains(&block(&[
        "walkthrough start",
        "CREATE TABLE",
        "INSERT 0 1",
        "COPY 3",
        "COPY 2",
    ]));
    run.assert_stdout_contains(&block(&[
        " id |    name     | price ",
        "----+-------------+-------",
        "  1 | apple       |  1.50",
        "  2 | banana      |      ",
        "  3 | cherry pie  | 10.00",
        "  4 | date, dried |  2.25",
        "  5 | elder       |      ",
        " 10 | fig         |  3.00",
        "(6 rows)",
    ]));
    run.assert_stdout_contains(&block(&[
        "Expanded display is on.",
        "-[ RECORD 1 ]----",
        "id   | 3",
        "name | cherry pie",
        "",
        "Expanded display is off.",
    ]));
    run.assert_stdout_contains(&block(&[
        "CREATE VIEW",
        "    name     ",
        "-------------",
        " apple",
        " date, dried",
        " fig",
        "(3 rows)",
    ]));
    run.assert_stdout_contains(&block(&[
        "BEGIN",
        "INSERT 0 1",
        "INSERT 0 1",
        "ROLLBACK",
        " after_rollback ",
        "----------------",
        "              6",
        "(1 row)",
    ]));
    run.assert_stdout_contains(&block(&[
        "COMMIT",
        "UPDATE 1",
        "DELETE 1",
        "BEGIN",
        " after_commit ",
        "--------------",
        "            7",
        "(1 row)",
        "",
        "COMMIT",
    ]));
    run.assert_stdout_contains(&block(&[
        "Output format is unaligned.",
        "name|price",
        "apple|3.00",
        "banana|",
        "(2 rows)",
        "Output format is aligned.",
        "1,apple",
        "2,banana",
        "3,cherry pie",
        "4,\"date, dried\"",
        "5,elder",
        "30,kiwi",
        "31,lime",
    ]));
    run.assert_stdout_contains(&block(&[
        " n_plus_one ",
        "------------",
        "          4",
        "(1 row)",
    ]));
    run.assert_stdout_contains(&block(&[
        " nothing | empty ",
        "---------+-------",
        "         | ",
        "(1 row)",
    ]));
    // A subscribe of a constant completes after its snapshot; a cursor
    // over a subscribe fetches the contents, then nothing new.
    assert!(run.stdout.contains("\t1\tsubscribed\n"), "{}", run.stdout);
    run.assert_stdout_contains(&block(&[
        "BEGIN",
        "DECLARE CURSOR",
        " mz_timestamp  | mz_state | name  ",
        "---------------+----------+-------",
    ]));
    assert!(
        run.stdout.contains(" | upsert   | apple\n(1 row)"),
        "{}",
        run.stdout
    );
    run.assert_stdout_contains(&block(&[
        " mz_timestamp | mz_state | name ",
        "--------------+----------+------",
        "(0 rows)",
        "",
        "COMMIT",
    ]));
    assert!(
        run.stdout.ends_with("\nwalkthrough end\n"),
        "the script did not run to its end:\n{}",
        run.stdout
    );
}

#[test]
fn psql_on_error_stop_exits_with_code_3() {
    let server = Server::start();
    let dir = tempfile::tempdir().expect("create a temp dir for psql files");
    let script = write_file(
        dir.path(),
        "fail.sql",
        "SELECT 'before' AS step;\nSELECT 1 / 0;\nSELECT 'after' AS step;\n",
    );

    let stopped = run_psql(&server, dir.path(), &script, true);
    assert_eq!(
        stopped.status.code(),
        Some(3),
        "ON_ERROR_STOP should make psql exit with 3\n--- stdout ---\n{}\n--- stderr ---\n{}",
        stopped.stdout,
        stopped.stderr
    );
    stopped.assert_stdout_contains("  step  \n--------\n before\n(1 row)\n");
    assert!(!stopped.stdout.contains("after"), "psql ran past the error");
    let error_line = format!("{}:2: ERROR:  division by zero\n", script.display());
    assert!(
        stopped.stderr.ends_with(&error_line),
        "stderr should end with {error_line:?}, got {:?}",
        stopped.stderr
    );

    // Without ON_ERROR_STOP psql reports the error and goes on.
    let continued = run_psql(&server, dir.path(), &script, false);
    assert_eq!(
        continued.status.code(),
        Some(0),
        "stderr: {}",
        continued.stderr
    );
    continued.assert_stdout_contains(" step  \n-------\n after\n(1 row)\n");
    assert!(continued.stderr.contains("ERROR:  division by zero"));
}

/// `\copy ... CSV HEADER`, the pre-9.0 spelling psql still accepts,
/// skips the header line on the way in and writes it on the way out; the
/// tag counts rows, not the header.
#[test]
fn psql_copies_csv_with_header_in_the_old_spelling() {
    let server = Server::start();
    let dir = tempfile::tempdir().expect("create a temp dir for psql files");
    let input = write_file(dir.path(), "in.csv", "a,b\n1,x\n2,\"y, z\"\n");
    let output = dir.path().join("out.csv");
    let script = write_file(
        dir.path(),
        "copy.sql",
        &format!(
            "CREATE TABLE h (a int, b text);\n\\copy h FROM '{}' CSV HEADER\n\\copy h TO '{}' CSV HEADER\nSELECT a, b FROM h ORDER BY a;\n\\copy h FROM '{}' WITH (FORMAT csv, HEADER on, FREEZE on)\nSELECT count(*) AS loaded_twice FROM h;\n",
            input.display(),
            output.display(),
            input.display()
        ),
    );
    let run = run_psql(&server, dir.path(), &script, true);
    assert_eq!(run.status.code(), Some(0), "stderr: {}", run.stderr);
    run.assert_stdout_contains("COPY 2\nCOPY 2\n");
    // Boolean options spelled `on`, and FREEZE, as pgbench -i writes them.
    run.assert_stdout_contains(" loaded_twice \n--------------\n            4\n");
    run.assert_stdout_contains(" 2 | y, z\n");
    let written = std::fs::read_to_string(&output).expect("read the written csv");
    assert_eq!(written, "a,b\n1,x\n2,\"y, z\"\n");
}

/// psql's listing meta-commands read `pg_catalog` (`pg_class`,
/// `pg_namespace`, `pg_am`, `pg_index`, `pg_database`) and call
/// `pg_table_is_visible`, `pg_get_userbyid` and `pg_encoding_to_char`;
/// each must list what the session can see, as PostgreSQL 15 prints it.
#[test]
fn psql_lists_relations_schemas_and_databases() {
    let server = Server::start();
    let dir = tempfile::tempdir().expect("create a temp dir for psql files");
    let script = write_file(
        dir.path(),
        "list.sql",
        &block(&[
            "CREATE TABLE orders (id int PRIMARY KEY, customer text, amount int);",
            "CREATE VIEW big_orders AS SELECT id, amount FROM orders WHERE amount > 100;",
            "CREATE MATERIALIZED VIEW totals AS SELECT customer, sum(amount) AS total FROM orders GROUP BY customer;",
            "CREATE INDEX totals_customer ON totals (customer);",
            "CREATE SCHEMA hidden;",
            "CREATE TABLE hidden.elsewhere (x int);",
            "\\d",
            "\\dt",
            "\\dv",
            "\\dm",
            "\\di",
            "\\dn",
            "\\l",
        ]),
    );
    let run = run_psql(&server, dir.path(), &script, true);
    assert_eq!(
        run.status.code(),
        Some(0),
        "psql failed\n--- stdout ---\n{}\n--- stderr ---\n{}",
        run.stdout,
        run.stderr
    );
    assert_eq!(run.stderr, "", "psql wrote to stderr");
    // A table outside the search path is not listed (pg_table_is_visible).
    run.assert_stdout_contains(&block(&[
        " Schema |    Name    |       Type        |  Owner  ",
        "--------+------------+-------------------+---------",
        " public | big_orders | view              | freshet",
        " public | orders     | table             | freshet",
        " public | totals     | materialized view | freshet",
        "(3 rows)",
    ]));
    run.assert_stdout_contains(&block(&[
        " Schema |  Name  | Type  |  Owner  ",
        "--------+--------+-------+---------",
        " public | orders | table | freshet",
        "(1 row)",
    ]));
    run.assert_stdout_contains(&block(&[
        " Schema |    Name    | Type |  Owner  ",
        "--------+------------+------+---------",
        " public | big_orders | view | freshet",
        "(1 row)",
    ]));
    run.assert_stdout_contains(&block(&[
        " Schema |  Name  |       Type        |  Owner  ",
        "--------+--------+-------------------+---------",
        " public | totals | materialized view | freshet",
        "(1 row)",
    ]));
    run.assert_stdout_contains(&block(&[
        " Schema |      Name       | Type  |  Owner  | Table  ",
        "--------+-----------------+-------+---------+--------",
        " public | orders_pkey     | index | freshet | orders",
        " public | totals_customer | index | freshet | totals",
        "(2 rows)",
    ]));
    // psql hides `pg_*` and `information_schema`; Freshet's introspection
    // schema is listed, as it can be queried.
    run.assert_stdout_contains(&block(&[
        "       Name       |  Owner  ",
        "------------------+---------",
        " freshet_internal | freshet",
        " hidden           | freshet",
        " public           | freshet",
        "(3 rows)",
    ]));
    run.assert_stdout_contains("| freshet | UTF8     | C       | C     | ");
}

/// psql's describing meta-commands print the same for the same objects
/// on Freshet as on PostgreSQL 15: `\d` of a table (types with modifiers,
/// NOT NULL, its primary key and unique constraint as indexes, a
/// secondary index), a view, a materialized view, an index and a key's
/// index; the `\dt`/`\di`/`\dv`/`\dm` listings, and `\df`/`\dT`, which
/// list nothing user-defined on either. Both run as a user named
/// `postgres`, so owners print alike.
#[test]
fn psql_describes_objects_as_postgresql_15_does() {
    let pg = crate::pg::PgServer::start();
    let server = Server::start();
    let dir = tempfile::tempdir().expect("create a temp dir for psql files");
    let setup = write_file(
        dir.path(),
        "setup.sql",
        &block(&[
            "CREATE TABLE orders (id int PRIMARY KEY, customer text NOT NULL, \
             amount numeric(10,2), note varchar(20), code char(3), placed date, \
             at timestamptz, flags boolean, big bigint, ratio double precision, UNIQUE (code));",
            "CREATE INDEX orders_customer ON orders (customer);",
            "CREATE VIEW big_orders AS SELECT id, amount FROM orders WHERE amount > 100;",
            "CREATE MATERIALIZED VIEW totals AS SELECT customer, count(*) AS n FROM orders GROUP BY customer;",
            "CREATE INDEX totals_customer ON totals (customer);",
        ]),
    );
    let describe = write_file(
        dir.path(),
        "describe.sql",
        &block(&[
            "\\d orders",
            "\\d big_orders",
            "\\d totals",
            "\\d orders_customer",
            "\\d orders_pkey",
            "\\d orders_code_key",
            "\\dt",
            "\\di",
            "\\dv",
            "\\dm",
            "\\df",
            "\\dT",
        ]),
    );
    let pg_setup = run_psql_at(pg.port(), "postgres", "postgres", dir.path(), &setup, true);
    assert_eq!(pg_setup.status.code(), Some(0), "{}", pg_setup.stderr);
    let ours_setup = run_psql_at(server.port, "postgres", "freshet", dir.path(), &setup, true);
    assert_eq!(ours_setup.status.code(), Some(0), "{}", ours_setup.stderr);
    let expected = run_psql_at(
        pg.port(),
        "postgres",
        "postgres",
        dir.path(),
        &describe,
        true,
    );
    assert_eq!(expected.status.code(), Some(0), "{}", expected.stderr);
    let ours = run_psql_at(
        server.port,
        "postgres",
        "freshet",
        dir.path(),
        &describe,
        true,
    );
    assert_eq!(ours.stderr, "", "psql wrote to stderr");
    assert_eq!(ours.status.code(), Some(0));
    assert!(
        expected.stdout.contains("PRIMARY KEY, btree (id)"),
        "PostgreSQL's output is what the test expects:\n{}",
        expected.stdout
    );
    if ours.stdout != expected.stdout {
        let diff: Vec<String> = expected
            .stdout
            .lines()
            .zip(ours.stdout.lines())
            .filter(|(a, b)| a != b)
            .map(|(a, b)| format!("postgres: {a}\nfreshet:  {b}"))
            .collect();
        panic!(
            "psql output differs from PostgreSQL 15's:\n{}\n--- PostgreSQL ---\n{}\n--- Freshet ---\n{}",
            diff.join("\n"),
            expected.stdout,
            ours.stdout
        );
    }
}
