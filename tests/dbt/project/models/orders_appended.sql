{{ config(materialized='incremental') }}
select id, amount
from {{ ref('stg_orders') }}
{% if is_incremental() %}
where id > (select coalesce(max(id), 0) from {{ this }})
{% endif %}
