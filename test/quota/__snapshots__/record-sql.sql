with
-- the invocations recorded
recorded as (
  insert into invocations (id, workspace_id, workspace_access_id, provider_connection_id, inference_key_id, request_id, trace_id, method, endpoint, requested_model, status, metering_status, streamed, lease_id, quota_units, error_code, error_message, started_at, first_token_at, completed_at, total_latency_ms, provider_latency_ms, nexus_latency_ms, total_ttft_ms, provider_ttft_ms, nexus_ttft_ms, upstream_response_id, attempt_id, attempt_upstream_model, attempt_status, attempt_http_status, attempt_error_code, attempt_started_at, attempt_first_token_at, attempt_completed_at, attempt_duration_ms, route_id, attempts, plan_id, session_id, session)
  select i.id, i.workspace_id, i.workspace_access_id, i.provider_connection_id, i.inference_key_id, i.request_id, i.trace_id, i.method, i.endpoint, i.requested_model, i.status, i.metering_status, i.streamed, i.lease_id, i.quota_units, i.error_code, i.error_message, i.started_at, i.first_token_at, i.completed_at, i.total_latency_ms, i.provider_latency_ms, i.nexus_latency_ms, i.total_ttft_ms, i.provider_ttft_ms, i.nexus_ttft_ms, i.upstream_response_id, i.attempt_id, i.attempt_upstream_model, i.attempt_status, i.attempt_http_status, i.attempt_error_code, i.attempt_started_at, i.attempt_first_token_at, i.attempt_completed_at, i.attempt_duration_ms, i.route_id, i.attempts, i.plan_id, i.session_id, i.session
    from unnest(cast($2 as nexus_invocation_input[])) i
  on conflict (id, started_at) do nothing
  returning id, workspace_id, workspace_access_id, provider_connection_id, inference_key_id, plan_id, status, requested_model, attempt_upstream_model, started_at, completed_at, session
),
-- the leases settled
lc as (
  select x.*, r.started_at as call_started_at, r.provider_connection_id as call_connection_id, r.requested_model as call_requested_model
    from unnest(cast($1 as nexus_lease_call_input[])) x
  join recorded r on r.id = x.invocation_id
), l as (
  update quota_leases q
     set reserved_units = q.reserved_units - t.take, consumed_units = coalesce(q.consumed_units, 0) + t.units
    from (select lease_id, sum(take) as take, sum(units) as units from lc group by lease_id) t
   where q.id = t.lease_id and q.status = 'HELD'
     and q.id in (select id from quota_leases where id in (select lease_id from lc) order by id for update)
  returning q.id
), settled as (
  select q.id, q.workspace_id, q.workspace_access_id, q.quota_period_id, lc.bound, lc.units, lc.charged,
         case when l.id is null then 0 else lc.take end as take,
         lc.usage_id, lc.adjustment_id, lc.invocation_id, lc.input_tokens, lc.cached_tokens, lc.output_tokens, lc.model, lc.at,
         lc.model_rule, lc.input_ppm, lc.cached_ppm, lc.output_ppm, lc.call_started_at, lc.call_connection_id,
         lc.call_requested_model, lc.cache_write_tokens, lc.reasoning_tokens, lc.audio_input_tokens, lc.audio_output_tokens, lc.image_input_tokens, lc.image_output_tokens, lc.images, lc.audio_ms, lc.characters, lc.image_tier, lc.per_call_only
    from lc join quota_leases q on q.id = lc.lease_id left join l on l.id = lc.lease_id
),
-- the periods charged
p as (
  update quota_periods qp
     set reserved_units = qp.reserved_units - t.take, consumed_units = qp.consumed_units + t.units
    from (select quota_period_id, sum(take) as take, sum(units) as units from settled group by quota_period_id) t
   where qp.id = t.quota_period_id
     and qp.id in (select id from quota_periods where id in (select quota_period_id from settled) order by id for update)
  returning qp.id, qp.workspace_id, qp.workspace_access_id, qp.plan_id, qp.quota_strategy_id, qp.granted_units,
            qp.consumed_units, qp.period_end, t.units
),
-- the usage events, priced
u as (
  insert into usage_events (id, workspace_id, workspace_access_id, quota_period_id, lease_id, invocation_id, kind,
  units, input_tokens, cached_input_tokens, output_tokens, model, reason, created_at,
  model_rule, input_multiplier_ppm, cached_input_multiplier_ppm, output_multiplier_ppm, cost_micros, price_id,
  cache_write_tokens, reasoning_tokens, audio_input_tokens, audio_output_tokens, image_input_tokens, image_output_tokens, images, audio_ms, characters, image_tier)
  select s.usage_id, s.workspace_id, s.workspace_access_id, s.quota_period_id, s.id, s.invocation_id, 'USAGE',
         least(s.units, s.bound), s.input_tokens, s.cached_tokens, s.output_tokens, s.model, null, s.at,
         s.model_rule, s.input_ppm, s.cached_ppm, s.output_ppm, mp.cost_micros, mp.id, s.cache_write_tokens, s.reasoning_tokens,
         s.audio_input_tokens, s.audio_output_tokens, s.image_input_tokens, s.image_output_tokens, s.images, s.audio_ms, s.characters, s.image_tier
    from settled s left join lateral (
  select mp.id, mp.per_call,
         round(greatest(s.input_tokens - s.cached_tokens - coalesce(s.cache_write_tokens, 0)
                        - coalesce(s.audio_input_tokens, 0) - coalesce(s.image_input_tokens, 0), 0) * mp.input_per_million
             + s.cached_tokens * coalesce(mp.cached_input_per_million, mp.input_per_million)
             + least(coalesce(s.cache_write_tokens, 0), s.input_tokens) * coalesce(mp.cache_write_per_million, mp.input_per_million)
             + greatest(s.output_tokens - coalesce(s.reasoning_tokens, 0)
                        - coalesce(s.audio_output_tokens, 0) - coalesce(s.image_output_tokens, 0), 0) * mp.output_per_million
             + least(coalesce(s.reasoning_tokens, 0), s.output_tokens) * coalesce(mp.reasoning_per_million, mp.output_per_million)
             + coalesce(s.audio_input_tokens, 0) * coalesce(mp.audio_input_per_million, mp.input_per_million)
             + coalesce(s.image_input_tokens, 0) * coalesce(mp.image_input_per_million, mp.input_per_million)
             + coalesce(s.audio_output_tokens, 0) * coalesce(mp.audio_output_per_million, mp.output_per_million)
             + coalesce(s.image_output_tokens, 0) * coalesce(mp.image_output_per_million, mp.output_per_million)
             + coalesce(s.images * coalesce((mp.per_image_tier ->> s.image_tier)::numeric, mp.per_image) * 1000000, 0)
             + coalesce(s.audio_ms * mp.per_second * 1000, 0)
             + coalesce(s.characters * mp.characters_per_million, 0)
             + coalesce(mp.per_call * 1000000, 0))::bigint as cost_micros
    from model_prices mp
   where mp.workspace_id = s.workspace_id
     and mp.effective_from <= s.call_started_at and (mp.effective_to is null or mp.effective_to > s.call_started_at)
     and (mp.model_pattern in (s.model, s.call_requested_model) or s.model like mp.model_like
          or s.call_requested_model like mp.model_like)
     and (mp.provider_connection_id = s.call_connection_id
          or (mp.provider_connection_id is null
              and (mp.protocol_profile is null
                   or mp.protocol_profile = (select pc.protocol_profile from provider_connections pc where pc.id = s.call_connection_id))))
   order by mp.provider_connection_id is null, mp.protocol_profile is null,
            not (mp.model_pattern = s.model or s.model like mp.model_like), mp.model_like is not null, length(mp.model_pattern) desc
   limit 1) mp on true
   where s.charged and (s.per_call_only is null or mp.per_call is not null)
  returning id, workspace_id, workspace_access_id, invocation_id, kind, created_at, model, units, input_tokens, cached_input_tokens, output_tokens, cost_micros, price_id, audio_input_tokens, audio_output_tokens, image_input_tokens, image_output_tokens, images, audio_ms, characters
), a as (
  insert into usage_events (id, workspace_id, workspace_access_id, quota_period_id, lease_id, invocation_id, kind,
  units, input_tokens, cached_input_tokens, output_tokens, model, reason, created_at,
  model_rule, input_multiplier_ppm, cached_input_multiplier_ppm, output_multiplier_ppm, cost_micros, price_id,
  cache_write_tokens, reasoning_tokens, audio_input_tokens, audio_output_tokens, image_input_tokens, image_output_tokens, images, audio_ms, characters, image_tier)
  select adjustment_id, workspace_id, workspace_access_id, quota_period_id, id, invocation_id, 'ADJUSTMENT',
         units - bound, 0, 0, 0, model, 'consumed_beyond_reservation', at,
         model_rule, input_ppm, cached_ppm, output_ppm, null, null, null, null, null, null, null, null, null, null, null, null
    from settled where charged and units > bound
  returning id, workspace_id, workspace_access_id, invocation_id, kind, created_at, model, units, input_tokens, cached_input_tokens, output_tokens, cost_micros, price_id, audio_input_tokens, audio_output_tokens, image_input_tokens, image_output_tokens, images, audio_ms, characters
), new_events as (
  select * from u union all select * from a
),
-- the thresholds crossed
crossed as (
  select p.id as quota_period_id, p.workspace_id, p.workspace_access_id, p.granted_units, p.consumed_units, p.period_end,
         cast(th.value as int) as percent
    from p p
    join quota_strategies qs on qs.id = p.quota_strategy_id
    join plans pl on pl.id = p.plan_id
    cross join lateral jsonb_array_elements_text(
      coalesce(nullif(qs.event_thresholds, cast('null' as jsonb)), nullif(pl.event_thresholds, cast('null' as jsonb)),
               cast('[80,100]' as jsonb))) th
   where p.granted_units > 0
     and p.consumed_units * 100 >= p.granted_units * cast(th.value as bigint)
     and (p.consumed_units - p.units) * 100 < p.granted_units * cast(th.value as bigint)
), marks as (
  insert into quota_threshold_marks (quota_period_id, percent, event_id, created_at)
  select quota_period_id, percent, nexus_uuid_v7(), now() from crossed
  on conflict do nothing
  returning quota_period_id, percent, event_id, created_at
), threshold_events as (
  insert into events (id, workspace_id, type, data, created_at)
  select m.event_id, c.workspace_id, 'quota.threshold_crossed',
         jsonb_build_object('workspaceAccessId', c.workspace_access_id, 'quotaPeriodId', c.quota_period_id,
           'thresholdPercent', c.percent, 'grantedUnits', cast(c.granted_units as text),
           'consumedUnits', cast(c.consumed_units as text),
           'periodEnd', to_char(c.period_end at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')),
         m.created_at
    from marks m join crossed c on c.quota_period_id = m.quota_period_id and c.percent = m.percent
  returning id, workspace_id, type, created_at
), threshold_messages as (
  insert into webhook_messages (event_id, endpoint_id, workspace_id, status, next_attempt_at, created_at)
  select e.id, ep.id, e.workspace_id, 'PENDING', e.created_at, e.created_at
    from threshold_events e join webhook_endpoints ep on ep.workspace_id = e.workspace_id
   where ep.status = 'ACTIVE' and ep.deleted_at is null
     and (ep.event_types is null or ep.event_types @> jsonb_build_array(e.type))
),
-- the usage rollups
rolled_rows as (
  select workspace_id, hour, workspace_access_id, inference_key_id, model, provider_connection_id, plan_id, sum(units) as units, sum(input_tokens) as input_tokens, sum(cached_input_tokens) as cached_input_tokens, sum(output_tokens) as output_tokens, sum(events) as events, sum(cost_micros) as cost_micros, sum(unpriced_events) as unpriced_events, sum(calls) as calls, sum(failed_calls) as failed_calls, sum(refused_calls) as refused_calls, sum(audio_input_tokens) as audio_input_tokens, sum(audio_output_tokens) as audio_output_tokens, sum(image_input_tokens) as image_input_tokens, sum(image_output_tokens) as image_output_tokens, sum(images) as images, sum(audio_ms) as audio_ms, sum(characters) as characters
    from (
  select e.workspace_id, date_bin('1 hour', e.created_at, timestamptz '2000-01-01T00:00:00Z') as hour, e.workspace_access_id,
         coalesce(e.model, '') as model, coalesce(c.provider_connection_id::text, '') as provider_connection_id,
         coalesce(c.inference_key_id::text, '') as inference_key_id, coalesce(c.plan_id::text, '') as plan_id,
         e.units, e.input_tokens, e.cached_input_tokens, e.output_tokens, 1 as events, coalesce(e.cost_micros, 0) as cost_micros,
         case when e.kind = 'USAGE' and e.price_id is null then 1 else 0 end as unpriced_events,
         0 as calls, 0 as failed_calls, 0 as refused_calls, coalesce(e.audio_input_tokens, 0) as audio_input_tokens, coalesce(e.audio_output_tokens, 0) as audio_output_tokens, coalesce(e.image_input_tokens, 0) as image_input_tokens, coalesce(e.image_output_tokens, 0) as image_output_tokens, coalesce(e.images, 0) as images, coalesce(e.audio_ms, 0) as audio_ms, coalesce(e.characters, 0) as characters
    from new_events e left join recorded c on c.id = e.invocation_id
  union all
  select c.workspace_id, date_bin('1 hour', coalesce(e.created_at, c.completed_at, c.started_at), timestamptz '2000-01-01T00:00:00Z'), c.workspace_access_id,
         case when e.id is null then coalesce(nullif(c.attempt_upstream_model, ''), c.requested_model) else coalesce(e.model, '') end,
         c.provider_connection_id::text, c.inference_key_id::text, coalesce(c.plan_id::text, ''),
         0, 0, 0, 0, 0, 0, 0, 1,
         case when c.status in ('FAILED', 'UPSTREAM_ERROR') then 1 else 0 end,
         case when c.status = 'REJECTED' then 1 else 0 end, 0, 0, 0, 0, 0, 0, 0
    from recorded c left join new_events e on e.invocation_id = c.id and e.kind = 'USAGE'
   where coalesce(c.session is null, true)) x
   group by workspace_id, hour, workspace_access_id, inference_key_id, model, provider_connection_id, plan_id
), rolled as (
  insert into usage_rollups as r (workspace_id, hour, workspace_access_id, inference_key_id, model, provider_connection_id, plan_id, units, input_tokens, cached_input_tokens, output_tokens, events, cost_micros, unpriced_events, calls, failed_calls, refused_calls, audio_input_tokens, audio_output_tokens, image_input_tokens, image_output_tokens, images, audio_ms, characters)
  select * from rolled_rows order by workspace_id, hour, workspace_access_id, inference_key_id, model, provider_connection_id, plan_id
  on conflict (workspace_id, hour, workspace_access_id, inference_key_id, model, provider_connection_id, plan_id) do update
     set units = r.units + excluded.units, input_tokens = r.input_tokens + excluded.input_tokens, cached_input_tokens = r.cached_input_tokens + excluded.cached_input_tokens, output_tokens = r.output_tokens + excluded.output_tokens, events = r.events + excluded.events, cost_micros = r.cost_micros + excluded.cost_micros, unpriced_events = r.unpriced_events + excluded.unpriced_events, calls = r.calls + excluded.calls, failed_calls = r.failed_calls + excluded.failed_calls, refused_calls = r.refused_calls + excluded.refused_calls, audio_input_tokens = r.audio_input_tokens + excluded.audio_input_tokens, audio_output_tokens = r.audio_output_tokens + excluded.audio_output_tokens, image_input_tokens = r.image_input_tokens + excluded.image_input_tokens, image_output_tokens = r.image_output_tokens + excluded.image_output_tokens, images = r.images + excluded.images, audio_ms = r.audio_ms + excluded.audio_ms, characters = r.characters + excluded.characters
), rolled_series as (
  insert into usage_key_rollups as s (workspace_id, hour, workspace_access_id, inference_key_id, units, input_tokens, cached_input_tokens, output_tokens, events, cost_micros, unpriced_events, calls, failed_calls, refused_calls, audio_input_tokens, audio_output_tokens, image_input_tokens, image_output_tokens, images, audio_ms, characters)
  
  select workspace_id, hour, workspace_access_id, inference_key_id, sum(units), sum(input_tokens), sum(cached_input_tokens), sum(output_tokens), sum(events), sum(cost_micros), sum(unpriced_events), sum(calls), sum(failed_calls), sum(refused_calls), sum(audio_input_tokens), sum(audio_output_tokens), sum(image_input_tokens), sum(image_output_tokens), sum(images), sum(audio_ms), sum(characters)
    from rolled_rows
   group by workspace_id, hour, workspace_access_id, inference_key_id
   order by workspace_id, hour, workspace_access_id, inference_key_id
  on conflict (workspace_id, hour, workspace_access_id, inference_key_id) do update
     set units = s.units + excluded.units, input_tokens = s.input_tokens + excluded.input_tokens, cached_input_tokens = s.cached_input_tokens + excluded.cached_input_tokens, output_tokens = s.output_tokens + excluded.output_tokens, events = s.events + excluded.events, cost_micros = s.cost_micros + excluded.cost_micros, unpriced_events = s.unpriced_events + excluded.unpriced_events, calls = s.calls + excluded.calls, failed_calls = s.failed_calls + excluded.failed_calls, refused_calls = s.refused_calls + excluded.refused_calls, audio_input_tokens = s.audio_input_tokens + excluded.audio_input_tokens, audio_output_tokens = s.audio_output_tokens + excluded.audio_output_tokens, image_input_tokens = s.image_input_tokens + excluded.image_input_tokens, image_output_tokens = s.image_output_tokens + excluded.image_output_tokens, images = s.images + excluded.images, audio_ms = s.audio_ms + excluded.audio_ms, characters = s.characters + excluded.characters
), rolled_day_rows as (
  select r.*, date_trunc('day', r.hour, w.time_zone) as day, w.time_zone
    from rolled_rows r join workspaces w on w.id = r.workspace_id
), rolled_days as (
  insert into usage_day_rollups as d (workspace_id, day, time_zone, model, provider_connection_id, plan_id, units, input_tokens, cached_input_tokens, output_tokens, events, cost_micros, unpriced_events, calls, failed_calls, refused_calls, audio_input_tokens, audio_output_tokens, image_input_tokens, image_output_tokens, images, audio_ms, characters)
  select workspace_id, day, time_zone, model, provider_connection_id, plan_id, sum(units), sum(input_tokens), sum(cached_input_tokens), sum(output_tokens), sum(events), sum(cost_micros), sum(unpriced_events), sum(calls), sum(failed_calls), sum(refused_calls), sum(audio_input_tokens), sum(audio_output_tokens), sum(image_input_tokens), sum(image_output_tokens), sum(images), sum(audio_ms), sum(characters)
    from rolled_day_rows
   group by workspace_id, day, time_zone, model, provider_connection_id, plan_id
   order by workspace_id, day, time_zone, model, provider_connection_id, plan_id
  on conflict (workspace_id, day, time_zone, model, provider_connection_id, plan_id) do update
     set units = d.units + excluded.units, input_tokens = d.input_tokens + excluded.input_tokens, cached_input_tokens = d.cached_input_tokens + excluded.cached_input_tokens, output_tokens = d.output_tokens + excluded.output_tokens, events = d.events + excluded.events, cost_micros = d.cost_micros + excluded.cost_micros, unpriced_events = d.unpriced_events + excluded.unpriced_events, calls = d.calls + excluded.calls, failed_calls = d.failed_calls + excluded.failed_calls, refused_calls = d.refused_calls + excluded.refused_calls, audio_input_tokens = d.audio_input_tokens + excluded.audio_input_tokens, audio_output_tokens = d.audio_output_tokens + excluded.audio_output_tokens, image_input_tokens = d.image_input_tokens + excluded.image_input_tokens, image_output_tokens = d.image_output_tokens + excluded.image_output_tokens, images = d.images + excluded.images, audio_ms = d.audio_ms + excluded.audio_ms, characters = d.characters + excluded.characters
), rolled_day_series as (
  insert into usage_day_key_rollups as d (workspace_id, day, time_zone, workspace_access_id, inference_key_id, units, input_tokens, cached_input_tokens, output_tokens, events, cost_micros, unpriced_events, calls, failed_calls, refused_calls, audio_input_tokens, audio_output_tokens, image_input_tokens, image_output_tokens, images, audio_ms, characters)
  select workspace_id, day, time_zone, workspace_access_id, inference_key_id, sum(units), sum(input_tokens), sum(cached_input_tokens), sum(output_tokens), sum(events), sum(cost_micros), sum(unpriced_events), sum(calls), sum(failed_calls), sum(refused_calls), sum(audio_input_tokens), sum(audio_output_tokens), sum(image_input_tokens), sum(image_output_tokens), sum(images), sum(audio_ms), sum(characters)
    from rolled_day_rows
   group by workspace_id, day, time_zone, workspace_access_id, inference_key_id
   order by workspace_id, day, time_zone, workspace_access_id, inference_key_id
  on conflict (workspace_id, day, time_zone, workspace_access_id, inference_key_id) do update
     set units = d.units + excluded.units, input_tokens = d.input_tokens + excluded.input_tokens, cached_input_tokens = d.cached_input_tokens + excluded.cached_input_tokens, output_tokens = d.output_tokens + excluded.output_tokens, events = d.events + excluded.events, cost_micros = d.cost_micros + excluded.cost_micros, unpriced_events = d.unpriced_events + excluded.unpriced_events, calls = d.calls + excluded.calls, failed_calls = d.failed_calls + excluded.failed_calls, refused_calls = d.refused_calls + excluded.refused_calls, audio_input_tokens = d.audio_input_tokens + excluded.audio_input_tokens, audio_output_tokens = d.audio_output_tokens + excluded.audio_output_tokens, image_input_tokens = d.image_input_tokens + excluded.image_input_tokens, image_output_tokens = d.image_output_tokens + excluded.image_output_tokens, images = d.images + excluded.images, audio_ms = d.audio_ms + excluded.audio_ms, characters = d.characters + excluded.characters
), rolled_late as (
  insert into usage_revisions as v (workspace_id, revision)
  select distinct workspace_id, 1 from rolled_rows where hour < date_trunc('hour', now()) - interval '1 hour'
  on conflict (workspace_id) do update set revision = v.revision + 1
)
-- the costs recorded, per workspace, connection and model
select u.workspace_id, r.provider_connection_id as connection_id, u.model, sum(u.cost_micros) as cost_micros,
       count(*) filter (where u.cost_micros is null) as unpriced,
       exists (select 1 from workspace_budgets b where b.workspace_id = u.workspace_id) as budgeted
  from u join recorded r on r.id = u.invocation_id
 group by u.workspace_id, r.provider_connection_id, u.model
