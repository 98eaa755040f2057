//! How DataFusion sees Freshet's catalog while planning one statement.
//!
//! [`PlanningContext`] implements DataFusion's `ContextProvider` over id-form
//! references (see [`crate::query::resolve`]): tables and materialized views become
//! [`BoundTable`]s that read a storage snapshot at the query's chosen
//! time, views are planned from their stored definitions and inlined, and
//! built-in relations read rows the server produces.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, FieldRef, SchemaRef};
use async_trait::async_trait;
use datafusion::catalog::{Session, TableProvider, view::ViewTable};
use datafusion::common::{DFSchema, Result as DfResult, TableReference, plan_datafusion_err};
use datafusion::config::ConfigOptions;
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::datasource::provider_as_source;
use datafusion::execution::SessionState;
use datafusion::logical_expr::planner::{ExprPlanner, TypePlanner};
use datafusion::logical_expr::{
    AggregateUDF, Expr, HigherOrderUDF, LogicalPlan, LogicalPlanBuilder, ScalarUDF,
    TableProviderFilterPushDown, TableSource, TableType, WindowUDF, col,
};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::memory::LazyMemoryExec;
use datafusion::sql::planner::{ContextProvider, ParserOptions, PlannerContext, SqlToRel};
use datafusion::sql::sqlparser::ast;
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;
use freshet_catalog::{ItemDetails, ItemKind};
use freshet_repr::GlobalId;

use crate::builtins::{Builtin, BuiltinRelation, BuiltinSource};
pub use crate::query::binding::{CollectionReader, QueryBinding, ReadContext};
use crate::query::index_scan::{
    IndexSeek, IndexSeekGenerator, KeyedIndex, Whole, choose_seek, constrains_key, keyed_indexes,
    read_whole,
};
use crate::query::part_scan::{self, PartScanExec};
use crate::query::resolve::{NameResolver, ROWS_SCHEMA, Resolved, parse_id_form};

fn partitions(batches: Vec<RecordBatch>, n: usize) -> Vec<Vec<RecordBatch>> {
    let n = n.max(1);
    let mut parts: Vec<Vec<RecordBatch>> = (0..n).map(|_| Vec::new()).collect();
    for (i, b) in batches.into_iter().enumerate() {
        parts[i % n].push(b);
    }
    parts
}

/// What a [`BoundTable`] reads.
#[derive(Debug)]
enum Contents {
    /// A table, materialized view or source, from storage at the query's time.
    Collection(GlobalId),
    /// A built-in relation.
    Builtin(Builtin),
    /// An indexed view, read from its index (by the index's id), with
    /// the storage collections behind the view.
    Index(GlobalId, Vec<GlobalId>),
    /// The rows a write produced, for its RETURNING clause.
    WrittenRows,
}

/// A relation whose rows are fixed once the statement is bound to a read
/// time: storage collections, built-in relations, and written rows.
#[derive(Debug)]
pub struct BoundTable {
    contents: Contents,
    schema: SchemaRef,
    defaults: HashMap<String, Expr>,
    binding: Arc<QueryBinding>,
    /// Indexes on a collection that a scan with key filters seeks in.
    indexes: Vec<KeyedIndex>,
}

impl BoundTable {
    /// The collection read, if this is a storage collection.
    pub fn collection(&self) -> Option<GlobalId> {
        match self.contents {
            Contents::Collection(id) => Some(id),
            _ => None,
        }
    }

    /// For an indexed view: the index, and the storage collections the
    /// view reads.
    pub fn index(&self) -> Option<(GlobalId, &[GlobalId])> {
        match &self.contents {
            Contents::Index(index, inputs) => Some((*index, inputs)),
            _ => None,
        }
    }

    /// The index seek serving a scan with `filters` (pushed down by
    /// DataFusion), if an index's key is fixed by them.
    pub fn seek(&self, filters: &[Expr]) -> Option<IndexSeek> {
        choose_seek(&self.indexes, &self.schema, filters)
    }

