import { SqlClient } from "@effect/sql"
import { BigDecimal, Clock, Context, Effect, Either, Exit, Layer, Option } from "effect"
import type { EntitlementCode, EntitlementState } from "../api/entitlements.ts"
import { Catalog } from "../catalog/Catalog.ts"
import type { CatalogSnapshot, Feature } from "../catalog/model.ts"
import { Customers } from "../customers/Customers.ts"
import { CustomersRepo } from "../customers/CustomersRepo.ts"
import { Conflict, customerNotFound, InvalidInput } from "../domain/errors.ts"
import { toDecimal } from "../domain/money.ts"
import { fitsMicro, FACTOR_BIGINT, fromMicro, toMicro } from "../domain/quantity.ts"
import { VALUE_MAX } from "../domain/bounds.ts"
import { Outbox } from "../events/Outbox.ts"
import { sha256Hex } from "../platform/crypto.ts"
import { retryDeadlocks } from "../platform/db/deadlocks.ts"
import { Ids } from "../platform/ids.ts"
import { type CommitGate, CommitExpired, enterAll, leaveAll, RequestCommitGate } from "../platform/commitGate.ts"
import { autoEnabledPlans } from "../subscriptions/autoEnabled.ts"
import { SubscriptionsRepo } from "../subscriptions/SubscriptionsRepo.ts"
import { makeBalanceWriter } from "./BalanceWriter.ts"
import { type Batcher, makeBatcher } from "./Batcher.ts"
import { type BatchResult, decideDraws, planDraws } from "./batchDraws.ts"
import { makeGuardedBatches } from "./guardedBatch.ts"
import type { BatchItem } from "./preparedBatch.ts"
import { EntitlementsRepo } from "./EntitlementsRepo.ts"
import type { StoredBalance } from "./records.ts"
import { type Creator, createdResolution, sortCreators } from "./batchCreations.ts"
import {
  CreationRaced,
  mergeNewCustomers,
  type NewCustomers,
  noNewCustomers,
  planNewCustomers,
  writeNewCustomers
} from "./newCustomers.ts"
import {
  drawsAlike,
  type EntitlementInput,
  eventTime,
  invalid,
  isMeter,
  isPastBound,
  makeMeter,
  type Meter,
  type Mode,
  overageTerms,
  type PastBound,
  pastBound,
  type Resolved
} from "./meter.ts"
import {
  answered,
  instantFor,
  pickCustomer,
  readsOfMany,
  readsOfOne,
  type Resolution,
  resolveFound
} from "./resolution.ts"
import { countedState, denial, storedState } from "./state.ts"

/** Boolean and non-consumable features: a count to compare, no balance to draw from. */
const isCount = (feature: Feature) => feature.type === "boolean" || feature.meterType === "non_consumable"

export type { EntitlementInput, Mode } from "./meter.ts"
export type { BatchItem } from "./preparedBatch.ts"

export interface EntitlementsShape {
  readonly evaluate: (
    organizationId: string,
    mode: Mode,
    input: EntitlementInput,
    idempotencyKey?: string
  ) => Effect.Effect<EntitlementState, InvalidInput | Conflict>
  /**
   * A batch of tracks (decisions.md §12): each item decided in order, independently, by every rule of `track`; the
   * accepted items committed together (one transaction) before the answer. In request order: each item's state or
   * its refusal.
   */
  readonly evaluateBatch: (
    organizationId: string,
    items: ReadonlyArray<BatchItem>
  ) => Effect.Effect<ReadonlyArray<Either.Either<EntitlementState, InvalidInput | Conflict>>>
}

export class Entitlements extends Context.Tag("Entitlements")<Entitlements, EntitlementsShape>() {}

const DAY_MS = 86_400_000

/** A batch resolved outside its transaction: what the transaction decides over (`transact`). */
interface PreparedBatch {
  readonly items: ReadonlyArray<BatchItem>
  /** Each keyed item's request hash (the key's stored one must match); "" for items without a key. */
  readonly hashes: ReadonlyArray<string>
  /** Items answered before the transaction (refused by their timestamp or value). */
  readonly decided: ReadonlyArray<BatchResult | undefined>
  readonly resolutions: ReadonlyArray<Resolution | undefined>
  /**
   * Each resolved draw's meter and its event's id, made before the lane takes the batch: pure of the balances, so
   * that a transaction holding row locks only decides and writes.
   */
  readonly meters: ReadonlyArray<Meter | InvalidInput | undefined>
  readonly eventIds: ReadonlyArray<string>
  readonly now: number
  /** The customers its items create, written by its transaction (./newCustomers.ts). */
  readonly created: NewCustomers
  /** The requests' commit gates (src/platform/commitGate.ts): one a batch, several once merged. */
  readonly gates: ReadonlyArray<CommitGate>
}

