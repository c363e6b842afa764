import { type Effect, Either } from "effect"
import type { EntitlementState } from "../api/entitlements.ts"
import type { Conflict, InvalidInput } from "../domain/errors.ts"
import type { StoredBalance, UsageEventRow } from "./records.ts"
import { isMeter, isPastBound, type Meter, pastBound } from "./meter.ts"
import type { Resolution } from "./resolution.ts"

/** A batch item's answer: its state, or its own error body. */
export type BatchResult = Either.Either<EntitlementState, InvalidInput | Conflict>

/** A batch's metered draws, decided in item order over the states of their balances. */
export interface Draws {
  /** Each drawn balance's events, in order (`customer\0subject`). */
  readonly events: Map<string, Array<UsageEventRow>>
  /** The outbound events of each drawn balance's draws (thresholds crossed), written with them or not at all. */
  readonly notices: Map<string, Array<Effect.Effect<unknown>>>
  /** Written whatever happens to the draws (a spend cap reached by a denied draw). */
  readonly denialNotices: Array<Effect.Effect<unknown>>
}

/** The balances a batch's draws decide over (`init`: a missing row's window), by `balanceKey`. */
export type NamedBalances = Map<
  string,
  {
    readonly customerId: string
    readonly subjectId: string
    readonly init: { readonly windowStart: number; readonly windowEnd: number | null }
  }
>

/** A batch's draws to decide, and the balances they decide over. */
export interface PlannedDraws {
  readonly meters: Map<number, Meter>
  readonly balances: NamedBalances
  /** Items only a transaction may decide: a count (its event written in it) or a draw under a spend cap. */
  readonly locked: boolean
}

/**
 * The items still undecided (`results` empty, not `skipped`) that draw from a balance, by item, and their balances;
 * an item answered by its resolution or refused by its meter gets its result here.
 */
export const planDraws = (
  resolutions: ReadonlyArray<Resolution | undefined>,
  meters: ReadonlyArray<Meter | InvalidInput | undefined>,
  results: Array<BatchResult | undefined>,
  skipped: ReadonlySet<number>
): PlannedDraws => {
  const plan: PlannedDraws & { locked: boolean } = { meters: new Map(), balances: new Map(), locked: false }
  resolutions.forEach((resolution, i) => {
    if (results[i] !== undefined || resolution === undefined || skipped.has(i)) return
    if (resolution._tag === "Answered") {
      results[i] = Either.right(resolution.state)
      return
    }
    const meter = meters[i]
    if (meter === undefined) {
      plan.locked = true
      return
    }
    if (!isMeter(meter)) {
      results[i] = Either.left(meter)
      return
    }
    if (meter.capped) plan.locked = true
    const customerId = resolution.resolved.customer.id
    plan.meters.set(i, meter)
    plan.balances.set(balanceKey(customerId, meter.subjectId), {
      customerId,
      subjectId: meter.subjectId,
      init: meter.init
    })
  })
  return plan
}

/** A balance's key within one organization's batch. */
export const balanceKey = (customerId: string, subjectId: string) => `${customerId}\u0000${subjectId}`

/**
 * Decides every metered draw of a batch (`meters`, by item, in item order) over `state`, each over what the draws
 * before it left: `state` and `spent` (the month's spend of each capped customer) end as the draws leave them, and
 * `results` receives each item's answer. Pure but for the outbound events it describes (run by whoever writes).
 * The same decisions whether the balances are locked (a batch's transaction) or guarded by their versions.
 */
export const decideDraws = (input: {
  readonly meters: ReadonlyMap<number, Meter>
  readonly customerOf: (item: number) => string
  readonly eventIds: ReadonlyArray<string>
  readonly state: Map<string, StoredBalance>
  readonly spent: Map<string, string>
  readonly results: Array<BatchResult | undefined>
}): Draws => {
  const { meters, customerOf, eventIds, state, spent, results } = input
  const draws: Draws = { events: new Map(), notices: new Map(), denialNotices: [] }
  for (const [i, meter] of meters) {
    const customerId = customerOf(i)
    const key = balanceKey(customerId, meter.subjectId)
    const before = state.get(key) ?? null
    const outcome = meter.over(before, meter.capped ? spent.get(customerId)! : "0", eventIds[i]!)
    if (outcome.denialNotices.length > 0) draws.denialNotices.push(...outcome.denialNotices)
    if (isPastBound(outcome.answer)) {
      results[i] = Either.left(pastBound(outcome.answer, meter.unit))
      continue
    }
    results[i] = Either.right(outcome.answer)
    const write = outcome.write
    if (write === null) continue
    state.set(key, { ...write.next, version: before?.version ?? 0 })
    if (write.spentAfter !== null) spent.set(customerId, write.spentAfter)
    const drawn = draws.events.get(key)
    if (drawn === undefined) draws.events.set(key, [write.event])
    else drawn.push(write.event)
    if (write.notices.length > 0) draws.notices.set(key, [...(draws.notices.get(key) ?? []), ...write.notices])
  }
  return draws
}
