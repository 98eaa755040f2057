//! The statements Freshet parses: sqlparser's, and Freshet's own
//! (`SUBSCRIBE`, cursors, `EXPLAIN TIMESTAMP`, item options, `AS OF`, ...),
//! with the text each one prints back as (the catalog stores that text).

use datafusion::sql::sqlparser::ast::{self, Ident, ObjectName};

use super::ident::quote_if_needed;
use super::item_options::{ItemOption, display_options};

/// Kinds of object a Freshet-specific statement may name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ObjectKind {
    /// `TABLE`
    Table,
    /// `VIEW`
    View,
    /// `MATERIALIZED VIEW`
    MaterializedView,
    /// `INDEX`
    Index,
    /// `SOURCE`
    Source,
    /// `SINK`
    Sink,
    /// `SEQUENCE`
    Sequence,
    /// `SECRET`
    Secret,
    /// `CONNECTION`
    Connection,
}

/// A statement as Freshet understands it.
#[derive(Clone, Debug, PartialEq)]
pub enum Statement {
    /// Anything sqlparser parses.
    Sql(Box<ast::Statement>),
    /// `EXPLAIN TIMESTAMP FOR <select>`.
    ExplainTimestamp(Box<ast::Statement>),
    /// `EXPLAIN MATERIALIZED VIEW name`.
    ExplainMaterializedView(ObjectName),
    /// `SHOW CREATE {MATERIALIZED VIEW | SOURCE} name` (the kinds
    /// sqlparser does not parse here).
    ShowCreate(ObjectKind, ObjectName),
    /// `SHOW SOURCES [{FROM | IN} schema]`.
    ShowSources(Option<ObjectName>),
    /// `SHOW SINKS [{FROM | IN} schema]`.
    ShowSinks(Option<ObjectName>),
    /// `CREATE SINK ...`.
    CreateSink(Box<super::sink::CreateSinkStatement>),
    /// `CREATE SOURCE ...`.
    CreateSource(Box<super::source::CreateSourceStatement>),
    /// `CREATE SECRET ...`.
    CreateSecret(Box<super::secret::CreateSecretStatement>),
    /// `ALTER SECRET ... AS ...`.
    AlterSecret(Box<super::secret::AlterSecretStatement>),
    /// `SHOW SECRETS [{FROM | IN} schema]`.
    ShowSecrets(Option<ObjectName>),
    /// `CREATE CONNECTION ...`.
    CreateConnection(Box<super::connection::CreateConnectionStatement>),
    /// `SHOW CONNECTIONS [{FROM | IN} schema]`.
    ShowConnections(Option<ObjectName>),
    /// `DROP {SOURCE} [IF EXISTS] name [, ...] [CASCADE | RESTRICT]`: the
    /// kinds sqlparser's `DROP` does not know.
    DropObjects {
        /// What kind of object.
        kind: ObjectKind,
        /// Whether a missing object is a notice rather than an error.
        if_exists: bool,
        /// The objects.
        names: Vec<ObjectName>,
        /// `CASCADE`: drop what depends on them too.
        cascade: bool,
    },
    /// `EXPLAIN INDEX name`.
    ExplainIndex(ObjectName),
    /// `SHOW INDEXES [ON name]`.
    ShowIndexes(Option<ObjectName>),
    /// `CREATE DEFAULT INDEX [IF NOT EXISTS] ON name`.
    CreateDefaultIndex {
        /// The object indexed.
        on: ObjectName,
        /// Skip (with a notice) if it exists.
        if_not_exists: bool,
    },
    /// `SUBSCRIBE ...` (streamed as `COPY ... TO STDOUT`).
    Subscribe(Box<SubscribeStatement>),
    /// `COPY (SUBSCRIBE ...) TO STDOUT [WITH (option value, ...)]`.
    CopySubscribe {
        /// The subscribe.
        subscribe: Box<SubscribeStatement>,
        /// COPY options, names lower-cased (`format`, `delimiter`, ...).
        options: Vec<(String, Option<String>)>,
    },
    /// `DECLARE name [NO SCROLL] CURSOR [WITHOUT HOLD] FOR <query or
    /// SUBSCRIBE>`.
    Declare {
        /// The cursor's name.
        name: String,
        /// What it reads.
        stmt: Box<Statement>,
    },
    /// `FETCH [FORWARD | NEXT] [count | ALL] [FROM | IN] name
    /// [WITH (timeout = interval)]`.
    Fetch {
        /// The cursor.
        name: String,
        /// Rows wanted (`None`: all available).
        count: Option<u64>,
        /// How long to wait for a first row (`None`: until one comes).
        timeout: Option<String>,
    },
    /// `CREATE {TABLE | MATERIALIZED VIEW | INDEX} ... WITH (RETAIN
    /// HISTORY ..., REFRESH ...)`: the statement without the options.
    CreateWithOptions {
        /// The `CREATE` statement.
        stmt: Box<Statement>,
        /// Its options.
        options: Vec<ItemOption>,
    },
    /// `ALTER {TABLE | MATERIALIZED VIEW | INDEX} [IF EXISTS] name {SET
    /// (options) | RESET (names)}`.
    AlterOptions {
        /// What kind of object.
        kind: ObjectKind,
        /// Whether a missing object is a notice rather than an error.
        if_exists: bool,
        /// The object.
        name: ObjectName,
        /// `SET` options.
        set: Vec<ItemOption>,
        /// `RESET` option names, lower case (`retain history`).
        reset: Vec<String>,
    },
    /// `<query> AS OF [AT LEAST] <time>`.
    SelectAsOf {
        /// The query.
        query: Box<ast::Query>,
        /// Whether `AT LEAST` (any readable time at or after `time`).
        at_least: bool,
        /// The time.
        time: Box<ast::Expr>,
    },
    /// `VACUUM ...` or `ANALYZE ...`: the tables (and columns) named.
    Maintenance {
        /// Which command.
        kind: MaintenanceKind,
        /// The tables, each with the columns named for it.
        tables: Vec<(ObjectName, Vec<Ident>)>,
    },
    /// `REFRESH MATERIALIZED VIEW [CONCURRENTLY] name [WITH [NO] DATA]`.
    RefreshMaterializedView {
        /// The view.
        name: ObjectName,
        /// `WITH DATA` (the default) rather than `WITH NO DATA`.
        with_data: bool,
    },
    /// `ALTER <kind> [IF EXISTS] name RENAME TO new_name`.
    AlterRename {
        /// What kind of object.
        kind: ObjectKind,
        /// Whether a missing object is a notice rather than an error.
        if_exists: bool,
        /// The object.
        name: ObjectName,
        /// Its new (unqualified) name.
        new_name: Ident,
    },
}

