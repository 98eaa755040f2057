{{ config(materialized='table') }}
select o.customer, c.country, count(*) as orders, sum(o.amount) as total
from {{ ref('stg_orders') }} o
join {{ ref('customers') }} c on c.name = o.customer
group by o.customer, c.country
