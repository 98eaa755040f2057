//! Simple-protocol statements planned once per template: a statement
//! that differs from an earlier one only in its integer literals binds the
//! earlier one's kept plan, as an execution of a prepared statement does
//! ([`freshet_planner::statements::templates`]). A template's text shape
//! ([`freshet_planner::statements::shapes`]) then finds the kept plan
//! from the next statement's text without parsing it.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::common::{ParamValues, ScalarValue};
use freshet_planner::Plan;
use freshet_planner::parser::Statement;
use freshet_planner::statements::shapes::{Shape, ShapeBinding};
use freshet_planner::statements::templates::parameterize;

use super::Coordinator;
use super::read::{PlanStamp, PreparedPlan};
use crate::error::Result;
use crate::session::{Session, TxnStatus};

/// How many statement templates a session keeps (then it starts over).
const MAX_TEMPLATES: usize = 256;

/// A session's kept template plans, and the text shapes that lead to them.
#[derive(Debug, Default)]
pub struct Templates {
    /// Kept plans by their template's text.
    plans: HashMap<String, TemplatePlan>,
    /// Templates with a kept plan, by the shape of a statement text that
    /// was one statement of that template.
    shapes: HashMap<String, ShapedTemplate>,
    /// What the running statement's template taught, for its text's
    /// shape: set by [`Coordinator::templated_plan`], taken by
    /// [`Coordinator::learn_shape`].
    learned: Option<Learned>,
}

/// A session's kept plan of a simple-protocol statement template, with
/// the state it was planned against (`plan` is `None` when the template's
/// plan cannot be bound again: its statements are planned themselves).
#[derive(Debug)]
struct TemplatePlan {
    stamp: PlanStamp,
    plan: Option<Arc<PreparedPlan>>,
}

/// A template as its statements' text shape finds it.
#[derive(Debug)]
struct ShapedTemplate {
    /// Which of the shape's slots are the template's parameters.
    binding: ShapeBinding,
    /// The template, run in place of the statement.
    template: Arc<Statement>,
    /// Its key in [`Templates::plans`].
    key: String,
}

/// A template with a kept plan that the running statement bound.
#[derive(Debug)]
struct Learned {
    /// The statement the template was made of (by address: only the
    /// text's own statement teaches its shape).
    of: usize,
    taken: Vec<datafusion::sql::sqlparser::tokenizer::Location>,
    values: Vec<ScalarValue>,
    template: Arc<Statement>,
    key: String,
}

/// A simple-protocol statement found by its text's shape: run `template`
/// with `params` through `plan`, as Bind and Execute of a prepared
/// `template` would.
pub struct Shaped {
    /// The template of the statement.
    pub template: Arc<Statement>,
    /// The statement's integer literals.
    pub params: ParamValues,
    /// The template's kept plan.
    pub plan: Arc<PreparedPlan>,
}

impl Templates {
    /// Forget what an earlier statement's template taught (a statement of
    /// the extended protocol leaves it behind; only the simple protocol's
    /// text has a shape to learn it for).
    pub fn forget_learned(&mut self) {
        self.learned = None;
    }

    fn make_room(&mut self) {
        if self.plans.len() >= MAX_TEMPLATES || self.shapes.len() >= MAX_TEMPLATES {
            self.plans.clear();
            self.shapes.clear();
        }
    }
}

