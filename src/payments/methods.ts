import type { SqlClient } from "@effect/sql"
import { Clock, Effect, Option } from "effect"
import type { OutboxShape } from "../events/Outbox.ts"
import { sha256Hex } from "../platform/crypto.ts"
import type { EncryptionShape } from "../platform/encryption.ts"
import type { IdsShape } from "../platform/ids.ts"
import type { MethodDetails, ProviderName } from "./PaymentProvider.ts"
import type { PaymentMethodRecord, PaymentsRepoShape } from "./PaymentsRepo.ts"

export interface MethodSaver {
  /**
   * Saves a reusable method once per provider authorization (token) or card fingerprint, however often its
   * completion arrives; the customer's first usable method is the default. Runs inside the caller's transaction.
   */
  readonly save: (org: string, customerId: string, provider: ProviderName, method: MethodDetails) => Effect.Effect<void>
  /** The provider refused the method as gone: it is no longer offered for charges (`payment_method.removed`). */
  readonly markUnusable: (org: string, methodId: string, now: number) => Effect.Effect<void>
  /** The vendor removed it (`payment_method.removed`), in one transaction with its event. */
  readonly remove: (org: string, methodId: string, now: number) => Effect.Effect<void>
  /**
   * The customer's active method becomes their default, the one charged first (`payment_method.updated` when it was
   * not already), in one transaction with its event. `false`: no such active method of this customer.
   */
  readonly makeDefault: (org: string, customerId: string, methodId: string, now: number) => Effect.Effect<boolean>
}

/** A saved method as the wallet shows it (`GET /v1/wallet`): never its provider token. */
export const toWireMethod = (m: PaymentMethodRecord) => ({
  id: m.id,
  provider: m.provider,
  type: m.type,
  brand: m.brand,
  last4: m.last4,
  expMonth: m.expMonth,
  expYear: m.expYear,
  isDefault: m.isDefault,
  createdAt: m.createdAt
})

/** A saved method as events carry it: the wallet's shape, with its customer (decisions.md §11). */
export const methodEventData = (m: PaymentMethodRecord) => {
  const { id, ...rest } = toWireMethod(m)
  return { id, customerId: m.customerId, ...rest }
}

export const makeMethodSaver = (
  sql: SqlClient.SqlClient,
  repo: PaymentsRepoShape,
  encryption: EncryptionShape,
  ids: IdsShape,
  outbox: OutboxShape
): MethodSaver => {
  /** The method leaves the wallet, and its event is written with the change. */
  const retire = (org: string, methodId: string, status: "removed" | "unusable", now: number) =>
    sql
      .withTransaction(
        Effect.gen(function* () {
          const method = yield* repo.findMethod(org, methodId)
          if (Option.isNone(method) || method.value.status !== "active") return
          yield* repo.setMethodStatus(org, methodId, status, now)
          yield* outbox.emit(org, {
            type: "payment_method.removed",
            data: {
              ...methodEventData(method.value),
              isDefault: false,
              reason: status === "unusable" ? "refused_by_provider" : "removed"
            },
            customerId: method.value.customerId,
            subjectId: methodId
          })
        })
      )
      .pipe(Effect.orDie)
  return {
    save: (org, customerId, provider, method) =>
      Effect.gen(function* () {
        if (!method.reusable) return
        // Concurrent completions of one checkout each arrive here: the customer's row lock makes them take turns, so
        // the second finds what the first saved (the unique index on the token's hash is the backstop).
        yield* repo.lockCustomer(org, customerId)
        const tokenHash = sha256Hex(`${provider}:${method.token}`)
        const existing = yield* repo.activeMethods(org, customerId)
        const same = existing.some(
          (m) =>
            m.provider === provider &&
            (m.tokenHash === tokenHash || (method.fingerprint !== null && m.fingerprint === method.fingerprint))
        )
        if (same) return
        const now = yield* Clock.currentTimeMillis
        const record: PaymentMethodRecord = {
          organizationId: org,
          id: yield* ids.next("pm"),
          customerId,
          provider,
          token: encryption.encrypt(method.token),
          tokenHash,
          providerCustomerId: method.providerCustomerId,
          email: method.email,
          type: method.type,
          brand: method.brand,
          last4: method.last4,
          expMonth: method.expMonth,
          expYear: method.expYear,
          fingerprint: method.fingerprint,
          isDefault: !existing.some((m) => m.isDefault),
          status: "active",
          createdAt: now,
          updatedAt: now
        }
        yield* repo.insertMethod(record)
        yield* outbox.emit(org, {
          type: "payment_method.saved",
          data: methodEventData(record),
          customerId,
          subjectId: record.id
        })
      }),
    markUnusable: (org, methodId, now) => retire(org, methodId, "unusable", now),
    remove: (org, methodId, now) => retire(org, methodId, "removed", now),
    makeDefault: (org, customerId, methodId, now) =>
      sql
        .withTransaction(
          Effect.gen(function* () {
            // The customer's row lock orders this after a save deciding the default at the same moment.
            yield* repo.lockCustomer(org, customerId)
            const method = yield* repo.findMethod(org, methodId)
            if (Option.isNone(method) || method.value.customerId !== customerId || method.value.status !== "active") {
              return false
            }
            if (method.value.isDefault) return true
            yield* repo.setDefaultMethod(org, customerId, methodId, now)
            yield* outbox.emit(org, {
              type: "payment_method.updated",
              data: methodEventData({ ...method.value, isDefault: true, updatedAt: now }),
              customerId,
              subjectId: methodId
            })
            return true
          })
        )
        .pipe(Effect.orDie)
  }
}
