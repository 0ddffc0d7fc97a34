/**
 * The run of length one of slipway_drain_runs: workers of earlier releases
 * call it, so it keeps its signature and meaning.
 */
export const definition = `CREATE OR REPLACE FUNCTION public.slipway_drain_heads(p_kinds text[], p_ids bigint[], p_preempting text[])
 RETURNS SETOF public.commands
 LANGUAGE sql
AS $function$ select * from slipway_drain_runs(p_kinds, p_ids, p_preempting, 1) $function$`;