    fn batches(&self) -> DfResult<Vec<RecordBatch>> {
        match &self.contents {
            Contents::Collection(id) => {
                read_whole(&self.binding, Whole::Collection(*id), &self.schema)
            }
            Contents::Builtin(builtin) => self.binding.read()?.reader.builtin_rows(*builtin),
            Contents::Index(index, _) => {
                read_whole(&self.binding, Whole::Index(*index), &self.schema)
            }
            Contents::WrittenRows => Ok(self.binding.rows()),
        }
    }
}

#[async_trait]
impl TableProvider for BoundTable {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn table_type(&self) -> TableType {
        match self.contents {
            Contents::Collection(_) | Contents::Index(..) => TableType::Base,
            Contents::Builtin(_) => TableType::View,
            Contents::WrittenRows => TableType::Temporary,
        }
    }

    fn get_column_default(&self, column: &str) -> Option<&Expr> {
        self.defaults.get(column)
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> DfResult<Vec<TableProviderFilterPushDown>> {
        // A stored collection's scan skips parts by its filters (column
        // bounds) and an index seeks by key filters; the query still
        // applies them.
        Ok(filters
            .iter()
            .map(|f| {
                if matches!(self.contents, Contents::Collection(_))
                    || constrains_key(&self.indexes, &self.schema, f)
                {
                    TableProviderFilterPushDown::Inexact
                } else {
                    TableProviderFilterPushDown::Unsupported
                }
            })
            .collect())
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let whole = match &self.contents {
            Contents::Collection(id) => Some(Whole::Collection(*id)),
            Contents::Index(index, _) => Some(Whole::Index(*index)),
            _ => None,
        };
        if let (Some(whole), Some(seek)) = (whole, self.seek(filters)) {
            let generator = IndexSeekGenerator {
                seek,
                whole,
                schema: Arc::clone(&self.schema),
                binding: Arc::clone(&self.binding),
                pending: None,
            };
            let exec = LazyMemoryExec::try_new(
                Arc::clone(&self.schema),
                vec![Arc::new(parking_lot::RwLock::new(generator))],
            )?
            .with_projection(projection.cloned());
            return Ok(Arc::new(exec));
        }
        let n = state.config().target_partitions();
        if let Contents::Collection(id) = &self.contents {
            let read = self.binding.read()?;
            let mut scan = read.reader.scan(*id, read.as_of)?;
            part_scan::prune(scan.as_mut(), state, &self.schema, filters);
            // With filters left to apply above the scan, a limit on the
            // scan's rows would be wrong.
            let limit = if filters.is_empty() { limit } else { None };
            return Ok(Arc::new(PartScanExec::new(
                *id,
                Arc::from(scan),
                Arc::clone(&self.schema),
                projection.cloned(),
                limit,
                n,
            )?));
        }
        Ok(MemorySourceConfig::try_new_exec(
            &partitions(self.batches()?, n),
            Arc::clone(&self.schema),
            projection.cloned(),
        )?)
    }
}

/// DataFusion's view of the catalog while planning one statement.
pub struct PlanningContext<'a> {
    /// The session's DataFusion state (functions, options).
    pub state: &'a SessionState,
    /// Name resolution.
    pub resolver: NameResolver<'a>,
    /// Where scans will read.
    pub binding: Arc<QueryBinding>,
    /// Schema of the rows a RETURNING clause reads, if any.
    pub returning_rows: Option<SchemaRef>,
    sources: RefCell<HashMap<GlobalId, Arc<dyn TableSource>>>,
    view_stack: RefCell<Vec<GlobalId>>,
    /// Whether indexed views are read from their indexes (ad hoc reads) or
    /// inlined (plans that become dataflows, which read only storage).
    read_indexes: bool,
}

impl fmt::Debug for PlanningContext<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PlanningContext").finish_non_exhaustive()
    }
}

