import { SqlClient } from "@effect/sql"
import { Clock, Context, Effect, Layer, Option } from "effect"
import type { WebhookAck } from "../api/webhooks.ts"
import { InvalidInput, InvalidSignature, NotFound } from "../domain/errors.ts"
import { OrganizationsRepo } from "../organizations/OrganizationsRepo.ts"
import { Adapters } from "../payments/Adapters.ts"
import { isProviderName, type ProviderName } from "../payments/PaymentProvider.ts"
import { Payments } from "../payments/Payments.ts"
import { ProviderAccounts, type ResolvedAccount } from "../payments/ProviderAccounts.ts"
import { AppConfig } from "../platform/config.ts"

export type WebhookRoute =
  | { readonly _tag: "Organization"; readonly organization: string; readonly provider: string }
  | { readonly _tag: "Sandbox"; readonly provider: string }

export interface WebhooksShape {
  /** decisions.md §8: verify on the raw bytes, route, then take effect exactly once. */
  readonly receive: (
    route: WebhookRoute,
    rawBody: Uint8Array,
    headers: Readonly<Record<string, string | undefined>>
  ) => Effect.Effect<WebhookAck, NotFound | InvalidSignature | InvalidInput>
}

export class Webhooks extends Context.Tag("Webhooks")<Webhooks, WebhooksShape>() {}

const ack = (skipped: boolean, error?: string): WebhookAck => ({
  success: true,
  received: true,
  skipped,
  ...(error === undefined ? {} : { error })
})

export const WebhooksLive = Layer.effect(
  Webhooks,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const config = yield* AppConfig
    const organizations = yield* OrganizationsRepo
    const accounts = yield* ProviderAccounts
    const adapters = yield* Adapters
    const payments = yield* Payments

    const unsupported = (provider: string) =>
      new NotFound({ code: "provider_not_supported", message: `No '${provider}' payment provider here` })

    const receive: WebhooksShape["receive"] = (route, rawBody, headers) =>
      Effect.gen(function*() {
        if (route._tag === "Sandbox" && config.appEnv === "live") {
          return yield* new NotFound({ code: "not_found", message: "No such route" })
        }
        const provider = route.provider
        const adapter = isProviderName(provider) ? adapters.get(provider) : undefined
        if (adapter === undefined || !isProviderName(provider)) return yield* unsupported(provider)

        let organizationId: string | null = null
        let resolved: ResolvedAccount
        if (route._tag === "Organization") {
          const org = yield* organizations.findByIdOrSlug(route.organization)
          if (Option.isNone(org)) {
            return yield* new NotFound({ code: "organization_not_found", message: `No organization '${route.organization}'` })
          }
          organizationId = org.value.id
          const account = yield* accounts.forWebhook(organizationId, provider)
          if (Option.isNone(account)) return yield* unsupported(provider)
          resolved = account.value
        } else {
          const managed = accounts.managed(provider)
          if (Option.isNone(managed)) return yield* unsupported(provider)
          resolved = { account: managed.value, owner: "managed" }
        }

        const now = yield* Clock.currentTimeMillis
        if (!(yield* adapter.verifySignature(resolved.account, rawBody, headers, now))) {
          return yield* new InvalidSignature({ message: "The webhook signature does not verify" })
        }
        const event = yield* adapter.parseEvent(rawBody).pipe(
          Effect.mapError(() => new InvalidInput({ message: "The webhook body is not a valid event", issues: [] }))
        )

        if (route._tag === "Sandbox") {
          // The managed account serves every sandbox organization: the event names its own.
          const named = event._tag === "Ignored" ? undefined : event.metadata.organization_id
          if (named === undefined || named === "") return ack(true)
          const org = yield* organizations.findByIdOrSlug(named)
          if (Option.isNone(org)) return ack(true)
          organizationId = org.value.id
        }
        const org = organizationId!
        // Some events carry no payment method (Stripe's checkout.session.completed unexpanded): ask the provider,
        // before the transaction, so no lock waits on the network.
        const enriched = event._tag === "PaymentSucceeded" && event.method === null
          ? yield* adapter.verify(resolved.account, event.reference).pipe(
            Effect.map((v) => ({ ...event, method: v.method })),
            Effect.orElseSucceed(() => event)
          )
          : event

        // The dedupe record and the effects commit together: a replay finds the record and does nothing.
        const result = yield* sql.withTransaction(Effect.gen(function*() {
          const fresh = yield* sql`INSERT INTO webhook_events (organization_id, provider, event_key, event_type, received_at)
              VALUES (${org}, ${provider}, ${event.eventKey}, ${event._tag === "Ignored" ? event.type : event._tag}, ${now})
              ON CONFLICT DO NOTHING RETURNING event_key`
          if (fresh.length === 0) return ack(true)
          const applied = yield* payments.applyEvent(org, provider as ProviderName, enriched)
          return ack(!applied)
        })).pipe(Effect.orDie)
        // Paystack saves a card through a small real charge: give it back once the card is saved.
        if (
          !result.skipped && enriched._tag === "PaymentSucceeded" && enriched.metadata.purpose === "setup" &&
          enriched.amount > 0
        ) {
          yield* adapter.refund(resolved.account, enriched.reference, null).pipe(
            Effect.catchAll((e) => Effect.logWarning("setup charge refund failed", { provider, reason: e.reason }))
          )
        }
        return result
      })

    return { receive }
  })
)
