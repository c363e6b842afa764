import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer, Option } from "effect"
import type { ProviderName } from "./PaymentProvider.ts"

export interface PaymentMethodRecord {
  readonly organizationId: string
  readonly id: string
  readonly customerId: string
  readonly provider: ProviderName
  /** Encrypted at rest; decrypted by the service only to charge or detach. */
  readonly token: string
  readonly providerCustomerId: string | null
  readonly email: string | null
  readonly type: string
  readonly brand: string | null
  readonly last4: string | null
  readonly expMonth: number | null
  readonly expYear: number | null
  readonly fingerprint: string | null
  readonly isDefault: boolean
  readonly status: "active" | "removed"
  readonly createdAt: number
  readonly updatedAt: number
}

export type Purpose = "subscription" | "addon" | "invoice" | "setup"

export interface CheckoutRecord {
  readonly organizationId: string
  readonly id: string
  readonly reference: string
  readonly provider: ProviderName
  readonly purpose: Purpose
  readonly customerId: string
  readonly targetId: string
  readonly quantity: number
  readonly amount: string
  readonly currency: string
  readonly status: "open" | "completed" | "failed"
  readonly checkoutUrl: string | null
  readonly accessCode: string | null
  readonly data: Record<string, unknown>
  readonly createdAt: number
  readonly updatedAt: number
}

export interface PaymentRecord {
  readonly organizationId: string
  readonly id: string
  readonly reference: string
  readonly provider: ProviderName
  readonly purpose: Purpose
  readonly customerId: string
  readonly targetId: string
  readonly amount: string
  readonly currency: string
  readonly status: "succeeded" | "failed" | "pending"
  readonly providerReference: string | null
  readonly failureMessage: string | null
  readonly createdAt: number
  readonly updatedAt: number
}

export interface PaymentsRepoShape {
  readonly insertMethod: (m: PaymentMethodRecord) => Effect.Effect<void>
  readonly activeMethods: (org: string, customerId: string) => Effect.Effect<ReadonlyArray<PaymentMethodRecord>>
  readonly findMethod: (org: string, id: string) => Effect.Effect<Option.Option<PaymentMethodRecord>>
  readonly removeMethod: (org: string, id: string, now: number) => Effect.Effect<void>
  readonly insertCheckout: (c: CheckoutRecord) => Effect.Effect<void>
  readonly findCheckout: (org: string, reference: string) => Effect.Effect<Option.Option<CheckoutRecord>>
  /** open → completed, once: `false` when another event already completed it. */
  readonly completeCheckout: (org: string, reference: string, now: number) => Effect.Effect<boolean>
  readonly insertPayment: (p: PaymentRecord) => Effect.Effect<void>
  /** How many checkouts and payments already exist for a target: the next reference's suffix. */
  readonly attemptsFor: (org: string, targetId: string) => Effect.Effect<number>
}

export class PaymentsRepo extends Context.Tag("PaymentsRepo")<PaymentsRepo, PaymentsRepoShape>() {}

const nullableNumber = (v: unknown) => (v === null || v === undefined ? null : Number(v))

const toMethod = (r: any): PaymentMethodRecord => ({
  ...r,
  expMonth: nullableNumber(r.expMonth),
  expYear: nullableNumber(r.expYear),
  isDefault: Number(r.isDefault) === 1,
  createdAt: Number(r.createdAt),
  updatedAt: Number(r.updatedAt)
})

const toCheckout = (r: any): CheckoutRecord => ({
  ...r,
  quantity: Number(r.quantity),
  data: JSON.parse(r.data),
  createdAt: Number(r.createdAt),
  updatedAt: Number(r.updatedAt)
})

export const PaymentsRepoSql = Layer.effect(
  PaymentsRepo,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return {
      insertMethod: (m) =>
        sql`INSERT INTO payment_methods ${sql.insert({ ...m, isDefault: m.isDefault ? 1 : 0 })}`.pipe(Effect.asVoid, Effect.orDie),
      activeMethods: (org, customerId) =>
        sql`SELECT * FROM payment_methods WHERE organization_id = ${org} AND customer_id = ${customerId}
            AND status = 'active' ORDER BY is_default DESC, created_at DESC, id DESC`.pipe(
          Effect.map((rows) => rows.map(toMethod)),
          Effect.orDie
        ),
      findMethod: (org, id) =>
        sql`SELECT * FROM payment_methods WHERE organization_id = ${org} AND id = ${id}`.pipe(
          Effect.map((rows) => Option.fromNullable(rows[0]).pipe(Option.map(toMethod))),
          Effect.orDie
        ),
      removeMethod: (org, id, now) =>
        sql`UPDATE payment_methods SET status = 'removed', is_default = 0, updated_at = ${now}
            WHERE organization_id = ${org} AND id = ${id}`.pipe(Effect.asVoid, Effect.orDie),
      insertCheckout: (c) =>
        sql`INSERT INTO checkouts ${sql.insert({ ...c, data: JSON.stringify(c.data) })}`.pipe(Effect.asVoid, Effect.orDie),
      findCheckout: (org, reference) =>
        sql`SELECT * FROM checkouts WHERE organization_id = ${org} AND reference = ${reference}`.pipe(
          Effect.map((rows) => Option.fromNullable(rows[0]).pipe(Option.map(toCheckout))),
          Effect.orDie
        ),
      completeCheckout: (org, reference, now) =>
        sql`UPDATE checkouts SET status = 'completed', updated_at = ${now}
            WHERE organization_id = ${org} AND reference = ${reference} AND status = 'open' RETURNING id`.pipe(
          Effect.map((rows) => rows.length === 1),
          Effect.orDie
        ),
      insertPayment: (p) => sql`INSERT INTO payments ${sql.insert({ ...p })}`.pipe(Effect.asVoid, Effect.orDie),
      attemptsFor: (org, targetId) =>
        sql<{ n: number }>`SELECT (SELECT COUNT(*) FROM checkouts WHERE organization_id = ${org} AND target_id = ${targetId})
            + (SELECT COUNT(*) FROM payments WHERE organization_id = ${org} AND target_id = ${targetId}) AS n`.pipe(
          Effect.map((rows) => Number(rows[0]?.n ?? 0)),
          Effect.orDie
        )
    }
  })
)
