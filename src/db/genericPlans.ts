/**
 * The setting, as a select-list expression, that has the transaction it
 * runs in execute its prepared statements with their generic plans (SET
 * LOCAL: it ends with the transaction).
 *
 * PostgreSQL's default plans a prepared statement afresh on every execution
 * while it guesses the statement-specific plan cheaper, and with array
 * parameters (`id = any($1)`) it always does: a generic plan assumes ten
 * elements. So every drain step replanned each of its statements, and every
 * `?wait` answer its tree's recursive read (whose planning costs more than
 * its execution). Where this is set, the statements' plans do not
 * depend on the values (keys, arrays of keys; the constants partial indexes
 * match are written in the SQL), so one plan per connection serves.
 */
export const GENERIC_PLANS = "set_config('plan_cache_mode', 'force_generic_plan', true)";
