{{ config(materialized='view') }}
select id, customer, cast(amount as numeric(10, 2)) as amount, status, cast(ordered_at as date) as ordered_at
from {{ ref('raw_orders') }}
