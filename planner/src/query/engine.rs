//! The DataFusion session state every Freshet session starts from.

use std::sync::Arc;

use datafusion::execution::SessionState;
use datafusion::execution::session_state::SessionStateBuilder;
use datafusion::logical_expr::registry::FunctionRegistry;
use datafusion::optimizer::AnalyzerRule;
use datafusion::optimizer::analyzer::resolve_grouping_function::ResolveGroupingFunction;
use datafusion::optimizer::analyzer::type_coercion::TypeCoercion;
use datafusion::prelude::SessionConfig;

use crate::decorrelate::UnnestSubqueries;
use crate::rewrites::checked_arithmetic::CheckedIntegerArithmetic;
use crate::rewrites::sum_bigint_as_numeric::SumBigintAsNumeric;
use crate::rewrites::text_casts::PostgresTextCasts;

/// A DataFusion session configured for Postgres semantics.
pub fn new_session_state(target_partitions: usize) -> SessionState {
    let mut config = SessionConfig::new()
        .with_target_partitions(target_partitions.max(1))
        .with_information_schema(false)
        .with_create_default_catalog_and_schema(false);
    {
        let options = config.options_mut();
        options.sql_parser.dialect = datafusion::config::Dialect::PostgreSQL;
        // `1.5` is numeric in Postgres, not double precision.
        options.sql_parser.parse_float_as_decimal = true;
        options.sql_parser.map_string_types_to_utf8view = false;
        options.sql_parser.enable_ident_normalization = true;
        // NULLs sort as larger than every value, as in Postgres.
        options.sql_parser.default_null_ordering = "nulls_max".into();
        options.execution.time_zone = Some("+00:00".into());
    }
    let checked = CheckedIntegerArithmetic::default();
    let casts = PostgresTextCasts::default();
    let zones = crate::rewrites::session_time_zone::SessionTimeZone::default();
    let mut functions = checked.functions();
    functions.extend(casts.functions());
    functions.extend(zones.functions());
    functions.extend(crate::query::functions::all());
    functions.push(crate::rewrites::array_overlap::udf());
    let analyzer_rules: Vec<Arc<dyn AnalyzerRule + Send + Sync>> = vec![
        Arc::new(crate::rewrites::sort_subqueries::SortSubqueries),
        Arc::new(crate::rewrites::mz_now_comparisons::MzNowComparisons),
        Arc::new(SumBigintAsNumeric),
        Arc::new(crate::rewrites::float_numeric_mixes::FloatNumericMixes),
        Arc::new(ResolveGroupingFunction::new()),
        Arc::new(TypeCoercion::new()),
        Arc::new(checked),
        Arc::new(casts),
        Arc::new(zones),
    ];
    let mut state = SessionStateBuilder::new()
        .with_config(config)
        .with_default_features()
        .with_analyzer_rules(analyzer_rules)
        .with_optimizer_rule(Arc::new(crate::rewrites::long_chains::BalanceBooleanChains))
        .with_physical_optimizer_rule(Arc::new(
            crate::rewrites::long_chains::BalanceFilterPredicates,
        ))
        .build();
    functions.extend(crate::query::functions::decimal_rounding(
        state.scalar_functions(),
    ));
    for f in functions {
        // A function replacing one of DataFusion's removes it under its
        // aliases too (`list_remove` for `array_remove`): a name left
        // pointing at DataFusion's would bring it back, under either name,
        // when the state is rebuilt below.
        if state.scalar_functions().contains_key(f.name()) {
            state
                .deregister_udf(f.name())
                .expect("deregistering built-in functions cannot fail");
        }
        state
            .register_udf(f)
            .expect("registering built-in functions cannot fail");
    }
    // Postgres spells the sample variance `variance` too.
    if let Some(var) = state.aggregate_functions().get("var_samp").cloned() {
        let aliased = var.as_ref().clone().with_aliases(["variance"]);
        state
            .register_udaf(Arc::new(aliased))
            .expect("registering built-in functions cannot fail");
    }
    state
        .register_udaf(crate::query::single_value::udaf())
        .expect("registering built-in functions cannot fail");
    for f in crate::query::jsonb_aggregates::udafs() {
        state
            .register_udaf(f)
            .expect("registering built-in functions cannot fail");
    }
    state
        .register_expr_planner(Arc::new(
            crate::rewrites::mz_now_comparisons::MzNowComparisonPlanner,
        ))
        .expect("registering built-in planners cannot fail");
    state
        .register_expr_planner(Arc::new(crate::query::jsonb_ops::JsonbOperatorPlanner))
        .expect("registering built-in planners cannot fail");
    state.register_udtf(
        "pg_get_keywords",
        Arc::new(crate::query::keywords::Keywords),
    );
    for (name, f) in crate::query::jsonb_table_functions::table_functions() {
        state.register_udtf(name, f);
    }
    // Correlated subqueries DataFusion cannot decorrelate (`decorrelate`).
    let rules = UnnestSubqueries::placed_in(state.optimizers().to_vec());
    // NULL-matching join keys not extended to plain equalities.
    let rules = crate::rewrites::null_equal_joins::NullEqualJoins::placed_in(rules);
    // Array operators first, ahead of DataFusion's own planners (which
    // plan `@>`/`<@` between arrays with NULL elements matching).
    let mut planners: Vec<Arc<dyn datafusion::logical_expr::planner::ExprPlanner>> =
        vec![Arc::new(
            crate::rewrites::array_overlap::ArrayOverlapPlanner,
        )];
    planners.extend(state.expr_planners().iter().cloned());
    let state = SessionStateBuilder::new_from_existing(state)
        .with_expr_planners(planners)
        .with_optimizer_rules(rules)
        .build();
    // Every rule checks the statement's stop flag first (`interrupt`).
    crate::interrupt::interruptible(state)
}