/// `VACUUM` or `ANALYZE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MaintenanceKind {
    /// `VACUUM`.
    Vacuum,
    /// `ANALYZE`.
    Analyze,
}

/// What a `SUBSCRIBE` reads.
#[derive(Clone, Debug, PartialEq)]
pub enum SubscribeRelation {
    /// A table, view, materialized view or source.
    Name(ObjectName),
    /// `(query)`.
    Query(Box<ast::Query>),
}

/// The shape of a subscribe's output rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EnvelopeKind {
    /// `ENVELOPE UPSERT`: one row per changed key with its new value.
    Upsert,
    /// `ENVELOPE DEBEZIUM`: one row per changed key with before and after.
    Debezium,
}

/// `SUBSCRIBE [TO] relation [ENVELOPE ...] [WITH (...)] [AS OF [AT LEAST]
/// t] [UP TO t]`.
#[derive(Clone, Debug, PartialEq)]
pub struct SubscribeStatement {
    /// What to follow.
    pub relation: SubscribeRelation,
    /// `ENVELOPE UPSERT | DEBEZIUM (KEY (cols))`.
    pub envelope: Option<(EnvelopeKind, Vec<Ident>)>,
    /// `WITH (name [= value], ...)`, names lower-cased.
    pub options: Vec<(String, Option<ast::Expr>)>,
    /// `AS OF [AT LEAST] t`: whether `AT LEAST`, and `t`.
    pub as_of: Option<(bool, ast::Expr)>,
    /// `UP TO t`.
    pub up_to: Option<ast::Expr>,
}

