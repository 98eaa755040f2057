-- A singular test: rows returned are failures.
select t.total, o.total
from (select sum(total) as total from {{ ref('customer_totals') }}) t,
     (select sum(amount) as total from {{ ref('stg_orders') }}) o
where t.total <> o.total
