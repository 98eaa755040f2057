{{ config(materialized='incremental', unique_key='id') }}
select id, customer, amount, status, ordered_at
from {{ ref('stg_orders') }}
{% if is_incremental() %}
where ordered_at >= (select max(ordered_at) from {{ this }})
{% endif %}
