import { SqlClient } from "@effect/sql"
import { Clock, Context, Effect, Layer, Option } from "effect"
import type { Customer, CustomerListItem, SetOverageLimit } from "../api/customers.ts"
import { Conflict, customerNotFound, type NotFound } from "../domain/errors.ts"
import { Outbox } from "../events/Outbox.ts"
import { Ids } from "../platform/ids.ts"
import {
  applyInput,
  type BillingDetailsInput,
  BillingDetailsRepo,
  type CustomerBillingDetails,
  isEmptyInput,
  noBillingDetails
} from "./BillingDetailsRepo.ts"
import {
  type CustomerFilter,
  type CustomerMatches,
  type CustomerRecord,
  CustomersRepo,
  type Matchable
} from "./CustomersRepo.ts"

export interface CustomerInput {
  readonly externalId?: string | undefined
  readonly email?: string | undefined
  readonly name?: string | undefined
  readonly metadata?: Record<string, unknown> | undefined
  /** Address, tax ids and tax status (decisions.md §16); absent fields keep what is stored. */
  readonly billing?: BillingDetailsInput | undefined
}

/**
 * What a new customer starts with (its autoEnable plans, from `now`, the instant of its creation): a hook filled in
 * above both features (src/wiring), so customers do not depend on the catalog. It runs inside the transaction that
 * inserts the customer: nobody sees the customer without what the hook writes.
 */
export class CustomerCreatedHook extends Context.Reference<CustomerCreatedHook>()("CustomerCreatedHook", {
  defaultValue:
    () =>
    (_organizationId: string, _customer: CustomerRecord, _now: number): Effect.Effect<void> =>
      Effect.void
}) {}

export interface CustomersShape {
  /** decisions.md §4: by service id, then external id, then email; two different matches are ambiguous. */
  readonly resolve: (organizationId: string, ref: string) => Effect.Effect<CustomerRecord, NotFound | Conflict>
  /**
   * The customer the input names (updated from it), else a new one with its autoEnable plans, created at `now` (the
   * request's instant) in one transaction. The one way customers are created (API, attach, check and track).
   */
  readonly findOrCreate: (
    organizationId: string,
    input: CustomerInput,
    now: number
  ) => Effect.Effect<CustomerRecord, Conflict>
  readonly list: (
    organizationId: string,
    query: CustomerFilter
  ) => Effect.Effect<{ readonly rows: ReadonlyArray<CustomerRecord>; readonly total: number }>
  readonly setOverageLimit: (
    organizationId: string,
    input: SetOverageLimit
  ) => Effect.Effect<CustomerRecord, NotFound | Conflict>
  readonly listAllIds: (organizationId: string) => Effect.Effect<ReadonlyArray<string>>
  /** The customer as a buyer: address, tax ids, tax status (none stored: no address, no ids, `none`). */
  readonly billingDetails: (organizationId: string, customerId: string) => Effect.Effect<CustomerBillingDetails>
}

export class Customers extends Context.Tag("Customers")<Customers, CustomersShape>() {}

export const ambiguous = (ref: string) =>
  new Conflict({ code: "customer_ambiguous", message: `'${ref}' matches more than one customer` })
const emailTaken = (email: string) =>
  new Conflict({ code: "customer_conflict", message: `The email '${email}' belongs to another customer` })

/** The single customer a reference names, if any (pure, over the candidates the store found). */
export const pickMatch = <C extends Matchable>(m: CustomerMatches<C>): Option.Option<C> | "ambiguous" => {
  if (Option.isSome(m.byId)) return m.byId
  if (Option.isSome(m.byExternalId) && Option.isSome(m.byEmail) && m.byExternalId.value.id !== m.byEmail.value.id) {
    return "ambiguous"
  }
  return Option.orElse(m.byExternalId, () => m.byEmail)
}

