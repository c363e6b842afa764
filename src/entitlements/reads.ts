/**
 * The reads a decision is made over (docs/decisions.md, "Performance"): one request's (`resolve`: one query, the
 * customer created first when it is missing and the request carries `customerData`), and a batch's items all at once
 * (`resolveMany`: one read per feature named). Both read again over the current catalog when a sync changed it.
 */
import { Effect, Option } from "effect"
import type { CatalogSnapshot, Feature } from "../catalog/model.ts"
import { customerNotFound } from "../domain/errors.ts"
import type { EngineDeps } from "./engineDeps.ts"
import type { EntitlementInput, Mode } from "./meter.ts"
import {
  answered,
  instantFor,
  pickCustomer,
  readsOfMany,
  readsOfOne,
  type Resolution,
  resolveFound
} from "./resolution.ts"
import { denial } from "./state.ts"

export const makeReads = ({ repo, catalog, customers }: EngineDeps) => {
  /**
   * One query reads what the decision needs (docs/decisions.md, "Performance"): the catalog version (a stale cached
   * catalog is reloaded and the read repeated), the customers the reference matches, their live subscriptions,
   * their config of the feature and their balances of it and of its credit systems.
   */
  const resolve = (
    org: string,
    mode: Mode,
    input: EntitlementInput,
    inTransaction: boolean,
    requestedAt: number,
    timestamp: number | undefined
  ): Effect.Effect<Resolution> =>
    Effect.flatMap(catalog.cached(org), ({ snapshot, version }) =>
      resolveOver({ org, mode, input, inTransaction, requestedAt, timestamp }, snapshot, version, false)
    )

  /**
   * `resolve` over one catalog: read, then again over the current catalog if a sync (in any process) changed it, or
   * once more after creating the customer (`customerData`). Combinators, not a generator (see `evaluate` in
   * ./decisions.ts).
   */
  const resolveOver = (
    request: {
      readonly org: string
      readonly mode: Mode
      readonly input: EntitlementInput
      readonly inTransaction: boolean
      readonly requestedAt: number
      readonly timestamp: number | undefined
    },
    snapshot: CatalogSnapshot,
    version: number,
    created: boolean
  ): Effect.Effect<Resolution> => {
    const { org, input, requestedAt } = request
    const feature = snapshot.features.get(input.feature) ?? snapshot.featuresById.get(input.feature)
    const subjects =
      feature === undefined
        ? []
        : [feature.id, ...(snapshot.creditSystemsByFeature.get(feature.slug) ?? []).map((s) => s.id)]
    return Effect.flatMap(
      repo.context(org, input.customer, feature?.id ?? null, subjects, request.inTransaction),
      (context): Effect.Effect<Resolution> => {
        if (context.catalogVersion !== version) {
          return Effect.flatMap(catalog.snapshotAt(org, context.catalogVersion), (current) =>
            resolveOver(request, current, context.catalogVersion, created)
          )
        }
        const reads = readsOfOne(context)
        const picked = pickCustomer(reads, input.customer)
        if (picked._tag === "Answered" || picked._tag === "Resolved") return Effect.succeed(picked)
        if (picked._tag === "Missing") {
          if (input.customerData === undefined || created) {
            return Effect.succeed(answered(denial("customer_not_found", customerNotFound(input.customer).message)))
          }
          return Effect.flatMap(
            Effect.either(
              customers.findOrCreate(org, { ...input.customerData, externalId: input.customer }, requestedAt)
            ),
            (made) =>
              made._tag === "Left"
                ? Effect.succeed(
                    answered(
                      denial(
                        "customer_not_found",
                        `Customer '${input.customer}' could not be created: ${made.left.message}`
                      )
                    )
                  )
                : // Created (with its autoEnable plans): read its subscriptions and balances like any customer's.
                  resolveOver(request, snapshot, version, true)
          )
        }
        const customer = picked.customer
        const now = instantFor(customer, requestedAt)
        if (feature === undefined) {
          return Effect.succeed(answered(denial("feature_not_found", `No feature '${input.feature}'`)))
        }
        const found = (entityId: string | null) =>
          resolveFound({
            org,
            mode: request.mode,
            input,
            snapshot,
            feature,
            customer,
            reads,
            entityId,
            now,
            timestamp: request.timestamp,
            inTransaction: request.inTransaction
          })
        if (input.entity === undefined) return Effect.succeed(found(null))
        return Effect.map(repo.findEntity(org, customer.id, input.entity, now), (entity) =>
          Option.isNone(entity)
            ? answered(denial("entity_not_found", `The customer has no entity '${input.entity}'`))
            : found(entity.value)
        )
      }
    )
  }

  /**
   * A batch's items resolved as `resolve` would resolve each, over one read per feature named (every customer its
   * items reference, one statement; docs/decisions.md, "Batches"); an item naming an entity reads it as a single
   * request does. `into[i]` receives item i's resolution; a customer not found is answered so (the caller may create
   * it and resolve the item again).
   */
  const resolveMany = (
    org: string,
    inputs: ReadonlyArray<EntitlementInput>,
    indices: ReadonlyArray<number>,
    requestedAt: number,
    times: ReadonlyArray<number | undefined>,
    into: Array<Resolution | undefined>
  ) =>
    Effect.gen(function* () {
      if (indices.length === 0) return
      let { snapshot, version } = yield* catalog.cached(org)
      while (true) {
        const groups = new Map<string, { feature: Feature | undefined; items: Array<number> }>()
        for (const i of indices) {
          const named = inputs[i]!.feature
          const feature = snapshot.features.get(named) ?? snapshot.featuresById.get(named)
          const key = feature?.id ?? ""
          const group = groups.get(key)
          if (group === undefined) groups.set(key, { feature, items: [i] })
          else group.items.push(i)
        }
        const contexts = yield* Effect.forEach(
          groups.values(),
          ({ feature, items }) =>
            repo.contexts({
              org,
              refs: [...new Set(items.map((i) => inputs[i]!.customer))],
              feature: feature?.id ?? "",
              // Only its credit systems' balances (whether bonus or purchased credits grant it): a batch decides
              // over the balances its transaction locks, so the feature's own, read here, went unused (bench:
              // 4–35% of the read's PostgreSQL CPU).
              subjects:
                feature === undefined ? [] : (snapshot.creditSystemsByFeature.get(feature.slug) ?? []).map((s) => s.id)
            }),
          { concurrency: "unbounded" }
        )
        const moved = contexts.find((c) => c.catalogVersion !== version)
        if (moved !== undefined) {
          // Another sync (in any process) changed the catalog: decide over the current one.
          version = moved.catalogVersion
          snapshot = yield* catalog.snapshotAt(org, version)
          continue
        }
        const withEntity: Array<number> = []
        ;[...groups.values()].forEach(({ feature, items }, g) => {
          const reads = readsOfMany(contexts[g]!)
          for (const i of items) {
            const input = inputs[i]!
            const picked = pickCustomer(reads, input.customer)
            if (picked._tag === "Missing") {
              into[i] = answered(denial("customer_not_found", customerNotFound(input.customer).message))
            } else if (picked._tag !== "Found") into[i] = picked
            else if (feature === undefined) {
              into[i] = answered(denial("feature_not_found", `No feature '${input.feature}'`))
            } else if (input.entity !== undefined) withEntity.push(i)
            else {
              into[i] = resolveFound({
                org,
                mode: "track",
                input,
                snapshot,
                feature,
                customer: picked.customer,
                reads,
                entityId: null,
                now: instantFor(picked.customer, requestedAt),
                timestamp: times[i],
                inTransaction: false
              })
            }
          }
        })
        yield* Effect.forEach(
          withEntity,
          (i) => {
            const { customerData: _, ...withoutData } = inputs[i]!
            return Effect.map(
              resolve(org, "track", withoutData, false, requestedAt, times[i]),
              (r) => void (into[i] = r)
            )
          },
          { concurrency: "unbounded", discard: true }
        )
        return
      }
    })

  return { resolve, resolveMany }
}

export type Reads = ReturnType<typeof makeReads>
