/**
 * The price a call is charged at, in SQL: the statements that write usage events (usage-event-sql.ts) join it per event,
 * so a call's cost is computed with its record, in the batch, never on the response path.
 *
 * The price in force when the call started (`effective_from <= started < effective_to`), of the model the provider said
 * answered (the event's) or of the model the request named (a price of `gpt-4o` prices a call answered as
 * `gpt-4o-2024-08-06`), on the call's connection. Of several, the narrowest wins: a price for the connection before one
 * for its protocol before one for every connection; then one of the answering model before one of the requested; an
 * exact model name before a pattern; a longer pattern before a shorter one.
 */

/**
 * The cost of the kinds beyond text of the row `s` under the price `mp`, in micro-units: audio and image tokens at
 * their prices (else input or output), images, seconds, characters, and the price per call. A row without them (text
 * tokens only) reads each as 0.
 */
const kindsCost = (s: string) => `coalesce(${s}.audio_input_tokens, 0) * coalesce(mp.audio_input_per_million, mp.input_per_million)
             + coalesce(${s}.image_input_tokens, 0) * coalesce(mp.image_input_per_million, mp.input_per_million)
             + coalesce(${s}.audio_output_tokens, 0) * coalesce(mp.audio_output_per_million, mp.output_per_million)
             + coalesce(${s}.image_output_tokens, 0) * coalesce(mp.image_output_per_million, mp.output_per_million)
             + coalesce(${s}.images * coalesce((mp.per_image_tier ->> ${s}.image_tier)::numeric, mp.per_image) * 1000000, 0)
             + coalesce(${s}.audio_ms * mp.per_second * 1000, 0)
             + coalesce(${s}.characters * mp.characters_per_million, 0)
             + coalesce(mp.per_call * 1000000, 0)`;

/**
 * `left join lateral` of the price of the row `s` (its `workspace_id`, `model`, `call_requested_model`,
 * `call_started_at` and `call_connection_id`), as `mp` (`id`, `per_call`, `cost_micros` of the row's counts, rounded
 * half up to a whole micro-unit).
 * The row's tokens: `input_tokens` (all of them), of which `cached_tokens` read from the cache, `cache_write_tokens`
 * written to it, `audio_input_tokens` and `image_input_tokens`; and `output_tokens`, of which `reasoning_tokens`,
 * `audio_output_tokens` and `image_output_tokens`. Tokens written to the cache are charged at the price's cache-write
 * price, reasoning tokens at its reasoning price, audio and image tokens at their own; each as plain input or output
 * when the price has none, or when the answer did not report them apart (null). Then its other kinds (kind-sql.ts):
 * `images` at the price of their `image_tier`, else the price per image; `audio_ms` at the price per second;
 * `characters` at the price per million characters (a kind the price sets no price for costs nothing under it); and
 * the price per call, once. `scale`: a factor of the whole cost before it is rounded (a batch's requests: the batch
 * tier, docs/batches.md); none: 1.
 */
export const priceOfCall = (s: string, scale?: string) => `left join lateral (
  select mp.id, mp.per_call,
         round(${scale ? '(' : ''}greatest(${s}.input_tokens - ${s}.cached_tokens - coalesce(${s}.cache_write_tokens, 0)
                        - coalesce(${s}.audio_input_tokens, 0) - coalesce(${s}.image_input_tokens, 0), 0) * mp.input_per_million
             + ${s}.cached_tokens * coalesce(mp.cached_input_per_million, mp.input_per_million)
             + least(coalesce(${s}.cache_write_tokens, 0), ${s}.input_tokens) * coalesce(mp.cache_write_per_million, mp.input_per_million)
             + greatest(${s}.output_tokens - coalesce(${s}.reasoning_tokens, 0)
                        - coalesce(${s}.audio_output_tokens, 0) - coalesce(${s}.image_output_tokens, 0), 0) * mp.output_per_million
             + least(coalesce(${s}.reasoning_tokens, 0), ${s}.output_tokens) * coalesce(mp.reasoning_per_million, mp.output_per_million)
             + ${kindsCost(s)}${scale ? `) * ${scale}` : ''})::bigint as cost_micros
    from model_prices mp
   where mp.workspace_id = ${s}.workspace_id
     and mp.effective_from <= ${s}.call_started_at and (mp.effective_to is null or mp.effective_to > ${s}.call_started_at)
     and (mp.model_pattern in (${s}.model, ${s}.call_requested_model) or ${s}.model like mp.model_like
          or ${s}.call_requested_model like mp.model_like)
     and (mp.provider_connection_id = ${s}.call_connection_id
          or (mp.provider_connection_id is null
              and (mp.protocol_profile is null
                   or mp.protocol_profile = (select pc.protocol_profile from provider_connections pc where pc.id = ${s}.call_connection_id))))
   order by mp.provider_connection_id is null, mp.protocol_profile is null,
            not (mp.model_pattern = ${s}.model or ${s}.model like mp.model_like), mp.model_like is not null, length(mp.model_pattern) desc
   limit 1) mp on true`;
