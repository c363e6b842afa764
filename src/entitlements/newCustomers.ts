import { Data, Effect } from "effect"
import type { CatalogSnapshot } from "../catalog/model.ts"
import { customerEventData } from "../customers/Customers.ts"
import type { CustomerRecord, CustomersRepoShape } from "../customers/CustomersRepo.ts"
import type { OutboundEvent, OutboxShape } from "../events/Outbox.ts"
import { autoEnabledPlans, startAutoEnabled } from "../subscriptions/autoEnabled.ts"
import type { SubscriptionRecord } from "../subscriptions/model.ts"
import type { SubscriptionsRepoShape } from "../subscriptions/SubscriptionsRepo.ts"
import type { HotCustomer } from "./hotStatements.ts"
import type { EntitlementInput } from "./meter.ts"
import type { CustomerReads } from "./resolution.ts"

/**
 * The customers a batch creates (decisions.md §12: an item's `customerData` creates its customer), as data: the
 * customers, the subscriptions of their `autoEnable` plans and their outbound events, written by the batch's own
 * transaction with a few multi-row statements (`writeNewCustomers`), so that they commit with the batch's usage or not
 * at all. Each was one transaction of its own before, several round trips a customer (docs/decisions.md, "New
 * customers in batches").
 */
export interface NewCustomers {
  readonly customers: ReadonlyArray<CustomerRecord>
  readonly subscriptions: ReadonlyArray<SubscriptionRecord>
  readonly events: ReadonlyArray<OutboundEvent>
}

export const noNewCustomers: NewCustomers = { customers: [], subscriptions: [], events: [] }

export const mergeNewCustomers = (all: ReadonlyArray<NewCustomers>): NewCustomers =>
  all.every((n) => n.customers.length === 0)
    ? noNewCustomers
    : {
        customers: all.flatMap((n) => n.customers),
        subscriptions: all.flatMap((n) => n.subscriptions),
        events: all.flatMap((n) => n.events)
      }

/**
 * A customer the batch meant to create exists by the time its transaction writes it (a concurrent request created the
 * same external id or email): the transaction rolls back and the batch is resolved again, finding it.
 */
export class CreationRaced extends Data.TaggedError("CreationRaced")<{}> {}

export type CustomerData = NonNullable<EntitlementInput["customerData"]>

/**
 * Customers planned between two turns given to other requests: 1,000 customers with 20 plans (41,000 events) took
 * 200–300 ms of the one thread, every other organization's request waiting (docs/decisions.md, "New customers in
 * batches").
 */
const PLANNED_A_TURN = 100

/**
 * The new customers of a batch: for each reference, the customer `findOrCreate` would create from the item's
 * `customerData`, created at `now` with its autoEnable plans, and the events their creation sends. `customerIds` has
 * one id a reference; `subscriptionIds` one a reference and autoEnable plan. With the reads that resolve the batch's
 * items over them, as if they had been read. Nothing but the thread's turns: every `PLANNED_A_TURN` customers the
 * thread serves what waits (a timer's turn, so that network reads run too).
 */
export const planNewCustomers = (request: {
  readonly org: string
  readonly snapshot: CatalogSnapshot
  readonly now: number
  readonly creators: ReadonlyArray<{ readonly ref: string; readonly data: CustomerData }>
  readonly customerIds: ReadonlyArray<string>
  readonly subscriptionIds: ReadonlyArray<string>
}): Effect.Effect<{ readonly created: NewCustomers; readonly reads: CustomerReads }> =>
  Effect.gen(function* () {
    const { org, now } = request
    // In creation order, as ids made one after the other are (a customer's subscriptions are read oldest first, by id
    // within one instant): ids of one instant are random past their time.
    const customerIds = [...request.customerIds].sort()
    const subscriptionIds = [...request.subscriptionIds].sort()
    const plans = autoEnabledPlans(request.snapshot)
    const customers: Array<CustomerRecord> = []
    const subscriptions: Array<SubscriptionRecord> = []
    const events: Array<OutboundEvent> = []
    const byRef = new Map<string, HotCustomer>()
    const subscriptionsOf = new Map<string, ReadonlyArray<SubscriptionRecord>>()
    for (let c = 0; c < request.creators.length; c++) {
      if (c > 0 && c % PLANNED_A_TURN === 0) yield* Effect.sleep(0)
      const { ref, data } = request.creators[c]!
      const customer: CustomerRecord = {
        organizationId: org,
        id: customerIds[c]!,
        externalId: ref,
        email: data.email ?? null,
        name: data.name ?? null,
        metadata: data.metadata ?? {},
        overageMaxAmount: null,
        overageOnLimit: null,
        overageCreatedAt: null,
        overageUpdatedAt: null,
        createdAt: now,
        updatedAt: now
      }
      customers.push(customer)
      events.push({
        type: "customer.created",
        data: customerEventData(customer),
        customerId: customer.id,
        subjectId: customer.id
      })
      const started = startAutoEnabled(
        org,
        customer.id,
        plans,
        now,
        subscriptionIds.slice(c * plans.length, (c + 1) * plans.length)
      )
      subscriptions.push(...started.subscriptions)
      for (const e of started.events) {
        events.push({ type: e.type, data: e.data, customerId: customer.id, subjectId: e.subscriptionId })
      }
      byRef.set(ref, {
        id: customer.id,
        externalId: ref,
        email: customer.email,
        overageMaxAmount: null,
        overageOnLimit: null,
        createdAt: now
      })
      // Live ones only, as the read would give them.
      subscriptionsOf.set(
        customer.id,
        started.subscriptions.filter((s) => s.status !== "canceled")
      )
    }
    const reads: CustomerReads = {
      customersOf: (ref) => {
        const found = byRef.get(ref)
        return found === undefined ? [] : [found]
      },
      subscriptionsOf: (customerId) => subscriptionsOf.get(customerId) ?? [],
      configOf: () => undefined,
      balanceOf: () => undefined
    }
    return { created: { customers, subscriptions, events }, reads }
  })

/**
 * The new customers written, inside the caller's transaction: fails with `CreationRaced` (the caller rolls back) if
 * one of them exists already. Customers in external id order, so that two transactions creating some of the same ones
 * wait for each other rather than deadlock.
 */
export const writeNewCustomers = (
  writers: {
    readonly customers: CustomersRepoShape
    readonly subscriptions: SubscriptionsRepoShape
    readonly outbox: OutboxShape
  },
  org: string,
  created: NewCustomers
): Effect.Effect<void, CreationRaced> =>
  created.customers.length === 0
    ? Effect.void
    : Effect.gen(function* () {
        const sorted = [...created.customers].sort((a, b) =>
          a.externalId! < b.externalId! ? -1 : a.externalId! > b.externalId! ? 1 : 0
        )
        const inserted = yield* writers.customers.insertMany(sorted)
        if (inserted !== sorted.length) return yield* new CreationRaced()
        yield* writers.subscriptions.insertMany(created.subscriptions)
        yield* writers.outbox.emitMany(org, created.events)
      })