impl Coordinator {
    /// The plan of a simple-protocol `SELECT`, `UPDATE` or `DELETE` from
    /// its template's kept plan, bound to the statement's integer literals
    /// ([`freshet_planner::statements::templates`]): a statement that
    /// differs from an earlier one only in those literals is not planned
    /// again. The first statement of a template is planned itself; when
    /// that gives a fast-path plan (a peek, or a write by
    /// primary key) the template is planned too and its plan kept if it
    /// can be bound again. `None` plans the statement itself.
    pub(super) async fn templated_plan(
        &self,
        session: &mut Session,
        stmt: &Statement,
    ) -> Option<Result<Plan>> {
        if session.status != TxnStatus::Idle {
            return None;
        }
        let parameterized = parameterize(stmt)?;
        let key = parameterized.template.to_string();
        let kept = session
            .templates
            .plans
            .get(&key)
            .filter(|t| t.stamp.current(self, session))
            .map(|t| t.plan.clone());
        let Some(kept) = kept else {
            // Stamped before planning: a change meanwhile makes the kept
            // plan stale at once, never current by mistake.
            let stamp = self.stamp(session);
            let own = self.plan(session, stmt, None).await;
            // Any peek: one the statement's text decided alone (no steps)
            // is still planned on a blocking thread and read through the
            // workers, where the kept plan binds on the session's thread.
            let fast = match &own {
                Ok(Plan::Peek(_)) => true,
                Ok(Plan::Write(write)) => write.keyed.is_some() && write.returning.is_none(),
                _ => false,
            };
            // Only a template whose statement took the fast path is
            // planned: any other would be planned twice for nothing. One
            // that does not plan is kept as `None` all the same.
            let plan = match fast {
                true => match self.plan(session, &parameterized.template, None).await {
                    Ok(plan) => self.prepare_plan(session, &plan),
                    Err(_) => None,
                },
                false => None,
            };
            let templates = &mut session.templates;
            templates.make_room();
            if plan.is_some() {
                templates.learned = Some(Learned {
                    of: address(stmt),
                    taken: parameterized.taken,
                    values: parameterized.values,
                    template: Arc::new(parameterized.template),
                    key: key.clone(),
                });
            }
            templates.plans.insert(key, TemplatePlan { stamp, plan });
            return Some(own);
        };
        let kept = kept?;
        let params = ParamValues::List(
            parameterized
                .values
                .iter()
                .cloned()
                .map(Into::into)
                .collect(),
        );
        session.templates.learned = Some(Learned {
            of: address(stmt),
            taken: parameterized.taken,
            values: parameterized.values,
            template: Arc::new(parameterized.template),
            key,
        });
        self.prepared_plan(session, kept.as_ref(), Some(&params))
    }

    /// The template and kept plan of simple-protocol text `sql` (one
    /// statement, of shape `shape`) if an earlier statement of the same
    /// shape found them, bound to `sql`'s literals without parsing it.
    /// `None` when the shape is new, a kept literal differs, or the kept
    /// plan is stale: then `sql` is parsed and planned as usual.
    pub fn shaped(&self, session: &Session, shape: &Shape, sql: &str) -> Option<Shaped> {
        if session.status != TxnStatus::Idle {
            return None;
        }
        let shaped = session.templates.shapes.get(&shape.key)?;
        let values = shaped.binding.bind(shape, sql)?;
        let kept = session.templates.plans.get(&shaped.key)?;
        if !kept.stamp.current(self, session) {
            return None;
        }
        Some(Shaped {
            template: Arc::clone(&shaped.template),
            params: ParamValues::List(values.into_iter().map(ScalarValue::into).collect()),
            plan: Arc::clone(kept.plan.as_ref()?),
        })
    }

    /// Remember what `stmt`, just run as the whole of text `sql` (of shape
    /// `shape`), taught about its template, so the next statement of the
    /// same shape is found by [`Coordinator::shaped`]. With no shape
    /// (several statements, or a text the scan does not follow) only
    /// forget it.
    pub fn learn_shape(
        &self,
        session: &mut Session,
        shape: Option<Shape>,
        sql: &str,
        stmt: &Statement,
    ) {
        let learned = session.templates.learned.take();
        let (Some(shape), Some(learned)) = (shape, learned) else {
            return;
        };
        if learned.of != address(stmt) {
            return;
        }
        let Some(binding) = ShapeBinding::new(&shape, sql, &learned.taken, &learned.values) else {
            return;
        };
        let templates = &mut session.templates;
        templates.make_room();
        templates.shapes.insert(
            shape.key,
            ShapedTemplate {
                binding,
                template: learned.template,
                key: learned.key,
            },
        );
    }
}

/// Where `stmt` is, to tell the statement a template was made of from any
/// other (a raw pointer would make the session neither `Send` nor `Sync`).
fn address(stmt: &Statement) -> usize {
    std::ptr::from_ref(stmt) as usize
}
