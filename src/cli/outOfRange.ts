import type { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { findOutOfRange } from "../platform/db/outOfRange.ts"
import { type Output, type Parsed, UsageError } from "./args.ts"

/** `out-of-range`: what migration 0010 reported, as it stands now (docs/decisions.md "Numbers"). */
export const outOfRangeCommand = (args: Parsed): Effect.Effect<Output, Error, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    if (args.positional.length > 1)
      return yield* Effect.fail(new UsageError(`unknown command '${args.positional.join(" ")}'`))
    const found = yield* findOutOfRange.pipe(
      Effect.mapError((e) => new Error(`could not read the database: ${String(e)}`))
    )
    return {
      json: { outOfRange: found },
      text:
        found.length === 0
          ? "No stored number is outside its bounds."
          : [
              `${found.length} stored ${found.length === 1 ? "number is" : "numbers are"} outside their bounds ` +
                "(each is read as its bound until fixed at its source):",
              ...found.map((f) => `  ${f.organizationId} ${f.table} ${f.id} ${f.field} = ${f.value} (${f.bound})`)
            ].join("\n")
    } satisfies Output
  })