/// DataFusion parser options with Postgres behaviour.
pub fn parser_options(state: &SessionState) -> ParserOptions {
    let o = &state.config_options().sql_parser;
    ParserOptions {
        parse_float_as_decimal: o.parse_float_as_decimal,
        enable_ident_normalization: o.enable_ident_normalization,
        enable_options_value_normalization: o.enable_options_value_normalization,
        support_varchar_with_length: o.support_varchar_with_length,
        map_string_types_to_utf8view: o.map_string_types_to_utf8view,
        collect_spans: o.collect_spans,
        default_null_ordering: o.default_null_ordering.as_str().into(),
    }
}

impl<'a> PlanningContext<'a> {
    /// A context for one statement.
    pub fn new(state: &'a SessionState, resolver: NameResolver<'a>) -> Self {
        PlanningContext {
            state,
            resolver,
            binding: Arc::new(QueryBinding::default()),
            returning_rows: None,
            sources: RefCell::new(HashMap::new()),
            view_stack: RefCell::new(Vec::new()),
            read_indexes: true,
        }
    }

    /// Inline every view, indexed or not: for plans that become dataflows
    /// reading only storage. (Otherwise a dataflow reads an indexed view
    /// from the index's arrangement.)
    pub fn inlining_views(mut self) -> Self {
        self.read_indexes = false;
        self
    }

