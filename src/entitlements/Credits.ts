import { SqlClient } from "@effect/sql"
import { Clock, Effect, Layer, Option } from "effect"
import { Catalog } from "../catalog/Catalog.ts"
import { Customers } from "../customers/Customers.ts"
import { InvalidInput, NotFound } from "../domain/errors.ts"
import { decimalPlaces, MAX_DECIMALS } from "../api/numbers.ts"
import { AMOUNT_MAX, AMOUNT_MAX_MICRO, AMOUNT_MAX_TEXT } from "../domain/bounds.ts"
import { microToNumber, toMicro } from "../domain/quantity.ts"
import { Credits, type CreditsShape, overfilled } from "../credits/Credits.ts"
import { Outbox } from "../events/Outbox.ts"
import { EntitlementsRepo } from "./EntitlementsRepo.ts"

export const CreditsLive = Layer.effect(
  Credits,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const repo = yield* EntitlementsRepo
    const catalog = yield* Catalog
    const customers = yield* Customers
    const outbox = yield* Outbox

    const grantById: CreditsShape["grantById"] = (
      org,
      customerId,
      systemId,
      amountMicro,
      kind,
      upTo = AMOUNT_MAX_MICRO
    ) =>
      sql
        .withTransaction(
          Effect.gen(function* () {
            const now = yield* Clock.currentTimeMillis
            const row = yield* repo.lockBalance(org, customerId, systemId, { windowStart: now, windowEnd: null }, now)
            const current = kind === "bonus" ? row.bonus : row.addon
            // Exact (bigints): the balance after the grant must fit its bound, checked under the balance's row lock.
            if (current + amountMicro > upTo) {
              const snapshot = yield* catalog.snapshot(org)
              return yield* overfilled(
                "amount",
                kind,
                snapshot.creditSystemsById.get(systemId)?.slug ?? systemId,
                current,
                amountMicro
              )
            }
            const next =
              kind === "bonus" ? { ...row, bonus: row.bonus + amountMicro } : { ...row, addon: row.addon + amountMicro }
            yield* repo.writeBalance(org, customerId, systemId, next, now)
            return { bonus: next.bonus, addon: next.addon }
          })
        )
        .pipe(Effect.catchTag("SqlError", Effect.die))

    const takeBackById: CreditsShape["takeBackById"] = (org, customerId, systemId, amountMicro, kind) =>
      sql
        .withTransaction(
          Effect.gen(function* () {
            const now = yield* Clock.currentTimeMillis
            const row = yield* repo.lockBalance(org, customerId, systemId, { windowStart: now, windowEnd: null }, now)
            const held = kind === "bonus" ? row.bonus : row.addon
            const taken = amountMicro <= 0n ? 0n : held < amountMicro ? (held > 0n ? held : 0n) : amountMicro
            const next = kind === "bonus" ? { ...row, bonus: row.bonus - taken } : { ...row, addon: row.addon - taken }
            if (taken > 0n) yield* repo.writeBalance(org, customerId, systemId, next, now)
            return { taken, bonus: next.bonus, addon: next.addon }
          })
        )
        .pipe(Effect.orDie)

    return {
      grantById,
      takeBackById,
      balances: (org, customerId, systemId) =>
        Effect.map(repo.readBalance(org, customerId, systemId), (row) =>
          Option.match(row, {
            onNone: () => ({ bonus: 0n, addon: 0n }),
            onSome: (r) => ({ bonus: r.bonus, addon: r.addon })
          })
        ),
      grant: (org, customerRef, systemRef, amount, kind) =>
        Effect.gen(function* () {
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
          // The grant and its event commit together.
          const after = yield* sql
            .withTransaction(
              Effect.gen(function* () {
                const after = yield* grantById(org, customer.id, system.id, toMicro(amount), kind)
                yield* outbox.emit(org, {
                  type: "credits.granted",
                  data: {
                    customer: customer.id,
                    creditSystem: system.slug,
                    amount,
                    kind: kind === "bonus" ? "bonus" : "purchased",
                    balance: microToNumber(kind === "bonus" ? after.bonus : after.addon)
                  },
                  customerId: customer.id
                })
                return after
              })
            )
            .pipe(Effect.catchTag("SqlError", Effect.die))
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
