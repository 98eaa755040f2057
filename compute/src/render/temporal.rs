//! Temporal filters: a row valid over `[from, until)` is inserted at
//! `max(t, from)` and retracted at `max(t, until)`, where `t` is the time
//! of the update that brought it. The output holds updates at times later
//! than the input's; downstream operators (arrangements, the sink,
//! subscribes) hold them until the input frontier passes their time, so a
//! row leaves exactly when its window closes without the input changing.

use differential_dataflow::AsCollection;
use timely::dataflow::operators::vec::map::Map;

use super::compile::Validity;
use super::{Coll, Diff, Time};
use crate::row::Row;

/// The updates of rows with their validity, moved to the times the rows
/// enter and leave.
pub(crate) fn delay<'s>(valid: Coll<'s, (Row, Validity)>) -> Coll<'s, Row> {
    valid
        .inner
        .flat_map(
            |((row, (from, until)), t, r): ((Row, Validity), Time, Diff)| {
                let enter = t.max(from);
                let leave = until.map(|u| t.max(u));
                match leave {
                    // Empty from this update's time on: nothing to say.
                    Some(leave) if leave <= enter => Vec::new(),
                    Some(leave) => vec![(row.clone(), enter, r), (row, leave, -r)],
                    None => vec![(row, enter, r)],
                }
            },
        )
        .as_collection()
}