    /// A DataFusion SQL planner over this context.
    pub fn sql_to_rel(&self) -> SqlToRel<'_, Self> {
        SqlToRel::new_with_options(self, parser_options(self.state))
    }

    /// Plan a statement with Postgres literal typing applied to a copy of it.
    pub fn plan_sql_statement(&self, stmt: ast::Statement) -> crate::Result<LogicalPlan> {
        let mut stmt = stmt;
        crate::rewrites::long_chains::reshape(&mut stmt);
        let is_aggregate = |name: &str| self.state.aggregate_functions().contains_key(name);
        crate::rewrites::empty_relations::rewrite(
            &mut stmt,
            &|name| {
                crate::parser::normalize_name(name).is_ok_and(|parts| {
                    matches!(
                        parse_id_form(&parts),
                        Some(Ok(Resolved::System(rel))) if rel.source == BuiltinSource::Empty
                    )
                })
            },
            &is_aggregate,
        );
        crate::rewrites::correlated_subqueries::rewrite(&mut stmt, &is_aggregate);
        crate::rewrites::pg_syntax::rewrite(&mut stmt, &self.resolver)?;
        crate::rewrites::named_windows::rewrite(&mut stmt)?;
        crate::rewrites::output_ordinals::rewrite(&mut stmt)?;
        if let ast::Statement::Query(q) = &mut stmt {
            let output_names = |q: &ast::Query| -> crate::Result<Vec<String>> {
                let plan = self.plan_sql_statement(ast::Statement::Query(Box::new(q.clone())))?;
                Ok(plan
                    .schema()
                    .fields()
                    .iter()
                    .map(|f| f.name().clone())
                    .collect())
            };
            crate::rewrites::set_all::rewrite(&output_names, q)?;
        }
        crate::rewrites::unsupported_constructs::check_supported(&stmt)?;
        crate::rewrites::quantified_subqueries::rewrite_quantified(&mut stmt)?;
        crate::rewrites::in_subquery_values::rewrite(&mut stmt)?;
        crate::rewrites::integer_literals::type_integer_literals(&mut stmt);
        match self.sql_to_rel().sql_statement_to_plan(stmt.clone()) {
            // A repeated output name DataFusion refuses, directly or (when
            // another item reads a column of that name: `SELECT c, c + 1
            // AS c`) as an ambiguous reference; a real ambiguity fails the
            // same way again.
            Err(e)
                if e.to_string().contains("unique expression names")
                    || is_ambiguous_reference(&e) =>
            {
                crate::rewrites::unnamed_select_items::alias_unnamed_items(&mut stmt);
                Ok(self.sql_to_rel().sql_statement_to_plan(stmt)?)
            }
            Err(e) => {
                use crate::query::undefined_function::{mark_calls, unknown_function_name};
                // Plan again with the unknown calls typed, for PostgreSQL's
                // `function f(integer) does not exist`.
                if let Some(name) = unknown_function_name(&e)
                    && mark_calls(&mut stmt, &name)
                    && let Err(typed) = self.sql_to_rel().sql_statement_to_plan(stmt)
                {
                    return Err(typed.into());
                }
                Err(e.into())
            }
            Ok(plan) => Ok(plan),
        }
    }

    /// Plan a SQL expression text against an empty schema (column defaults).
    pub fn plan_scalar_sql(&self, sql: &str) -> DfResult<Expr> {
        let mut expr = Parser::new(&PostgreSqlDialect {})
            .try_with_sql(sql)
            .and_then(|mut p| p.parse_expr())
            .map_err(|e| plan_datafusion_err!("invalid expression {sql:?}: {e}"))?;
        // `nextval('t_id_seq'::regclass)` and other Postgres spellings.
        crate::rewrites::pg_syntax::rewrite(&mut expr, &self.resolver)
            .map_err(|e| plan_datafusion_err!("{e}"))?;
        self.sql_to_rel()
            .sql_to_expr(expr, &DFSchema::empty(), &mut PlannerContext::new())
    }

    fn item_source(&self, id: GlobalId) -> DfResult<Arc<dyn TableSource>> {
        if let Some(s) = self.sources.borrow().get(&id) {
            return Ok(Arc::clone(s));
        }
        let item = self
            .resolver
            .catalog
            .get_item(id)
            .map_err(|e| plan_datafusion_err!("{e}"))?;
        let desc = item
            .desc
            .as_ref()
            .ok_or_else(|| match item.kind {
                ItemKind::Sequence => crate::error::sqlstate_error(
                    freshet_repr::sqlstate::FEATURE_NOT_SUPPORTED,
                    format!(
                        "reading sequence \"{}\" as a relation is not supported; use pg_sequences, nextval or currval",
                        item.name
                    ),
                ),
                ItemKind::Secret => crate::error::sqlstate_error(
                    freshet_repr::sqlstate::WRONG_OBJECT_TYPE,
                    format!("\"{}\" is a secret, not a relation", item.name),
                ),
                ItemKind::Connection => crate::error::sqlstate_error(
                    freshet_repr::sqlstate::WRONG_OBJECT_TYPE,
                    format!("\"{}\" is a connection, not a relation", item.name),
                ),
                ItemKind::Source => crate::error::sqlstate_error(
                    freshet_repr::sqlstate::WRONG_OBJECT_TYPE,
                    format!(
                        "source \"{}\" writes its data to its subsources; read those (SHOW SOURCES lists them)",
                        item.name
                    ),
                ),
                _ => plan_datafusion_err!("\"{}\" is not a relation", item.name),
            })?;
        let source: Arc<dyn TableSource> = match item.kind {
            ItemKind::Table | ItemKind::MaterializedView | ItemKind::Source => {
                let mut defaults = HashMap::new();
                if let ItemDetails::Table {
                    defaults: exprs, ..
                } = &item.details
                {
                    for (column, sql) in desc.columns.iter().zip(exprs) {
                        if let Some(sql) = sql {
                            defaults.insert(column.name.clone(), self.plan_scalar_sql(sql)?);
                        }
                    }
                }
                // NOT NULL is enforced by the sequencer with Postgres's
                // error; DataFusion sees every column as nullable.
                let schema = freshet_repr::nullable_schema(&desc.arrow_schema());
                // Ad hoc reads seek in the object's indexes; dataflows
                // read storage.
                let indexes = if self.read_indexes {
                    keyed_indexes(self.resolver.catalog, id, &schema)
                } else {
                    Vec::new()
                };
                provider_as_source(Arc::new(BoundTable {
                    contents: Contents::Collection(id),
                    schema,
                    defaults,
                    binding: Arc::clone(&self.binding),
                    indexes,
                }))
            }
            // An indexed view is read from its index, not recomputed.
            ItemKind::View
                if let Some((index, rows)) = self.index_of(id).filter(|_| self.read_indexes) =>
            {
                let schema = freshet_repr::nullable_schema(&rows.arrow_schema());
                provider_as_source(Arc::new(BoundTable {
                    contents: Contents::Index(index, self.resolver.catalog.collections_behind(id)),
                    indexes: keyed_indexes(self.resolver.catalog, id, &schema),
                    schema,
                    defaults: HashMap::new(),
                    binding: Arc::clone(&self.binding),
                }))
            }
            ItemKind::View => {
                if self.view_stack.borrow().contains(&id) {
                    return Err(plan_datafusion_err!(
                        "infinite recursion detected in view \"{}\"",
                        item.name
                    ));
                }
                self.view_stack.borrow_mut().push(id);
                let plan = self.plan_view(&item.create_sql, &desc.columns);
                self.view_stack.borrow_mut().pop();
                provider_as_source(Arc::new(ViewTable::new(
                    plan?,
                    Some(item.create_sql.clone()),
                )))
            }
            other => {
                return Err(plan_datafusion_err!(
                    "\"{}\" is {} and cannot be read as a relation",
                    item.name,
                    other.name()
                ));
            }
        };
        self.sources.borrow_mut().insert(id, Arc::clone(&source));
        Ok(source)
    }

    /// An index on `id` and the columns of the rows it holds, if any.
    fn index_of(&self, id: GlobalId) -> Option<(GlobalId, &freshet_repr::RelationDesc)> {
        self.resolver
            .catalog
            .indexes_on(id)
            .find_map(|i| Some((i.id, i.desc.as_ref()?)))
    }

    /// Plan a stored view definition, naming its columns as the catalog does.
    fn plan_view(
        &self,
        create_sql: &str,
        columns: &[freshet_repr::ColumnDesc],
    ) -> DfResult<LogicalPlan> {
        let stmt = Parser::parse_sql(&PostgreSqlDialect {}, create_sql)
            .map_err(|e| plan_datafusion_err!("stored view definition does not parse: {e}"))?
            .pop()
            .ok_or_else(|| plan_datafusion_err!("empty view definition"))?;
        let query = match stmt {
            ast::Statement::CreateView(v) => v.query,
            other => return Err(plan_datafusion_err!("not a view definition: {other}")),
        };
        let plan = self
            .plan_sql_statement(ast::Statement::Query(query))
            .map_err(|e| plan_datafusion_err!("{e}"))?;
        alias_columns(plan, columns.iter().map(|c| c.name.as_str()))
    }
}