/** What a lane answers a batch: its results, or that it must be prepared again, or that its request has expired. */
type LaneOutcome = ReadonlyArray<BatchResult> | CreationRaced | CommitExpired

/** Batches of one transaction at most: a transaction's row locks and its answers wait for all of them. */
const BATCHES_PER_TRANSACTION = 8
/** Preparations of a batch whose new customers other requests keep creating first, before it gives up. */
const CREATION_ATTEMPTS = 3
/**
 * SQLite: an idle batch lane first waits this many turns of the event loop. Its statements block the one thread, so
 * the batches that arrived meanwhile are still reading their bodies when a transaction ends; without the wait each
 * ran alone and paid its own commit and sync (docs/decisions.md, "Batches and event time"). Six beat three by 3–8% on
 * every line of bench/batch.ts once batches were guarded (the transaction got shorter, so fewer batches had arrived
 * by its end); twelve was no better.
 */
const SQLITE_BATCH_GATHER_TURNS = 6

/** Several batches as one, their items in order (each item keeps its own instant: its resolution carries it). */
const mergeBatches = (batches: ReadonlyArray<PreparedBatch>): PreparedBatch => ({
  items: batches.flatMap((b) => b.items),
  hashes: batches.flatMap((b) => b.hashes),
  decided: batches.flatMap((b) => b.decided),
  resolutions: batches.flatMap((b) => b.resolutions),
  meters: batches.flatMap((b) => b.meters),
  eventIds: batches.flatMap((b) => b.eventIds),
  now: Math.max(...batches.map((b) => b.now)),
  created: mergeNewCustomers(batches.map((b) => b.created)),
  gates: batches.flatMap((b) => b.gates)
})

/** The merged batch's results, given back to each batch. */
const splitResults = (batches: ReadonlyArray<PreparedBatch>, results: ReadonlyArray<BatchResult>) => {
  let offset = 0
  return batches.map((b) => {
    const mine = results.slice(offset, offset + b.items.length)
    offset += b.items.length
    return mine
  })
}

/** A key used again with another request: by a single request, its 409; by a batch item, that item's. */
const idempotencyConflict = () =>
  new Conflict({ code: "idempotency_conflict", message: "This Idempotency-Key was used with a different request" })
/**
 * Write batches in flight at once, and each idle lane waiting for the draws of the same turn of the event loop
 * (docs/decisions.md, "Performance"). One lane on both databases: SQLite has one connection; on PostgreSQL one lane
 * beat 2, 4 and 8 at peak and at half of it (fewer, bigger batches: fewer round trips and fewer busy backends on a
 * machine whose cores the service shares with the database).
 */
const WRITER = { lanes: 1, gather: true } as const

const canonical = (value: unknown): unknown =>
  Array.isArray(value)
    ? value.map(canonical)
    : value !== null && typeof value === "object"
      ? Object.fromEntries(
          Object.keys(value)
            .sort()
            .map((k) => [k, canonical((value as Record<string, unknown>)[k])])
        )
      : value

