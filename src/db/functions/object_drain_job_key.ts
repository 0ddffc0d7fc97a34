/**
 * The graphile-worker job key of an object's wake-up, so an object has at
 * most one pending wake-up (drainJobKey in src/db/objectTables.ts spells the
 * same text).
 */
export const definition = `CREATE OR REPLACE FUNCTION public.object_drain_job_key(kind text, id bigint)
 RETURNS text
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE STRICT
AS $function$ select 'drain:' || kind || ':' || id::text $function$`;