/// Rename a plan's output columns.
pub fn alias_columns<'n>(
    plan: LogicalPlan,
    names: impl IntoIterator<Item = &'n str>,
) -> DfResult<LogicalPlan> {
    let exprs: Vec<Expr> = plan
        .schema()
        .columns()
        .into_iter()
        .zip(names)
        .map(|(c, name)| col(c).alias(name))
        .collect();
    LogicalPlanBuilder::from(plan).project(exprs)?.build()
}

impl ContextProvider for PlanningContext<'_> {
    fn get_table_source(&self, name: TableReference) -> DfResult<Arc<dyn TableSource>> {
        let parts: Vec<String> = match &name {
            TableReference::Bare { table } => vec![table.to_string()],
            TableReference::Partial { schema, table } => {
                vec![schema.to_string(), table.to_string()]
            }
            TableReference::Full {
                catalog,
                schema,
                table,
            } => vec![catalog.to_string(), schema.to_string(), table.to_string()],
        };
        if let [schema, _] = parts.as_slice()
            && schema == ROWS_SCHEMA
            && let Some(rows) = &self.returning_rows
        {
            return Ok(provider_as_source(Arc::new(BoundTable {
                contents: Contents::WrittenRows,
                schema: Arc::clone(rows),
                defaults: HashMap::new(),
                binding: Arc::clone(&self.binding),
                indexes: Vec::new(),
            })));
        }
        match parse_id_form(&parts) {
            Some(Ok(Resolved::Item(id))) => self.item_source(id),
            Some(Ok(Resolved::System(rel))) => self.system_source(rel),
            _ => Err(plan_datafusion_err!("relation \"{name}\" does not exist")),
        }
    }

    fn get_table_function_source(
        &self,
        name: &str,
        args: Vec<Expr>,
    ) -> DfResult<Arc<dyn TableSource>> {
        use datafusion::catalog::TableFunctionArgs;
        let func = self
            .state
            .table_functions()
            .get(name)
            .cloned()
            .ok_or_else(|| plan_datafusion_err!("function {name} does not exist"))?;
        let simplifier = datafusion::optimizer::simplify_expressions::ExprSimplifier::new(
            datafusion::optimizer::simplify_expressions::SimplifyContext::builder()
                .with_config_options(Arc::clone(self.state.config_options()))
                .build(),
        );
        let schema = DFSchema::empty();
        let args = args
            .into_iter()
            .map(|a| {
                let e = simplifier
                    .coerce(a, &schema)
                    .and_then(|e| simplifier.simplify(e))?;
                // DataFusion's series take `bigint` bounds; a bound such as
                // `array_upper(a, 1)` is `integer` in PostgreSQL.
                Ok(match e {
                    Expr::Literal(v, meta) if v.data_type().is_integer() => {
                        Expr::Literal(v.cast_to(&DataType::Int64)?, meta)
                    }
                    other => other,
                })
            })
            .collect::<DfResult<Vec<_>>>()?;
        let provider =
            func.create_table_provider_with_args(TableFunctionArgs::new(&args, self.state))?;
        Ok(provider_as_source(provider))
    }

    fn create_cte_work_table(
        &self,
        name: &str,
        schema: SchemaRef,
    ) -> DfResult<Arc<dyn TableSource>> {
        Ok(provider_as_source(Arc::new(
            datafusion::datasource::cte_worktable::CteWorkTable::new(name, schema),
        )))
    }

    fn get_expr_planners(&self) -> &[Arc<dyn ExprPlanner>] {
        self.state.expr_planners()
    }

    fn get_type_planner(&self) -> Option<Arc<dyn TypePlanner>> {
        Some(Arc::new(crate::pg::types::PgTypePlanner))
    }

    fn get_function_meta(&self, name: &str) -> Option<Arc<ScalarUDF>> {
        // Every function is in pg_catalog, which tools name explicitly.
        let name = name.strip_prefix("pg_catalog.").unwrap_or(name);
        if let Some(f) = crate::query::catalog_functions::catalog_function(name, &self.resolver) {
            return Some(f);
        }
        if let Some(f) = crate::query::pg_functions::pg_function(name) {
            return Some(f);
        }
        if name == crate::query::undefined_function::UNDEFINED_FUNCTION {
            return Some(crate::query::undefined_function::udf());
        }
        if name == "mz_now" {
            return Some(crate::query::functions::MzNow::udf(Arc::clone(
                &self.binding,
            )));
        }
        self.state.scalar_functions().get(name).cloned()
    }

    fn get_higher_order_meta(&self, name: &str) -> Option<Arc<HigherOrderUDF>> {
        self.state.higher_order_functions().get(name).cloned()
    }

    fn get_aggregate_meta(&self, name: &str) -> Option<Arc<AggregateUDF>> {
        let name = name.strip_prefix("pg_catalog.").unwrap_or(name);
        self.state.aggregate_functions().get(name).cloned()
    }

    fn get_window_meta(&self, name: &str) -> Option<Arc<WindowUDF>> {
        let name = name.strip_prefix("pg_catalog.").unwrap_or(name);
        self.state.window_functions().get(name).cloned()
    }

    fn get_variable_type(&self, _variable_names: &[String]) -> Option<DataType> {
        None
    }

    fn get_variable_field(&self, _variable_names: &[String]) -> Option<FieldRef> {
        None
    }

    fn options(&self) -> &ConfigOptions {
        self.state.config_options()
    }

    fn udf_names(&self) -> Vec<String> {
        self.state.scalar_functions().keys().cloned().collect()
    }

    fn higher_order_function_names(&self) -> Vec<String> {
        self.state
            .higher_order_functions()
            .keys()
            .cloned()
            .collect()
    }

    fn udaf_names(&self) -> Vec<String> {
        self.state.aggregate_functions().keys().cloned().collect()
    }

    fn udwf_names(&self) -> Vec<String> {
        self.state.window_functions().keys().cloned().collect()
    }
}

