import { Effect } from "effect"
import { reportOutOfRange } from "../outOfRange.ts"
import { COMMIT_BALANCES_FUNCTION } from "./0006_hot_path.ts"
import { onPostgres } from "./statements.ts"

/**
 * Numbers got bounds (decisions.md §1, docs/decisions.md "Numbers").
 *
 * 1. Values stored before them are found and reported, one warning each (organization, table, row, field, value,
 *    bound). Nothing is changed and start-up goes on: the service reads each such value as its bound, and the vendor
 *    fixes it at its source (a sync, a new cap). `npm run cli -- out-of-range` lists them again at any time.
 * 2. `commit_balances` (0006) adds a step's events to their 15-minute rollups held at BIGINT's maximum instead of
 *    overflowing, which was an error failing every draw of the step (as src/entitlements/EntitlementsRepo.ts does
 *    for the other paths).
 */
const OVERFLOWING = "DO UPDATE SET value = usage_rollups.value + excluded.value,"
const SATURATING =
  "DO UPDATE SET value = LEAST(usage_rollups.value::NUMERIC + excluded.value, 9223372036854775807)::BIGINT,"

export const COMMIT_BALANCES_SATURATING = (() => {
  if (!COMMIT_BALANCES_FUNCTION.includes(OVERFLOWING)) throw new Error("0010: commit_balances is not the one of 0006")
  return COMMIT_BALANCES_FUNCTION.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION").replace(
    OVERFLOWING,
    SATURATING
  )
})()

export default Effect.zipRight(onPostgres(COMMIT_BALANCES_SATURATING), Effect.asVoid(reportOutOfRange))