impl std::fmt::Display for SubscribeStatement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.relation {
            SubscribeRelation::Name(n) => write!(f, "SUBSCRIBE {n}")?,
            SubscribeRelation::Query(q) => write!(f, "SUBSCRIBE ({q})")?,
        }
        if let Some((kind, key)) = &self.envelope {
            let keys: Vec<String> = key.iter().map(|k| k.to_string()).collect();
            let kind = match kind {
                EnvelopeKind::Upsert => "UPSERT",
                EnvelopeKind::Debezium => "DEBEZIUM",
            };
            write!(f, " ENVELOPE {kind} (KEY ({}))", keys.join(", "))?;
        }
        if !self.options.is_empty() {
            let options: Vec<String> = self
                .options
                .iter()
                .map(|(n, v)| match v {
                    Some(v) => format!("{} = {v}", n.to_uppercase()),
                    None => n.to_uppercase(),
                })
                .collect();
            write!(f, " WITH ({})", options.join(", "))?;
        }
        if let Some((at_least, t)) = &self.as_of {
            write!(f, " AS OF {}{t}", if *at_least { "AT LEAST " } else { "" })?;
        }
        if let Some(t) = &self.up_to {
            write!(f, " UP TO {t}")?;
        }
        Ok(())
    }
}

impl std::fmt::Display for Statement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Statement::Sql(s) => write!(f, "{s}"),
            Statement::Subscribe(s) => write!(f, "{s}"),
            Statement::CopySubscribe { subscribe, options } => {
                write!(f, "COPY ({subscribe}) TO STDOUT")?;
                if !options.is_empty() {
                    let options: Vec<String> = options
                        .iter()
                        .map(|(n, v)| match v {
                            Some(v) => format!("{} '{}'", n.to_uppercase(), v.replace('\'', "''")),
                            None => n.to_uppercase(),
                        })
                        .collect();
                    write!(f, " WITH ({})", options.join(", "))?;
                }
                Ok(())
            }
            Statement::Declare { name, stmt } => {
                write!(f, "DECLARE {} CURSOR FOR {stmt}", quote_if_needed(name))
            }
            Statement::Fetch {
                name,
                count,
                timeout,
            } => {
                match count {
                    Some(n) => write!(f, "FETCH {n} ")?,
                    None => write!(f, "FETCH ALL ")?,
                }
                write!(f, "{}", quote_if_needed(name))?;
                if let Some(t) = timeout {
                    write!(f, " WITH (TIMEOUT = '{}')", t.replace('\'', "''"))?;
                }
                Ok(())
            }
            Statement::CreateWithOptions { stmt, options } => {
                let options = display_options(options);
                match stmt.as_ref() {
                    Statement::Sql(s) => match s.as_ref() {
                        ast::Statement::CreateView(view) => write_view(f, view, &options),
                        other => write!(f, "{other} {options}"),
                    },
                    other => write!(f, "{other} {options}"),
                }
            }
            Statement::AlterOptions {
                kind,
                if_exists,
                name,
                set,
                reset,
            } => {
                write!(
                    f,
                    "ALTER {} {}{name} ",
                    kind.keyword(),
                    if *if_exists { "IF EXISTS " } else { "" }
                )?;
                if set.is_empty() {
                    write!(f, "RESET ({})", reset.join(", ").to_uppercase())
                } else {
                    let options = display_options(set);
                    write!(f, "SET {}", options.trim_start_matches("WITH "))
                }
            }
            Statement::SelectAsOf {
                query,
                at_least,
                time,
            } => write!(
                f,
                "{query} AS OF {}{time}",
                if *at_least { "AT LEAST " } else { "" }
            ),
            Statement::ExplainTimestamp(s) => write!(f, "EXPLAIN TIMESTAMP FOR {s}"),
            Statement::ExplainMaterializedView(n) => write!(f, "EXPLAIN MATERIALIZED VIEW {n}"),
            Statement::ExplainIndex(n) => write!(f, "EXPLAIN INDEX {n}"),
            Statement::ShowIndexes(None) => write!(f, "SHOW INDEXES"),
            Statement::ShowIndexes(Some(n)) => write!(f, "SHOW INDEXES ON {n}"),
            Statement::CreateDefaultIndex { on, if_not_exists } => write!(
                f,
                "CREATE DEFAULT INDEX {}ON {on}",
                if *if_not_exists { "IF NOT EXISTS " } else { "" }
            ),
            Statement::ShowCreate(kind, n) => write!(f, "SHOW CREATE {} {n}", kind.keyword()),
            Statement::ShowSources(None) => write!(f, "SHOW SOURCES"),
            Statement::ShowSources(Some(s)) => write!(f, "SHOW SOURCES FROM {s}"),
            Statement::CreateSource(s) => write!(f, "{s}"),
            Statement::ShowSinks(None) => write!(f, "SHOW SINKS"),
            Statement::ShowSinks(Some(s)) => write!(f, "SHOW SINKS FROM {s}"),
            Statement::CreateSink(s) => write!(f, "{s}"),
            Statement::CreateSecret(s) => write!(f, "{s}"),
            Statement::AlterSecret(s) => write!(f, "{s}"),
            Statement::ShowSecrets(None) => write!(f, "SHOW SECRETS"),
            Statement::ShowSecrets(Some(s)) => write!(f, "SHOW SECRETS FROM {s}"),
            Statement::CreateConnection(c) => write!(f, "{c}"),
            Statement::ShowConnections(None) => write!(f, "SHOW CONNECTIONS"),
            Statement::ShowConnections(Some(s)) => write!(f, "SHOW CONNECTIONS FROM {s}"),
            Statement::DropObjects {
                kind,
                if_exists,
                names,
                cascade,
            } => {
                let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
                write!(
                    f,
                    "DROP {} {}{}{}",
                    kind.keyword(),
                    if *if_exists { "IF EXISTS " } else { "" },
                    names.join(", "),
                    if *cascade { " CASCADE" } else { "" }
                )
            }
            Statement::Maintenance { kind, tables } => {
                write!(
                    f,
                    "{}",
                    match kind {
                        MaintenanceKind::Vacuum => "VACUUM",
                        MaintenanceKind::Analyze => "ANALYZE",
                    }
                )?;
                let tables: Vec<String> = tables
                    .iter()
                    .map(|(n, c)| {
                        if c.is_empty() {
                            n.to_string()
                        } else {
                            let c: Vec<String> = c.iter().map(|c| c.to_string()).collect();
                            format!("{n} ({})", c.join(", "))
                        }
                    })
                    .collect();
                if !tables.is_empty() {
                    write!(f, " {}", tables.join(", "))?;
                }
                Ok(())
            }
            Statement::RefreshMaterializedView { name, with_data } => write!(
                f,
                "REFRESH MATERIALIZED VIEW {name}{}",
                if *with_data { "" } else { " WITH NO DATA" }
            ),
            Statement::AlterRename {
                kind,
                if_exists,
                name,
                new_name,
            } => write!(
                f,
                "ALTER {} {}{name} RENAME TO {new_name}",
                kind.keyword(),
                if *if_exists { "IF EXISTS " } else { "" }
            ),
        }
    }
}