impl PlanningContext<'_> {
    fn system_source(&self, rel: &'static BuiltinRelation) -> DfResult<Arc<dyn TableSource>> {
        let schema = rel.desc().arrow_schema();
        match rel.source {
            BuiltinSource::Rows(builtin) => Ok(provider_as_source(Arc::new(BoundTable {
                contents: Contents::Builtin(builtin),
                schema,
                defaults: HashMap::new(),
                binding: Arc::clone(&self.binding),
                indexes: Vec::new(),
            }))),
            BuiltinSource::Empty => {
                let plan = LogicalPlan::EmptyRelation(datafusion::logical_expr::EmptyRelation {
                    produce_one_row: false,
                    schema: Arc::new(DFSchema::try_from(schema)?),
                });
                Ok(provider_as_source(Arc::new(ViewTable::new(plan, None))))
            }
            BuiltinSource::View(sql) => {
                let plan = self
                    .plan_builtin_view(sql, &schema)
                    .map_err(|e| plan_datafusion_err!("{}: {e}", rel.qualified_name()))?;
                Ok(provider_as_source(Arc::new(ViewTable::new(
                    plan,
                    Some(sql.to_string()),
                ))))
            }
        }
    }

    /// Plan a built-in view's query, its columns cast to the relation's
    /// declared types and named as declared.
    fn plan_builtin_view(&self, sql: &str, schema: &SchemaRef) -> crate::Result<LogicalPlan> {
        let mut query = Parser::new(&PostgreSqlDialect {})
            .try_with_sql(sql)
            .and_then(|mut p| p.parse_query())
            .map_err(|e| crate::PlanError::Internal(format!("built-in view: {e}")))?;
        self.resolver.rewrite(&mut *query)?;
        let plan = self.plan_sql_statement(ast::Statement::Query(query))?;
        let exprs: Vec<Expr> = plan
            .schema()
            .columns()
            .into_iter()
            .zip(schema.fields())
            .map(|(c, f)| {
                datafusion::logical_expr::cast(col(c), f.data_type().clone()).alias(f.name())
            })
            .collect();
        Ok(LogicalPlanBuilder::from(plan).project(exprs)?.build()?)
    }
}

/// The index seeks an optimized plan's scans make, with each scan's
/// table: what `EXPLAIN` reports as the indexes serving the query.
pub fn index_seeks(plan: &LogicalPlan) -> Vec<(TableReference, IndexSeek)> {
    use datafusion::common::tree_node::TreeNodeRecursion;
    let mut out = Vec::new();
    let _ = plan.apply_with_subqueries(|node| {
        if let LogicalPlan::TableScan(scan) = node
            && let Ok(provider) = datafusion::datasource::source_as_provider(&scan.source)
        {
            let any: &dyn std::any::Any = provider.as_ref();
            if let Some(seek) = any
                .downcast_ref::<BoundTable>()
                .and_then(|b| b.seek(&scan.filters))
            {
                out.push((scan.table_name.clone(), seek));
            }
        }
        Ok(TreeNodeRecursion::Continue)
    });
    out
}

/// Whether planning failed on an ambiguous column reference.
fn is_ambiguous_reference(e: &datafusion::error::DataFusionError) -> bool {
    matches!(
        e.find_root(),
        datafusion::error::DataFusionError::SchemaError(s, _)
            if matches!(**s, datafusion::common::SchemaError::AmbiguousReference { .. })
    )
}
