import { SqlClient } from "@effect/sql"
import { Clock, Context, Effect, Layer, Option } from "effect"
import type { AddEntity, RemoveEntity } from "../api/entities.ts"
import { Catalog } from "../catalog/Catalog.ts"
import { type CatalogSnapshot, type Feature, isFree } from "../catalog/model.ts"
import { Customers } from "../customers/Customers.ts"
import { Conflict, InvalidInput, NotFound } from "../domain/errors.ts"
import { FACTOR_BIGINT, microToNumber, toMicro } from "../domain/quantity.ts"
import { EntitlementsRepo } from "../entitlements/EntitlementsRepo.ts"
import { type Grant, resolveGrant } from "../entitlements/grants.ts"
import { Ids } from "../platform/ids.ts"
import { rollFreePeriod } from "../subscriptions/model.ts"
import { Subscriptions } from "../subscriptions/Subscriptions.ts"
import { EntitiesRepo, type EntityRecord, isLive } from "./EntitiesRepo.ts"

export interface EntityAddResult {
  readonly entityId: string
  readonly featureId: string
  readonly count: number
  readonly limit: number | null
  readonly remaining: number | null
  readonly restored: boolean
}

export interface EntityRemoveResult {
  readonly entityId: string
  readonly count: number
}

/** Seats and licensed members of `non_consumable` features (decisions.md §6). */
export interface EntitiesShape {
  readonly add: (org: string, input: AddEntity) => Effect.Effect<EntityAddResult, NotFound | Conflict | InvalidInput>
  readonly remove: (
    org: string,
    input: RemoveEntity
  ) => Effect.Effect<EntityRemoveResult, NotFound | Conflict | InvalidInput>
}

export class Entities extends Context.Tag("Entities")<Entities, EntitiesShape>() {}

const featureNotFound = (ref: string) => new NotFound({ code: "feature_not_found", message: `No feature '${ref}'` })

const entityNotFound = (entity: string, feature: Feature) =>
  new NotFound({ code: "entity_not_found", message: `The customer has no entity '${entity}' of '${feature.slug}'` })

/** The feature a reference names (slug, then id), which must be a metered `non_consumable` one. */
const entityFeature = (snapshot: CatalogSnapshot, ref: string): Effect.Effect<Feature, NotFound | InvalidInput> => {
  const feature = snapshot.features.get(ref) ?? snapshot.featuresById.get(ref)
  if (feature === undefined) return Effect.fail(featureNotFound(ref))
  if (feature.type === "metered" && feature.meterType === "non_consumable") return Effect.succeed(feature)
  const kind = feature.type === "boolean" ? "a boolean feature" : "a consumable metered feature"
  const message = `Entities exist only for metered non_consumable features; '${feature.slug}' is ${kind}`
  return Effect.fail(new InvalidInput({ message, issues: [{ path: "feature", message }] }))
}

/** limit − count, exactly (the limit in micro-units), never below 0. */
const remainingOf = (limitMicro: bigint | null, count: number) => {
  if (limitMicro === null) return null
  const rest = limitMicro - BigInt(count) * FACTOR_BIGINT
  return rest > 0n ? microToNumber(rest) : 0
}

