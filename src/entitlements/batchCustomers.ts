/**
 * The customers a batch creates (its items' `customerData`, once per reference), planned while the batch is prepared:
 * the rare ones (an email an existing customer holds without an external id) created one by one ahead of the
 * transaction as a single request would; the others planned (./newCustomers.ts) for the batch's own transaction to
 * write, and the items naming them resolved over them as they will be (./batchCreations.ts).
 */
import { Effect } from "effect"
import type { InvalidInput } from "../domain/errors.ts"
import { autoEnabledPlans } from "../subscriptions/autoEnabled.ts"
import { type Creator, createdResolution, sortCreators } from "./batchCreations.ts"
import type { EngineDeps } from "./engineDeps.ts"
import type { EntitlementInput } from "./meter.ts"
import { noNewCustomers, planNewCustomers } from "./newCustomers.ts"
import type { BatchItem } from "./preparedBatch.ts"
import type { Reads } from "./reads.ts"
import { readsOfMany, type Resolution } from "./resolution.ts"

/**
 * Items answered `customer_not_found` whose reference the batch creates: resolved again (into `resolutions`) over the
 * customer as it will be. What the batch's transaction writes.
 */
export const makeBatchCustomers =
  ({ repo, catalog, ids }: EngineDeps, { resolve, resolveMany }: Reads) =>
  (
    org: string,
    items: ReadonlyArray<BatchItem>,
    inputs: ReadonlyArray<EntitlementInput>,
    times: ReadonlyArray<number | InvalidInput | undefined>,
    now: number,
    resolutions: Array<Resolution | undefined>
  ) =>
    Effect.gen(function* () {
      const unknown = (i: number) => {
        const r = resolutions[i]
        return r?._tag === "Answered" && r.state.code === "customer_not_found"
      }
      const creators = new Map<string, Creator>()
      items.forEach((item, i) => {
        if (unknown(i) && item.customerData !== undefined && !creators.has(item.customer))
          creators.set(item.customer, { ref: item.customer, data: item.customerData, first: i })
      })
      let created = noNewCustomers
      if (creators.size > 0) {
        // Emails the new customers would take: one read of who holds them.
        const emails = [...new Set([...creators.values()].flatMap((c) => c.data.email?.toLowerCase() ?? []))]
        const owners =
          emails.length === 0
            ? undefined
            : readsOfMany(yield* repo.contexts({ org, refs: emails, feature: "", subjects: [] }))
        const sorted = sortCreators([...creators.values()], (email) =>
          owners?.customersOf(email).find((c) => c.email?.toLowerCase() === email)
        )
        // The rare ones, one by one ahead of the transaction as before (an existing customer takes the reference).
        yield* Effect.forEach(
          sorted.oneByOne,
          ({ first }) =>
            Effect.map(
              resolve(org, "track", inputs[first]!, false, now, times[first] as number | undefined),
              (r) => void (resolutions[first] = r)
            ),
          { concurrency: 4, discard: true }
        )
        const again = items.flatMap((item, i) =>
          unknown(i) && sorted.oneByOne.some((c) => c.ref === item.customer) ? [i] : []
        )
        yield* resolveMany(org, inputs, again, now, times as ReadonlyArray<number | undefined>, resolutions)
        // The others by the batch's own transaction: resolved over them as they will be.
        if (sorted.created.length > 0) {
          const snapshot = (yield* catalog.cached(org)).snapshot
          const plans = autoEnabledPlans(snapshot).length
          const planned = yield* planNewCustomers({
            org,
            snapshot,
            now,
            creators: sorted.created,
            customerIds: yield* ids.nextMany("cus", sorted.created.length),
            subscriptionIds: plans === 0 ? [] : yield* ids.nextMany("sub", sorted.created.length * plans)
          })
          created = planned.created
          items.forEach((item, i) => {
            if (!unknown(i)) return
            const refused = sorted.refused.get(item.customer)
            if (refused !== undefined) resolutions[i] = refused
            else if (planned.reads.customersOf(item.customer).length > 0) {
              resolutions[i] = createdResolution({
                org,
                item,
                snapshot,
                reads: planned.reads,
                requestedAt: now,
                timestamp: times[i] as number | undefined
              })
            }
          })
        } else {
          items.forEach((item, i) => {
            const refused = sorted.refused.get(item.customer)
            if (unknown(i) && refused !== undefined) resolutions[i] = refused
          })
        }
      }
      return created
    })