export const EntitlementsLive = Layer.effect(
  Entitlements,
  Effect.gen(function* () {
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

    /** Boolean and non-consumable features: nothing to draw, a count to compare. */
    const counted = (resolved: Resolved) =>
      Effect.gen(function* () {
        const { org, mode, customer, feature, grant, config, entityId, input, now } = resolved
        const isBoolean = feature.type === "boolean"
        const count = isBoolean ? 0 : yield* repo.countEntities(org, customer.id, feature.id, now)
        const { maxOverageUnits, overageAllowed } = overageTerms(config, grant)
        // Exact, in micro-units: a count and a limit of up to 1e12 with six decimals are past a double's precision.
        const wanted = BigInt(count) * FACTOR_BIGINT + toMicro(input.value)
        const within = isBoolean || grant.limitMicro === null || wanted <= grant.limitMicro
        const overBy = grant.limitMicro === null ? 0n : wanted - grant.limitMicro
        const allowed =
          within ||
          (overageAllowed &&
            (maxOverageUnits === null || BigDecimal.lessThanOrEqualTo(fromMicro(overBy), toDecimal(maxOverageUnits))))
        const code: EntitlementCode = !allowed
          ? "limit_exceeded"
          : within
            ? mode === "track"
              ? "tracked"
              : "access_granted"
            : mode === "track"
              ? "tracked_overage"
              : "overage_allowed"
        if (allowed && mode !== "check") {
          const value = toMicro(input.value)
          // The event and its rollup bucket commit together.
          yield* sql
            .withTransaction(
              repo.insertEvent({
                organizationId: org,
                id: yield* ids.next("evt"),
                customerId: customer.id,
                featureId: feature.id,
                subjectId: feature.id,
                entityId,
                value,
                cost: 0n,
                fromPlan: 0n,
                fromBonus: 0n,
                fromAddon: 0n,
                overage: 0n,
                billable: 0n,
                planId: null,
                metadata: input.metadata ?? {},
                createdAt: resolved.at
              })
            )
            .pipe(Effect.orDie)
        }
        const message = isBoolean
          ? allowed
            ? "The plan includes this feature"
            : "Not included"
          : allowed
            ? `${count} in use${grant.limit === null ? "" : ` of ${grant.limit}`}`
            : `${count} of ${grant.limit} in use: ${input.value} more do not fit`
        return countedState({ allowed, code, message, grant, count })
      })

    /**
     * Consumable features and credit systems: draw from the balance (./meter.ts decides). A recording draw goes through
     * the balance writer (a guarded write, no lock held across round trips); with a spend cap (a second row to keep
     * exact) or inside an idempotent request's transaction, it takes the balance's row lock for the rest of the
     * transaction.
     */
    const metered = (
      resolved: Resolved,
      stored: Option.Option<StoredBalance>
    ): Effect.Effect<EntitlementState, InvalidInput> => {
      const { org, mode, customer, inTransaction, now } = resolved
      const meter = makeMeter(resolved, outbox)
      if (!isMeter(meter)) return Effect.fail(meter)
      const settled = (answer: EntitlementState | PastBound) =>
        isPastBound(answer) ? pastBound(answer, meter.unit) : Effect.succeed(answer)
      if (mode === "check") return settled(meter.check(Option.getOrNull(stored)))

      // The common case, every plain track and check with sendEvent: combinators (see `evaluate`).
      if (!meter.capped && !inTransaction) {
        return Effect.flatMap(ids.next("evt"), (eventId) =>
          Effect.flatMap(
            writer.draw<EntitlementState | PastBound>(
              { organizationId: org, customerId: customer.id, subjectId: meter.subjectId },
              Option.getOrNull(stored),
              (current) => {
                const outcome = meter.over(current, "0", eventId)
                return { answer: outcome.answer, write: outcome.write }
              }
            ),
            settled
          )
        )
      }

      return (
        sql
          .withTransaction(
            Effect.gen(function* () {
              const row = yield* repo.lockBalance(org, customer.id, meter.subjectId, meter.init, now)
              const spent = meter.capped ? yield* repo.lockSpend(org, customer.id, meter.period, now) : "0"
              const outcome = meter.over(row, spent, yield* ids.next("evt"))
              // A block by the cap is reached too: its event commits with this transaction (nothing else does).
              yield* Effect.all(outcome.denialNotices, { discard: true })
              const write = outcome.write
              if (write !== null) {
                yield* repo.writeBalance(org, customer.id, meter.subjectId, write.next, now)
                yield* repo.insertEvent(write.event)
                if (write.spentAfter !== null && !BigDecimal.equals(toDecimal(write.spentAfter), toDecimal(spent))) {
                  yield* repo.writeSpend(org, customer.id, meter.period, write.spentAfter, now)
                }
                yield* Effect.all(write.notices, { discard: true })
              }
              return yield* settled(outcome.answer)
            })
          )
          // Database failures are defects; the refusals above are the request's 400.
          .pipe(Effect.catchTag("SqlError", Effect.die))
      )
    }

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
     * once more after creating the customer (`customerData`). Combinators, not a generator (see `evaluate`).
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

    /** A resolved request decided and recorded: a count for boolean and non-consumable features, a draw otherwise. */
    const decideResolved = (resolution: Resolution) =>
      resolution._tag === "Answered"
        ? Effect.succeed(resolution.state)
        : isCount(resolution.resolved.feature)
          ? counted(resolution.resolved)
          : metered(resolution.resolved, resolution.stored)

    // Every check and track: combinators around the generators of the rarer paths (docs/decisions.md, "Performance":
    // JavaScriptCore kept recompiling the per-request generator bodies).
    const evaluate = (
      org: string,
      mode: Mode,
      input: EntitlementInput,
      idempotencyKey?: string
    ): Effect.Effect<EntitlementState, InvalidInput | Conflict> => {
      // The schema refuses these already (src/api/numbers.ts); kept for callers that do not decode one.
      if (!(input.value >= 0) || !fitsMicro(input.value)) {
        return Effect.fail(invalid("value", `must be 0 to ${VALUE_MAX} with at most 6 decimal places`))
      }
      // Read once: the customer a request creates, its subscriptions, the event, its rollup and the idempotency
      // record all carry this instant.
      return Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const at = eventTime(mode, input.timestamp, now)
        if (at instanceof InvalidInput) return Effect.fail(at)
        const timestamp = input.timestamp === undefined ? undefined : at
        if (idempotencyKey === undefined || mode === "check") {
          return Effect.flatMap(resolve(org, mode, input, false, now, timestamp), decideResolved)
        }
        const requestHash = sha256Hex(JSON.stringify(canonical({ mode, input })))
        // The claim, the effects and the stored answer commit together: a retry sees all of them or none.
        return sql
          .withTransaction(
            Effect.gen(function* () {
              const claim = yield* repo.claimIdempotencyKey(org, idempotencyKey, requestHash, now, now - DAY_MS)
              if (claim._tag === "Existing") {
                if (claim.requestHash !== requestHash) return yield* idempotencyConflict()
                if (claim.response !== null) return storedState(JSON.parse(claim.response) as EntitlementState)
              }
              const state = yield* Effect.flatMap(resolve(org, mode, input, true, now, timestamp), decideResolved)
              yield* repo.saveIdempotentResponse(org, idempotencyKey, JSON.stringify(state))
              return state
            })
          )
          .pipe(Effect.catchTag("SqlError", Effect.die))
      })
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
                  feature === undefined
                    ? []
                    : (snapshot.creditSystemsByFeature.get(feature.slug) ?? []).map((s) => s.id)
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

    /**
     * A batch decided and recorded. Prepared again if a customer it was to create was created meanwhile by another
     * request (its transaction rolled back: `CreationRaced`); interrupted if its request was answered 503 before its
     * commit could begin (nothing of it was written).
     */
    const evaluateBatch = (org: string, items: ReadonlyArray<BatchItem>): Effect.Effect<ReadonlyArray<BatchResult>> =>
      Effect.flatMap(RequestCommitGate, (gate) => {
        const attempt = (left: number): Effect.Effect<ReadonlyArray<BatchResult>> =>
          Effect.flatMap(prepareBatch(org, items, gate), (prepared) =>
            Effect.flatMap(batchLane(org).submit(prepared), (outcome) =>
              outcome instanceof CreationRaced
                ? left > 0
                  ? attempt(left - 1)
                  : Effect.dieMessage("A batch's new customers kept being created by other requests")
                : outcome instanceof CommitExpired
                  ? Effect.interrupt
                  : Effect.succeed(outcome)
            )
          )
        return attempt(CREATION_ATTEMPTS)
      })

    const prepareBatch = (org: string, items: ReadonlyArray<BatchItem>, gate: CommitGate) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const results: Array<BatchResult | undefined> = items.map(() => undefined)
        const inputs = items.map(({ idempotencyKey: _, ...input }) => input)
        // Only a keyed item's request is compared with what its key stored.
        const hashes = items.map((item, i) =>
          item.idempotencyKey === undefined
            ? ""
            : sha256Hex(JSON.stringify(canonical({ mode: "track", input: inputs[i] })))
        )
        const times = items.map((item) => {
          const at = eventTime("track", item.timestamp, now)
          return at instanceof InvalidInput ? at : item.timestamp === undefined ? undefined : at
        })
        items.forEach((item, i) => {
          const time = times[i]
          if (time instanceof InvalidInput) results[i] = Either.left(time)
          else if (!(item.value >= 0) || !fitsMicro(item.value)) {
            results[i] = Either.left(invalid("value", `must be 0 to ${VALUE_MAX} with at most 6 decimal places`))
          }
        })
        // Resolved outside the transaction and all at once (`resolveMany`: one read per feature named). The customers
        // the batch creates (once per reference) are planned here and written by its transaction (./newCustomers.ts):
        // its items are resolved over them as they will be, and a batch that fails leaves none of them.
        // Items naming the same customer, feature and entity share one read (a hot customer's batch is one).
        const shared = new Map<string, number>()
        const firstOf = items.map((item, i) => {
          if (results[i] !== undefined) return i
          const key = JSON.stringify([item.customer, item.feature, item.entity ?? null])
          const first = shared.get(key)
          if (first !== undefined) return first
          shared.set(key, i)
          return i
        })
        const resolutions: Array<Resolution | undefined> = items.map(() => undefined)
        yield* resolveMany(
          org,
          inputs,
          items.flatMap((_, i) => (results[i] === undefined && firstOf[i] === i ? [i] : [])),
          now,
          times as ReadonlyArray<number | undefined>,
          resolutions
        )
        items.forEach((_, i) => {
          const first = resolutions[firstOf[i]!]
          if (firstOf[i] === i || first === undefined) return
          resolutions[i] =
            first._tag === "Answered"
              ? first
              : {
                  ...first,
                  resolved: {
                    ...first.resolved,
                    input: inputs[i]!,
                    at: (times[i] as number | undefined) ?? first.resolved.now
                  }
                }
        })
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
            const planned = planNewCustomers({
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

        // Items that share their first's read and draw alike share its meter (`drawsAlike`): a hot customer's batch
        // builds one, not one an item.
        const meters: Array<ReturnType<typeof makeMeter> | undefined> = []
        resolutions.forEach((resolution, i) => {
          if (resolution?._tag !== "Resolved" || isCount(resolution.resolved.feature))
            return void meters.push(undefined)
          const first = resolutions[firstOf[i]!]
          const shared =
            firstOf[i] !== i && first?._tag === "Resolved" && drawsAlike(first.resolved, resolution.resolved)
              ? meters[firstOf[i]!]
              : undefined
          meters.push(shared ?? makeMeter({ ...resolution.resolved, inTransaction: true }, outbox))
        })
        const eventIds = yield* ids.nextMany("evt", items.length)
        const prepared: PreparedBatch = {
          items,
          hashes,
          decided: results,
          resolutions,
          meters,
          eventIds,
          now,
          created,
          gates: [gate]
        }
        if (Option.isSome(guardedBatches) && isGuarded(prepared)) yield* guardedBatches.value.check(org, prepared)
        return prepared
      })

    /** Batches with idempotency keys, or creating customers, commit in the locked transaction. */
    const isGuarded = (prepared: PreparedBatch) =>
      prepared.created.customers.length === 0 && prepared.items.every((item) => item.idempotencyKey === undefined)
    /**
     * A prepared batch (or several concurrent batches of one organization, concatenated: `mergeBatches`) decided and
     * recorded: guarded (src/entitlements/guardedBatch.ts) unless it needs the locked transaction.
     */
    const transact = (
      org: string,
      prepared: PreparedBatch
    ): Effect.Effect<ReadonlyArray<BatchResult>, CreationRaced | CommitExpired> =>
      Option.isNone(guardedBatches)
        ? transactLocked(org, prepared)
        : Effect.flatMap(
            isGuarded(prepared) ? guardedBatches.value.run(org, prepared) : Effect.succeedNone,
            Option.match({
              // Its balances, as the transaction will lock them: a guarded batch over one that fails its guard waits.
              onNone: () =>
                guardedBatches.value.writingOver(
                  org,
                  planDraws(prepared.resolutions, prepared.meters, [...prepared.decided], new Set()).balances.keys()
                )(transactLocked(org, prepared)),
              onSome: (results) => Effect.succeed(results)
            })
          )

    /**
     * A prepared batch decided and recorded in one transaction that holds its balances' row locks. PostgreSQL may
     * still roll it back to break a deadlock (with a writer's step, whose row order is its statement's): all of it
     * undone, it runs again.
     */
    const transactLocked = (org: string, prepared: PreparedBatch) =>
      Effect.suspend(() => {
        const { items, hashes, resolutions, now } = prepared
        const decided = prepared.decided
        return retryDeadlocks(
          sql.withTransaction(
            Effect.gen(function* () {
              // The customers it creates first: everything else of the batch may be about them.
              yield* writeNewCustomers(writers, org, prepared.created)
              // Each attempt starts from what was decided before the transaction.
              const results = [...decided]
              // Keys first, in key order (two batches never wait on each other's keys in a cycle). A key's request is
              // the one stored, or else its first item's (which claims it); an item with another body is a conflict,
              // and the first with that body answers for every later one. Items of several batches merged into one
              // transaction are thus answered as if the batches had run one after the other.
              const itemsOfKey = new Map<string, Array<number>>()
              for (const [i, item] of items.entries()) {
                const key = item.idempotencyKey
                if (key === undefined || results[i] !== undefined) continue
                const of = itemsOfKey.get(key)
                if (of === undefined) itemsOfKey.set(key, [i])
                else of.push(i)
              }
              const claimed = new Set<number>()
              const repeats: Array<[number, number]> = []
              const claims = yield* repo.claimIdempotencyKeys(
                org,
                [...itemsOfKey].map(([key, [first]]) => ({ key, requestHash: hashes[first!]! })),
                now,
                now - DAY_MS
              )
              for (const [key, of] of itemsOfKey) {
                const claim = claims.get(key)!
                const request = claim._tag === "Existing" ? claim.requestHash : hashes[of[0]!]
                let leader: number | undefined
                for (const i of of) {
                  if (hashes[i] !== request) results[i] = Either.left(idempotencyConflict())
                  else if (leader !== undefined) repeats.push([i, leader])
                  else {
                    leader = i
                    if (claim._tag === "Existing" && claim.response !== null)
                      results[i] = Either.right(storedState(JSON.parse(claim.response) as EntitlementState))
                    else claimed.add(i)
                  }
                }
              }
              for (const [i, first] of repeats) if (results[first] !== undefined) results[i] = results[first]
              const repeated = new Set(repeats.map(([i]) => i))

              // Every balance a draw of the batch touches, locked (created first where missing) in one step.
              const { meters, balances } = planDraws(resolutions, prepared.meters, results, repeated)
              const locked = yield* repo.lockBalances(org, [...balances.values()], now)
              const state = new Map<string, StoredBalance>()
              for (const b of locked) state.set(`${b.customerId}\u0000${b.subjectId}`, b)
              const lockedVersion = new Map([...state].map(([k, b]) => [k, b.version]))
              // The month's spend of every capped customer, locked after the balances and in customer order (as the
              // locked path of a single track: balance, then spend).
              const spent = new Map<string, string>()
              const spentBefore = new Map<string, { period: number; spent: string }>()
              const capped = new Map<string, number>()
              for (const [i, meter] of meters) {
                const resolution = resolutions[i]
                if (meter.capped && resolution?._tag === "Resolved") {
                  capped.set(resolution.resolved.customer.id, meter.period)
                }
              }
              for (const customerId of [...capped.keys()].sort()) {
                const period = capped.get(customerId)!
                const locked = yield* repo.lockSpend(org, customerId, period, now)
                spent.set(customerId, locked)
                spentBefore.set(customerId, { period, spent: locked })
              }
              // Counts (boolean, non-consumable): their events, in this transaction.
              for (let i = 0; i < items.length; i++) {
                if (results[i] !== undefined || repeated.has(i) || meters.has(i)) continue
                const resolution = resolutions[i]
                if (resolution === undefined || resolution._tag !== "Resolved") continue
                results[i] = yield* Effect.either(counted({ ...resolution.resolved, inTransaction: true }))
              }
              const { events, notices, denialNotices } = decideDraws({
                meters,
                customerOf: (i) => (resolutions[i] as Extract<Resolution, { _tag: "Resolved" }>).resolved.customer.id,
                eventIds: prepared.eventIds,
                state,
                spent,
                results
              })

              // One write of every balance drawn, with its events, rollups and alerts (guards hold: rows locked).
              const commits = [...events.keys()].map((key) => {
                const b = balances.get(key)!
                const next = state.get(key)!
                return {
                  organizationId: org,
                  customerId: b.customerId,
                  subjectId: b.subjectId,
                  expectedVersion: lockedVersion.get(key) ?? null,
                  next,
                  events: events.get(key)!,
                  notices: notices.get(key) ?? [],
                  now
                }
              })
              if (commits.length > 0) {
                const written = yield* repo.commitBalances(commits, true)
                if (written.some(Option.isNone)) return yield* Effect.dieMessage("A locked balance moved in a batch")
              }
              for (const [customerId, before] of spentBefore) {
                const after = spent.get(customerId)!
                if (!BigDecimal.equals(toDecimal(after), toDecimal(before.spent))) {
                  yield* repo.writeSpend(org, customerId, before.period, after, now)
                }
              }
              yield* Effect.all(denialNotices, { discard: true })
              yield* repo.saveIdempotentResponses(
                org,
                [...claimed].flatMap((i) => {
                  const result = results[i]
                  return result !== undefined && Either.isRight(result)
                    ? [{ key: items[i]!.idempotencyKey!, response: JSON.stringify(result.right) }]
                    : []
                })
              )
              for (const [i, first] of repeats) results[i] ??= results[first]
              // Every balance locked, as this transaction leaves it (a balance written moved one version).
              const left = [...state].map(([key, b]) => {
                const { customerId, subjectId } = balances.get(key)!
                const version = lockedVersion.get(key)!
                return { ...b, customerId, subjectId, version: events.has(key) ? version + 1 : version }
              })
              // Last, just before the commit: no commit once a request of the batch has been answered 503.
              if (!enterAll(prepared.gates)) return yield* new CommitExpired()
              return { results: results.map((r) => r!), left }
            })
          )
        ).pipe(
          Effect.catchTag("SqlError", Effect.die),
          Effect.onExit((exit) => (Exit.isFailure(exit) ? Effect.sync(() => leaveAll(prepared.gates)) : Effect.void)),
          Effect.flatMap(({ results, left }) =>
            Option.isSome(guardedBatches)
              ? Effect.as(guardedBatches.value.learn(org, left), results)
              : Effect.succeed(results)
          )
        )
      })

    /**
     * Concurrent batches of an organization share a transaction (docs/decisions.md, "Batches and event time"): what
     * arrives while a lane's transaction runs waits, and goes into the next one as one batch of their items in
     * arrival order. A key two of them use is then a key repeated in one batch: an item whose body is not the key's
     * request (the stored one, else the first item's) is a 409, and a later one with it repeats the earlier's answer,
     * which is what it would have been had the later batch waited for the earlier.
     * The row locks of one transaction are taken in one order, so batches merged into it never wait on each other's
     * locks, and each pays a share of its fixed costs (claims, locks, the commit and its sync). PostgreSQL: two lanes
     * (the database works on one while the service decides the other; one lane lost 7–15%); SQLite: one, gathering
     * for a few turns (`SQLITE_BATCH_GATHER_TURNS`). A lane per organization that has sent a batch: merged
     * transactions never mix organizations.
     */
    const batchLanes = new Map<string, Batcher<PreparedBatch, LaneOutcome>>()
    const outcome = (effect: Effect.Effect<ReadonlyArray<BatchResult>, CreationRaced | CommitExpired>) =>
      Effect.catchAll(effect, (e): Effect.Effect<LaneOutcome> => Effect.succeed(e))
    const batchLane = (org: string) => {
      let lane = batchLanes.get(org)
      if (lane === undefined) {
        lane = makeBatcher<PreparedBatch, LaneOutcome>({
          lanes: sql.onDialectOrElse({ pg: () => 2, orElse: () => 1 }),
          maxBatch: BATCHES_PER_TRANSACTION,
          gather: sql.onDialectOrElse({ pg: () => false, orElse: () => SQLITE_BATCH_GATHER_TURNS }),
          // Merged batches that must not commit together (one raced or expired): each on its own.
          run: (batches) =>
            batches.length === 1
              ? Effect.map(outcome(transact(org, batches[0]!)), (o) => [o])
              : Effect.flatMap(outcome(transact(org, mergeBatches(batches))), (o) =>
                  Array.isArray(o)
                    ? Effect.succeed(splitResults(batches, o))
                    : Effect.forEach(batches, (b) => outcome(transact(org, b)))
                )
        })
        batchLanes.set(org, lane)
      }
      return lane
    }

    return { evaluate, evaluateBatch }
  })
)