export const EntitiesLive = Layer.effect(
  Entities,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const repo = yield* EntitiesRepo
    const entitlements = yield* EntitlementsRepo
    const catalog = yield* Catalog
    const customers = yield* Customers
    const subscriptions = yield* Subscriptions
    const ids = yield* Ids

    /** Customer, feature and the customer's grant of it at `now` (a denial is `undefined`, with its reason). */
    const context = (org: string, input: { readonly customer: string; readonly feature: string }, now: number) =>
      Effect.gen(function* () {
        const customer = yield* customers.resolve(org, input.customer)
        const snapshot = yield* catalog.snapshot(org)
        const feature = yield* entityFeature(snapshot, input.feature)
        const granting = yield* subscriptions.granting(org, customer.id, now)
        const resolution = resolveGrant(snapshot, feature, granting, now)
        return { customer, feature, resolution }
      })

    /**
     * Whether one more entity fits: under the limit, or beyond it when overage is charged (the customer's
     * per-feature config wins over the plan's terms) and the per-feature overage cap leaves room.
     */
    const fits = (org: string, customerId: string, feature: Feature, grant: Grant, count: number) =>
      Effect.gen(function* () {
        // Exact, in micro-units (a limit may have six decimals and be up to 1e12; summed over plans, more).
        const wanted = BigInt(count + 1) * FACTOR_BIGINT
        if (grant.limitMicro === null || wanted <= grant.limitMicro) return true
        const config = yield* entitlements.featureConfig(org, customerId, feature.id)
        const overage = Option.match(config, { onNone: () => grant.terms?.overage, onSome: (c) => c.overage })
        if (overage !== "charge") return false
        const maxOverageUnits = Option.match(config, {
          onNone: () => {
            const max = grant.terms?.maxOverageUnits ?? null
            return max === null ? null : toMicro(max)
          },
          onSome: (c) => c.maxOverageUnits
        })
        return maxOverageUnits === null || wanted - grant.limitMicro <= maxOverageUnits
      })

    const add = (org: string, input: AddEntity) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const { customer, feature, resolution } = yield* context(org, input, now)
        const grant = resolution._tag === "Granted" ? resolution.grant : undefined
        const result = (count: number, restored: boolean): EntityAddResult => ({
          entityId: input.entity,
          featureId: feature.id,
          count,
          limit: grant?.limit ?? null,
          remaining: remainingOf(grant?.limitMicro ?? null, count),
          restored
        })

        // Count and write under the customer's lock: two adds at count = limit − 1 cannot both pass.
        return yield* sql
          .withTransaction(
            Effect.gen(function* () {
              yield* repo.lockCustomer(org, customer.id)
              const existing = yield* repo.find(org, customer.id, feature.id, input.entity)
              const live = Option.filter(existing, (e) => isLive(e, now))
              if (Option.isSome(live) && live.value.status === "active") {
                return yield* new Conflict({
                  code: "entity_exists",
                  message: `The customer already has an active entity '${input.entity}' of '${feature.slug}'`
                })
              }
              if (grant === undefined) {
                const why =
                  resolution._tag === "Denied" && resolution.code === "no_active_subscription"
                    ? "The customer has no active subscription"
                    : `No plan of the customer includes '${feature.slug}'`
                return yield* new Conflict({ code: "limit_exceeded", message: `${why}: no entity can be added` })
              }
              const details = {
                name: input.name ?? null,
                email: input.email ?? null,
                metadata: input.metadata ?? {}
              }
              if (Option.isSome(live)) {
                // Pending removal, not yet due: restored, with no limit check (it never stopped counting).
                const current = live.value
                yield* repo.update({
                  ...current,
                  name: input.name ?? current.name,
                  email: input.email ?? current.email,
                  metadata:
                    input.metadata === undefined ? current.metadata : { ...current.metadata, ...input.metadata },
                  status: "active",
                  removeAt: null,
                  updatedAt: now
                })
                return result(yield* repo.count(org, customer.id, feature.id, now), true)
              }
              const count = yield* repo.count(org, customer.id, feature.id, now)
              if (!(yield* fits(org, customer.id, feature, grant, count))) {
                const unit = feature.unit ?? "entities"
                return yield* new Conflict({
                  code: "limit_exceeded",
                  message: `The limit of ${grant.limit} ${unit} of '${feature.slug}' is reached (${count} in use)`
                })
              }
              if (Option.isSome(existing)) {
                // Removed earlier and already past its removal: a new entity that reuses the row.
                yield* repo.update({ ...existing.value, ...details, status: "active", removeAt: null, updatedAt: now })
              } else {
                const record: EntityRecord = {
                  organizationId: org,
                  id: yield* ids.next("ent"),
                  customerId: customer.id,
                  featureId: feature.id,
                  entity: input.entity,
                  ...details,
                  status: "active",
                  removeAt: null,
                  createdAt: now,
                  updatedAt: now
                }
                yield* repo.insert(record)
              }
              return result(count + 1, false)
            })
          )
          .pipe(Effect.catchTag("SqlError", Effect.die))
      })

    const remove = (org: string, input: RemoveEntity) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const { customer, feature, resolution } = yield* context(org, input, now)
        // The end of the current billing period of the oldest subscription granting the feature; a plan that
        // never renews (or no grant at all) has no period to wait for: the entity goes at once.
        const source = resolution._tag === "Granted" ? resolution.grant.sources[0] : undefined
        const snapshot = yield* catalog.snapshot(org)
        const plan = source === undefined ? undefined : snapshot.plansById.get(source.subscription.planId)
        const subscription =
          source === undefined
            ? undefined
            : rollFreePeriod(source.subscription, plan !== undefined && isFree(plan) ? plan.interval : null, now)
        const periodEnd = subscription?.currentPeriodEnd ?? null
        const removeAt = periodEnd !== null && periodEnd > now ? periodEnd : now

        return yield* sql
          .withTransaction(
            Effect.gen(function* () {
              yield* repo.lockCustomer(org, customer.id)
              const existing = Option.filter(yield* repo.find(org, customer.id, feature.id, input.entity), (e) =>
                isLive(e, now)
              )
              if (Option.isNone(existing)) return yield* entityNotFound(input.entity, feature)
              // Already pending: idempotent, its removal date stays.
              if (existing.value.status === "active") {
                yield* repo.update({ ...existing.value, status: "pending_removal", removeAt, updatedAt: now })
              }
              return { entityId: input.entity, count: yield* repo.count(org, customer.id, feature.id, now) }
            })
          )
          .pipe(Effect.catchTag("SqlError", Effect.die))
      })

    return { add, remove }
  })
)
