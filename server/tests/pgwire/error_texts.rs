//! Error responses a client sees, beside PostgreSQL 15's for the same
//! statements: SQLSTATE, message, HINT and the `position` psql draws its
//! caret from. Tools and users match on these texts, so they are compared
//! exactly, not just by code.

use tokio_postgres::NoTls;
use tokio_postgres::error::{DbError, ErrorPosition};

use crate::harness::Server;
use crate::pg::PgServer;

/// Set-up run on both servers before the failing statements.
const SETUP: &[&str] = &["CREATE TABLE err_t (a int, b text)"];

/// Statements that fail the same way on both.
const FAILING: &[&str] = &[
    // Syntax errors, in the middle and at the end of the input.
    "SELEC 1",
    "SELECT 1 +",
    "SELECT (1",
    "SELECT 1 +;",
    "SELECT a FROM err_t WHERE",
    "SELECT 1 FROMM err_t",
    "SELECT * FROM err_t\nWHERE a = = 1",
    // Names that do not exist.
    "SELECT * FROM nosuch",
    "SELECT a FROM err_t JOIN nosuch ON true",
    "SELECT nosuchcol FROM err_t",
    "SELECT a, nosuchcol FROM err_t",
    "INSERT INTO nosuch VALUES (1)",
    // Functions and operators with no match for the argument types.
    "SELECT foo(1)",
    "SELECT foo(1, 'a'::text, 2.5)",
    "SELECT a, nosuch_fn(b) FROM err_t",
    "SELECT 1 + 'a'::text",
    "SELECT foo()",
    "SELECT a FROM err_t WHERE b - 1 > 0",
];

/// One error as compared: everything but the server-specific fields
/// (`LOCATION`, `routine`, the severity's translation).
#[derive(Debug, PartialEq)]
struct Shown {
    code: String,
    message: String,
    hint: Option<String>,
    position: Option<u32>,
}

impl From<&DbError> for Shown {
    fn from(e: &DbError) -> Self {
        Shown {
            code: e.code().code().to_owned(),
            message: e.message().to_owned(),
            hint: e.hint().map(str::to_owned),
            position: match e.position() {
                Some(ErrorPosition::Original(p)) => Some(*p),
                _ => None,
            },
        }
    }
}

async fn connect(conn: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(conn, NoTls).await.expect("connect");
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}

async fn error_of(client: &tokio_postgres::Client, sql: &str) -> Shown {
    match client.simple_query(sql).await {
        Ok(_) => panic!("{sql:?} succeeded"),
        Err(e) => Shown::from(
            e.as_db_error()
                .unwrap_or_else(|| panic!("{sql:?}: not a server error: {e}")),
        ),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn error_texts_match_postgres() {
    let postgres = PgServer::start();
    let freshet = Server::start();
    let pg = connect(&postgres.conn_str()).await;
    let fr = freshet.connect().await;
    for sql in SETUP {
        pg.batch_execute(sql).await.expect("set up PostgreSQL");
        fr.batch_execute(sql).await.expect("set up Freshet");
    }
    let mut differences = Vec::new();
    for sql in FAILING {
        let expected = error_of(&pg, sql).await;
        let got = error_of(&fr, sql).await;
        if expected != got {
            differences.push(format!(
                "{sql:?}\n  PostgreSQL: {expected:?}\n  Freshet:    {got:?}"
            ));
        }
    }
    // The session is still usable after every error.
    let rows = fr.simple_query("SELECT 1").await.expect("still usable");
    assert!(!rows.is_empty());
    assert!(
        differences.is_empty(),
        "{} of {} errors differ from PostgreSQL's:\n{}",
        differences.len(),
        FAILING.len(),
        differences.join("\n")
    );
}
