import { HttpApiBuilder } from "@effect/platform"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { BillingApi } from "../api/Api.ts"
import { Unavailable } from "../api/errors.ts"

export const SystemHttp = HttpApiBuilder.group(BillingApi, "system", (handlers) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const database = sql.onDialectOrElse({ pg: () => "postgresql" as const, orElse: () => "sqlite" as const })
    const notReady = new Unavailable({ code: "unavailable", message: "The database is not reachable" })
    return handlers
      .handle("health", () => Effect.succeed({ status: "ok" as const }))
      .handle("ready", () =>
        sql`SELECT 1`.pipe(
          Effect.timeoutFail({ duration: "2 seconds", onTimeout: () => notReady }),
          Effect.catchAll(() => Effect.fail(notReady)),
          Effect.catchAllDefect(() => Effect.fail(notReady)),
          Effect.as({ status: "ready" as const, database })
        )
      )
  })
)