impl ObjectKind {
    /// The SQL keyword(s).
    pub fn keyword(&self) -> &'static str {
        match self {
            ObjectKind::Table => "TABLE",
            ObjectKind::View => "VIEW",
            ObjectKind::MaterializedView => "MATERIALIZED VIEW",
            ObjectKind::Index => "INDEX",
            ObjectKind::Source => "SOURCE",
            ObjectKind::Sink => "SINK",
            ObjectKind::Sequence => "SEQUENCE",
            ObjectKind::Secret => "SECRET",
            ObjectKind::Connection => "CONNECTION",
        }
    }
}

/// A view (or materialized view) with Freshet's item options, which go
/// before `AS` where the statement wrote them. Prints the parts the
/// in-place parser ([`super::create`]) accepts.
fn write_view(
    f: &mut std::fmt::Formatter<'_>,
    view: &ast::CreateView,
    options: &str,
) -> std::fmt::Result {
    write!(
        f,
        "CREATE {}{}{}VIEW {}{}",
        if view.or_replace { "OR REPLACE " } else { "" },
        if view.temporary { "TEMPORARY " } else { "" },
        if view.materialized {
            "MATERIALIZED "
        } else {
            ""
        },
        if view.if_not_exists {
            "IF NOT EXISTS "
        } else {
            ""
        },
        view.name
    )?;
    if !view.columns.is_empty() {
        let columns: Vec<String> = view.columns.iter().map(|c| c.to_string()).collect();
        write!(f, " ({})", columns.join(", "))?;
    }
    write!(f, " {options} AS {}", view.query)
}