export const CustomersLive = Layer.effect(
  Customers,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const repo = yield* CustomersRepo
    const ids = yield* Ids
    const outbox = yield* Outbox
    const details = yield* BillingDetailsRepo

    const resolve = (organizationId: string, ref: string): Effect.Effect<CustomerRecord, NotFound | Conflict> =>
      Effect.flatMap(repo.matches(organizationId, ref), (m): Effect.Effect<CustomerRecord, NotFound | Conflict> => {
        const picked = pickMatch(m)
        if (picked === "ambiguous") return Effect.fail(ambiguous(ref))
        return Option.match(picked, { onNone: () => Effect.fail(customerNotFound(ref)), onSome: Effect.succeed })
      })

    /** The existing customer an input names: by external id first, else by email. */
    const existing = (organizationId: string, input: CustomerInput) =>
      Effect.gen(function* () {
        if (input.externalId !== undefined) {
          const byExternal = (yield* repo.matches(organizationId, input.externalId)).byExternalId
          if (Option.isSome(byExternal)) return byExternal
        }
        if (input.email !== undefined) {
          const byEmail = (yield* repo.matches(organizationId, input.email)).byEmail
          if (Option.isSome(byEmail)) {
            // The email belongs to a customer that already has another external id.
            const other = byEmail.value.externalId
            if (input.externalId !== undefined && other !== null && other !== input.externalId) {
              return yield* emailTaken(input.email)
            }
            return byEmail
          }
        }
        return Option.none<CustomerRecord>()
      })

    const updateFrom = (current: CustomerRecord, input: CustomerInput, now: number) =>
      Effect.gen(function* () {
        const next: CustomerRecord = {
          ...current,
          externalId: current.externalId ?? input.externalId ?? null,
          email: input.email ?? current.email,
          name: input.name ?? current.name,
          metadata: { ...current.metadata, ...input.metadata }
        }
        if (!isEmptyInput(input.billing)) {
          const before = yield* details.find(current.organizationId, current.id)
          const after = applyInput(before, input.billing!)
          if (JSON.stringify(after) !== JSON.stringify(before)) {
            yield* details.save(current.organizationId, current.id, after, now)
          }
        }
        const changed = JSON.stringify(next) !== JSON.stringify(current)
        if (!changed) return current
        const stamped = { ...next, updatedAt: now }
        const ok = yield* repo.update(stamped)
        if (!ok) return yield* emailTaken(input.email ?? "")
        return stamped
      })

    /**
     * The customer and its autoEnable subscriptions commit together. A concurrent creator of the same external id or
     * email waits at the unique index for this transaction (PostgreSQL; SQLite runs one transaction at a time), then
     * finds the insert conflicting and reads the committed customer, whole.
     */
    const create = (customer: CustomerRecord, billing: BillingDetailsInput | undefined, now: number) =>
      sql
        .withTransaction(
          Effect.gen(function* () {
            if (!(yield* repo.insert(customer))) return false
            const customerDetails = isEmptyInput(billing) ? noBillingDetails : applyInput(noBillingDetails, billing!)
            if (!isEmptyInput(billing)) {
              yield* details.save(customer.organizationId, customer.id, customerDetails, now)
            }
            yield* outbox.emit(customer.organizationId, {
              type: "customer.created",
              data: customerEventData(customer, customerDetails),
              customerId: customer.id,
              subjectId: customer.id
            })
            const hook = yield* CustomerCreatedHook
            yield* hook(customer.organizationId, customer, now)
            return true
          })
        )
        .pipe(Effect.orDie)

    const findOrCreate = (
      organizationId: string,
      input: CustomerInput,
      now: number
    ): Effect.Effect<CustomerRecord, Conflict> =>
      Effect.gen(function* () {
        // Two attempts: a concurrent request may create the same customer between our read and insert.
        for (let attempt = 0; attempt < 2; attempt++) {
          const found = yield* existing(organizationId, input)
          if (Option.isSome(found)) return yield* updateFrom(found.value, input, now)
          const customer: CustomerRecord = {
            organizationId,
            id: yield* ids.next("cus"),
            externalId: input.externalId ?? null,
            email: input.email ?? null,
            name: input.name ?? null,
            metadata: input.metadata ?? {},
            overageMaxAmount: null,
            overageOnLimit: null,
            overageCreatedAt: null,
            overageUpdatedAt: null,
            createdAt: now,
            updatedAt: now
          }
          if (yield* create(customer, input.billing, now)) return customer
        }
        return yield* emailTaken(input.email ?? "")
      })

    const setOverageLimit = (organizationId: string, input: SetOverageLimit) =>
      Effect.gen(function* () {
        const current = yield* resolve(organizationId, input.customer)
        const now = yield* Clock.currentTimeMillis
        const next: CustomerRecord =
          input.maxOverageAmount === null
            ? {
                ...current,
                overageMaxAmount: null,
                overageOnLimit: null,
                overageCreatedAt: null,
                overageUpdatedAt: null
              }
            : {
                ...current,
                overageMaxAmount: String(input.maxOverageAmount),
                overageOnLimit: input.onLimitReached ?? "block",
                overageCreatedAt: current.overageCreatedAt ?? now,
                overageUpdatedAt: now
              }
        const stamped = { ...next, updatedAt: now }
        yield* repo.update(stamped)
        return stamped
      })

    return {
      resolve,
      findOrCreate,
      list: (organizationId, query) => repo.list(organizationId, query),
      listAllIds: repo.listIds,
      setOverageLimit,
      billingDetails: details.find
    }
  })
)

export const toListItem = (c: CustomerRecord): CustomerListItem => ({
  id: c.id,
  externalId: c.externalId,
  email: c.email,
  name: c.name,
  metadata: c.metadata,
  createdAt: c.createdAt,
  updatedAt: c.updatedAt
})

export const toCustomer = (
  c: CustomerRecord,
  featureConfigs: Customer["billing"]["featureConfigs"] = [],
  creditBalance: Customer["billing"]["creditBalance"] = {},
  details: CustomerBillingDetails = noBillingDetails
): Customer => ({
  success: true,
  ...toListItem(c),
  ...(details.address === null ? {} : { address: details.address }),
  taxIds: details.taxIds,
  taxExempt: details.taxExempt,
  billing: {
    overageLimit:
      c.overageMaxAmount === null
        ? null
        : {
            maxOverageAmount: Number(c.overageMaxAmount),
            onLimitReached: c.overageOnLimit ?? "block",
            createdAt: c.overageCreatedAt ?? c.createdAt,
            updatedAt: c.overageUpdatedAt ?? c.updatedAt
          },
    featureConfigs,
    creditBalance
  }
})

/** A customer as events carry it: its API shape (decisions.md §11). */
export const customerEventData = (c: CustomerRecord, details: CustomerBillingDetails = noBillingDetails) => {
  const { success: _success, ...data } = toCustomer(c, [], {}, details)
  return data
}
