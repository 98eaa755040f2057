//! How many updates each dataflow keeps in its arrangements, per worker.
//!
//! Differential dataflow reports every batch its traces gain, merge and
//! drop on the `differential/arrange` log; timely reports which dataflow
//! each operator belongs to on the `timely` log. Adding the batch events up
//! per operator, and the operators up per dataflow, gives the records each
//! dataflow holds in arrangements, without touching the operators.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use differential_dataflow::logging::{DifferentialEvent, DifferentialEventBuilder};
use timely::logging::{TimelyEvent, TimelyEventBuilder};
use timely::worker::Worker;

#[derive(Default)]
struct Counts {
    /// Operator id → dataflow index.
    dataflow_of: HashMap<usize, usize>,
    /// Operator id → updates held in its trace.
    records: HashMap<usize, i64>,
}

/// Arrangement sizes on one worker.
#[derive(Clone, Default)]
pub(crate) struct ArrangementSizes {
    counts: Rc<RefCell<Counts>>,
}

impl ArrangementSizes {
    /// Start counting on `worker` (before any dataflow is built). Without a
    /// log registry nothing is counted and every size reads zero.
    pub fn register(worker: &mut Worker) -> Self {
        let sizes = ArrangementSizes::default();
        let Some(mut registry) = worker.log_register() else {
            return sizes;
        };
        let counts = Rc::clone(&sizes.counts);
        registry.insert::<TimelyEventBuilder, _>("timely", move |_time, data| {
            if let Some(events) = data {
                let mut c = counts.borrow_mut();
                for (_, event) in events.iter() {
                    if let TimelyEvent::Operates(op) = event
                        && let Some(dataflow) = op.addr.first()
                    {
                        c.dataflow_of.insert(op.id, *dataflow);
                    }
                }
            }
        });
        let counts = Rc::clone(&sizes.counts);
        registry.insert::<DifferentialEventBuilder, _>(
            "differential/arrange",
            move |_time, data| {
                if let Some(events) = data {
                    let mut c = counts.borrow_mut();
                    for (_, event) in events.iter() {
                        let (op, delta) = match event {
                            DifferentialEvent::Batch(b) => (b.operator, b.length as i64),
                            DifferentialEvent::Merge(m) => match m.complete {
                                Some(n) => (m.operator, n as i64 - (m.length1 + m.length2) as i64),
                                None => continue,
                            },
                            DifferentialEvent::Drop(d) => (d.operator, -(d.length as i64)),
                            _ => continue,
                        };
                        *c.records.entry(op).or_default() += delta;
                    }
                }
            },
        );
        sizes
    }

    /// Updates held in the arrangements of dataflow `index` on this worker.
    pub fn records(&self, index: usize) -> i64 {
        let c = self.counts.borrow();
        c.records
            .iter()
            .filter(|(op, _)| c.dataflow_of.get(op) == Some(&index))
            .map(|(_, n)| *n)
            .sum()
    }

    /// Forget the operators of a dropped dataflow.
    pub fn forget(&self, index: usize) {
        let mut c = self.counts.borrow_mut();
        let ops: Vec<usize> = c
            .dataflow_of
            .iter()
            .filter(|(_, d)| **d == index)
            .map(|(op, _)| *op)
            .collect();
        for op in ops {
            c.dataflow_of.remove(&op);
            c.records.remove(&op);
        }
    }
}
