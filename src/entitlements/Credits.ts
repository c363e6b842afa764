import { SqlClient } from "@effect/sql"
import { Clock, Context, Effect, Layer, Option } from "effect"
import { Catalog } from "../catalog/Catalog.ts"
import { Customers } from "../customers/Customers.ts"
import { type Conflict, InvalidInput, NotFound } from "../domain/errors.ts"
import { fitsMicro, microToNumber, toMicro } from "../domain/quantity.ts"
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
  /** For a known customer and system id, inside the caller's transaction when there is one. */
  readonly grantById: (
    organizationId: string,
    customerId: string,
    systemId: string,
    amountMicro: bigint,
    kind: CreditKind
  ) => Effect.Effect<{ readonly bonus: bigint; readonly addon: bigint }>
  /**
   * Takes credits back (a refunded purchase): at most what the balance still holds, never below zero, since what was
   * spent stays spent. Inside the caller's transaction when there is one; answers what was taken.
   */
  readonly takeBackById: (
    organizationId: string,
    customerId: string,
    systemId: string,
    amountMicro: bigint,
    kind: CreditKind
  ) => Effect.Effect<{ readonly taken: bigint; readonly bonus: bigint; readonly addon: bigint }>
}

export class Credits extends Context.Tag("Credits")<Credits, CreditsShape>() {}

export const CreditsLive = Layer.effect(
  Credits,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const repo = yield* EntitlementsRepo
    const catalog = yield* Catalog
    const customers = yield* Customers

    const grantById: CreditsShape["grantById"] = (org, customerId, systemId, amountMicro, kind) =>
      sql.withTransaction(Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const row = yield* repo.lockBalance(org, customerId, systemId, { windowStart: now, windowEnd: null }, now)
        const next = kind === "bonus"
          ? { ...row, bonus: row.bonus + amountMicro }
          : { ...row, addon: row.addon + amountMicro }
        yield* repo.writeBalance(org, customerId, systemId, next, now)
        return { bonus: next.bonus, addon: next.addon }
      })).pipe(Effect.orDie)

    const takeBackById: CreditsShape["takeBackById"] = (org, customerId, systemId, amountMicro, kind) =>
      sql.withTransaction(Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const row = yield* repo.lockBalance(org, customerId, systemId, { windowStart: now, windowEnd: null }, now)
        const held = kind === "bonus" ? row.bonus : row.addon
        const taken = amountMicro <= 0n ? 0n : held < amountMicro ? (held > 0n ? held : 0n) : amountMicro
        const next = kind === "bonus" ? { ...row, bonus: row.bonus - taken } : { ...row, addon: row.addon - taken }
        if (taken > 0n) yield* repo.writeBalance(org, customerId, systemId, next, now)
        return { taken, bonus: next.bonus, addon: next.addon }
      })).pipe(Effect.orDie)

    return {
      grantById,
      takeBackById,
      balances: (org, customerId, systemId) =>
        Effect.map(repo.readBalance(org, customerId, systemId), (row) =>
          Option.match(row, {
            onNone: () => ({ bonus: 0n, addon: 0n }),
            onSome: (r) => ({ bonus: r.bonus, addon: r.addon })
          })),
      grant: (org, customerRef, systemRef, amount, kind) =>
        Effect.gen(function*() {
          if (!(amount > 0) || !fitsMicro(amount)) {
            return yield* new InvalidInput({
              message: "The amount must be a positive number with at most 6 decimal places",
              issues: [{ path: "amount", message: "must be > 0 with at most 6 decimal places" }]
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
