/**
 * What the engine's parts (./reads.ts, ./decisions.ts, the batch files) are made from: the services they use, taken
 * once by the Layer (./Engine.ts), the balance writer of single draws and the guarded batches of the repository.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Option } from "effect"
import { Catalog } from "../catalog/Catalog.ts"
import { Customers } from "../customers/Customers.ts"
import { CustomersRepo } from "../customers/CustomersRepo.ts"
import { Outbox } from "../events/Outbox.ts"
import { Ids } from "../platform/ids.ts"
import { SubscriptionsRepo } from "../subscriptions/SubscriptionsRepo.ts"
import { makeBalanceWriter } from "./BalanceWriter.ts"
import { EntitlementsRepo } from "./EntitlementsRepo.ts"
import { makeGuardedBatches } from "./guardedBatch.ts"

/**
 * Write batches in flight at once, and each idle lane waiting for the draws of the same turn of the event loop
 * (docs/decisions.md, "Performance"). One lane on both databases: SQLite has one connection; on PostgreSQL one lane
 * beat 2, 4 and 8 at peak and at half of it (fewer, bigger batches: fewer round trips and fewer busy backends on a
 * machine whose cores the service shares with the database).
 */
const WRITER = { lanes: 1, gather: true } as const

export const engineDeps = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const repo = yield* EntitlementsRepo
  const catalog = yield* Catalog
  const customers = yield* Customers
  const writers = {
    customers: yield* CustomersRepo,
    subscriptions: yield* SubscriptionsRepo,
    outbox: yield* Outbox
  }
  const ids = yield* Ids
  const outbox = yield* Outbox
  const writer = makeBalanceWriter(repo, WRITER)
  const guardedBatches = Option.map(repo.guarded, makeGuardedBatches)
  return { sql, repo, catalog, customers, writers, ids, outbox, writer, guardedBatches }
})

export type EngineDeps = Effect.Effect.Success<typeof engineDeps>
