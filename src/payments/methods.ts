import { Clock, Effect } from "effect"
import { sha256Hex } from "../platform/crypto.ts"
import type { EncryptionShape } from "../platform/encryption.ts"
import type { IdsShape } from "../platform/ids.ts"
import type { MethodDetails, ProviderName } from "./PaymentProvider.ts"
import type { PaymentsRepoShape } from "./PaymentsRepo.ts"

export interface MethodSaver {
  /**
   * Saves a reusable method once per provider authorization (token) or card fingerprint, however often its
   * completion arrives; the customer's first usable method is the default. Runs inside the caller's transaction.
   */
  readonly save: (org: string, customerId: string, provider: ProviderName, method: MethodDetails) => Effect.Effect<void>
  /** The provider refused the method as gone: it is no longer offered for charges. */
  readonly markUnusable: (org: string, methodId: string, now: number) => Effect.Effect<void>
}

export const makeMethodSaver = (repo: PaymentsRepoShape, encryption: EncryptionShape, ids: IdsShape): MethodSaver => ({
  save: (org, customerId, provider, method) =>
    Effect.gen(function*() {
      if (!method.reusable) return
      // Concurrent completions of one checkout each arrive here: the customer's row lock makes them take turns, so
      // the second finds what the first saved (the unique index on the token's hash is the backstop).
      yield* repo.lockCustomer(org, customerId)
      const tokenHash = sha256Hex(`${provider}:${method.token}`)
      const existing = yield* repo.activeMethods(org, customerId)
      const same = existing.some((m) =>
        m.provider === provider &&
        (m.tokenHash === tokenHash || (method.fingerprint !== null && m.fingerprint === method.fingerprint))
      )
      if (same) return
      const now = yield* Clock.currentTimeMillis
      yield* repo.insertMethod({
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
      })
    }),
  markUnusable: (org, methodId, now) => repo.setMethodStatus(org, methodId, "unusable", now)
})
