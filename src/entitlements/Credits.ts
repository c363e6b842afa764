import { SqlClient } from "@effect/sql"
import { Clock, Context, Effect, Layer, Option } from "effect"
import { Catalog } from "../catalog/Catalog.ts"
import { Customers } from "../customers/Customers.ts"
import { type Conflict, InvalidInput, NotFound } from "../domain/errors.ts"
import { decimalPlaces, MAX_DECIMALS } from "../api/numbers.ts"
import { AMOUNT_MAX, AMOUNT_MAX_MICRO, AMOUNT_MAX_TEXT } from "../domain/bounds.ts"
import { format } from "../domain/money.ts"
import { fromMicro, microToNumber, toMicro } from "../domain/quantity.ts"
import { EntitlementsRepo } from "./EntitlementsRepo.ts"

export type CreditKind = "bonus" | "addon"

export interface CreditBalances {
  readonly customerId: string
  readonly creditSystem: string
  readonly bonusBalance: number
  readonly addonBalance: number
}

/**
 * Credits outside the plan allowance: bonus credits a vendor gives, and purchased (addon) credits from packs.
 * Both carry over reset windows; the engine draws bonus before addon (decisions.md §5).
 */
export interface CreditsShape {
  readonly grant: (
    organizationId: string,
    customer: string,
    creditSystem: string,
    amount: number,
    kind: CreditKind
  ) => Effect.Effect<CreditBalances, NotFound | Conflict | InvalidInput>
  readonly balances: (
    organizationId: string,
    customerId: string,
    systemId: string
  ) => Effect.Effect<{ readonly bonus: bigint; readonly addon: bigint }>
  /**
   * For a known customer and system id, inside the caller's transaction when there is one. A grant that would bring
   * the balance past `upTo` (micro-units; default the bound of a credit balance, 1e12 credits) writes nothing and
   * fails with the 400 naming `amount` and the bound.
   */
  readonly grantById: (
    organizationId: string,
    customerId: string,
    systemId: string,
    amountMicro: bigint,
    kind: CreditKind,
    upTo?: bigint
  ) => Effect.Effect<{ readonly bonus: bigint; readonly addon: bigint }, InvalidInput>
}

const KIND_NAME: Record<CreditKind, string> = { bonus: "bonus", addon: "purchased" }

/** The 400 of a grant or purchase that would overfill a balance (decisions.md §1). */
export const overfilled = (path: string, kind: CreditKind, systemSlug: string, current: bigint, addedMicro: bigint) => {
  const problem = `would bring the ${KIND_NAME[kind]} credits of '${systemSlug}' to ` +
    `${format(fromMicro(current + addedMicro))}, past ${AMOUNT_MAX_TEXT} (the most one balance holds); nothing was added`
  return new InvalidInput({ message: `The request is invalid: ${path}: ${problem}`, issues: [{ path, message: problem }] })
}

export class Credits extends Context.Tag("Credits")<Credits, CreditsShape>() {}

export const CreditsLive = Layer.effect(
  Credits,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const repo = yield* EntitlementsRepo
    const catalog = yield* Catalog
    const customers = yield* Customers

    const grantById: CreditsShape["grantById"] = (org, customerId, systemId, amountMicro, kind, upTo = AMOUNT_MAX_MICRO) =>
      sql.withTransaction(Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const row = yield* repo.lockBalance(org, customerId, systemId, { windowStart: now, windowEnd: null }, now)
        const current = kind === "bonus" ? row.bonus : row.addon
        // Exact (bigints): the balance after the grant must fit its bound, checked under the balance's row lock.
        if (current + amountMicro > upTo) {
          const snapshot = yield* catalog.snapshot(org)
          return yield* overfilled("amount", kind, snapshot.creditSystemsById.get(systemId)?.slug ?? systemId, current, amountMicro)
        }
        const next = kind === "bonus"
          ? { ...row, bonus: row.bonus + amountMicro }
          : { ...row, addon: row.addon + amountMicro }
        yield* repo.writeBalance(org, customerId, systemId, next, now)
        return { bonus: next.bonus, addon: next.addon }
      })).pipe(Effect.catchTag("SqlError", Effect.die))

    return {
      grantById,
      balances: (org, customerId, systemId) =>
        Effect.map(repo.readBalance(org, customerId, systemId), (row) =>
          Option.match(row, {
            onNone: () => ({ bonus: 0n, addon: 0n }),
            onSome: (r) => ({ bonus: r.bonus, addon: r.addon })
          })),
      grant: (org, customerRef, systemRef, amount, kind) =>
        Effect.gen(function*() {
          if (!(amount > 0 && amount <= AMOUNT_MAX && decimalPlaces(amount) <= MAX_DECIMALS)) {
            const problem = `must be more than 0 and at most ${AMOUNT_MAX_TEXT}, with at most ${MAX_DECIMALS} decimal places`
            return yield* new InvalidInput({
              message: `The amount is invalid: ${problem}`,
              issues: [{ path: "amount", message: problem }]
            })
          }
          const customer = yield* customers.resolve(org, customerRef)
          const snapshot = yield* catalog.snapshot(org)
          const system = snapshot.creditSystems.get(systemRef) ?? snapshot.creditSystemsById.get(systemRef)
          if (system === undefined) {
            return yield* new NotFound({ code: "not_found", message: `No credit system '${systemRef}'` })
          }
          const after = yield* grantById(org, customer.id, system.id, toMicro(amount), kind)
          return {
            customerId: customer.id,
            creditSystem: system.slug,
            bonusBalance: microToNumber(after.bonus),
            addonBalance: microToNumber(after.addon)
          }
        })
    }
  })
)
