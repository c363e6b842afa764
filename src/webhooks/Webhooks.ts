import { SqlClient } from "@effect/sql"
import { Clock, Context, Effect, Either, Layer, Option } from "effect"
import type { WebhookAck } from "../api/webhooks.ts"
import { InvalidInput, InvalidSignature, NotFound } from "../domain/errors.ts"
import { Organizations } from "../organizations/Organizations.ts"
import { Adapters } from "../payments/Adapters.ts"
import { isProviderName, type ProviderEvent, type ProviderName } from "../payments/PaymentProvider.ts"
import { Payments } from "../payments/Payments.ts"
import { ProviderAccounts, type ResolvedAccount } from "../payments/ProviderAccounts.ts"
import { jsonTextProblem, MAX_JSON_DEPTH } from "../boundary/jsonText.ts"
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

/** A refund or dispute that names its payment only by the provider's id. */
const unresolved = (event: ProviderEvent) =>
  (event._tag === "Refunded" || event._tag === "Disputed") && event.reference === null

/** An organization reference a query may carry: PostgreSQL refuses U+0000 in any string. */
const storable = (s: string) => !s.includes("\u0000")

const ack = (skipped: boolean, error?: string): WebhookAck => ({
  success: true,
  received: true,
  skipped,
  ...(error === undefined ? {} : { error })
})

export const WebhooksLive = Layer.effect(
  Webhooks,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const config = yield* AppConfig
    const organizations = yield* Organizations
    const findOrganization = (ref: string) => Effect.option(organizations.get(ref))
    const accounts = yield* ProviderAccounts
    const adapters = yield* Adapters
    const payments = yield* Payments

    const unsupported = (provider: string) =>
      new NotFound({ code: "provider_not_supported", message: `No '${provider}' payment provider here` })
    // No account means no secret: no signature can be valid (decisions.md §8), and 401 says what the sender must fix.
    const invalidSignature = () => new InvalidSignature({ message: "The webhook signature does not verify" })
    const malformed = () => new InvalidInput({ message: "The webhook body is not a valid event", issues: [] })

    const receive: WebhooksShape["receive"] = (route, rawBody, headers) =>
      Effect.gen(function* () {
        if (route._tag === "Sandbox" && config.appEnv === "live") {
          return yield* new NotFound({ code: "not_found", message: "No such route" })
        }
        const provider = route.provider
        const adapter = isProviderName(provider) ? adapters.get(provider) : undefined
        if (adapter === undefined || !isProviderName(provider)) return yield* unsupported(provider)

        let organizationId: string | null = null
        let resolved: ResolvedAccount
        if (route._tag === "Organization") {
          const org = yield* findOrganization(route.organization)
          if (Option.isNone(org)) {
            return yield* new NotFound({
              code: "organization_not_found",
              message: `No organization '${route.organization}'`
            })
          }
          organizationId = org.value.id
          const account = yield* accounts.forWebhook(organizationId, provider)
          if (Option.isNone(account)) return yield* invalidSignature()
          resolved = account.value
        } else {
          const managed = accounts.managed(provider)
          if (Option.isNone(managed)) return yield* invalidSignature()
          resolved = { account: managed.value, owner: "managed" }
        }

        const now = yield* Clock.currentTimeMillis
        if (!(yield* adapter.verifySignature(resolved.account, rawBody, headers, now))) return yield* invalidSignature()

        // Route before validating (decisions.md §8): what cannot be routed, or is of a type the adapter does not
        // handle, is acknowledged and skipped whatever else the body lacks; only a routed event of a handled type
        // is held to its handler's fields.
        const routing = yield* Effect.either(adapter.routeEvent(rawBody))
        if (Either.isLeft(routing)) {
          if (route._tag === "Sandbox") return ack(true)
          return yield* malformed()
        }
        if (!routing.right.handled) return ack(true)
        if (route._tag === "Sandbox") {
          // The managed account serves every sandbox organization: the event names its own.
          const named = routing.right.organizationId
          if (named === null || !storable(named)) return ack(true)
          const org = yield* findOrganization(named)
          if (Option.isNone(org)) return ack(true)
          organizationId = org.value.id
        }
        // What no database can store or compare (U+0000, on PostgreSQL a failure) or decode safely (deep nesting)
        // is malformed, as it is in an API request body.
        if (jsonTextProblem(new TextDecoder().decode(rawBody), MAX_JSON_DEPTH) !== undefined) return yield* malformed()
        const event = yield* adapter.parseEvent(rawBody).pipe(Effect.mapError(malformed))

        const org = organizationId!
        // What the event leaves out is fetched before the transaction, so no lock waits on the network: a method
        // known only by its id (Stripe's setup_intent.succeeded), the payment a refund or dispute names by the
        // provider's id, or no method at all (Stripe's checkout.session.completed), which verifying the payment
        // supplies. Without an answer the event is applied as it came.
        const asked = yield* Effect.either(adapter.completeEvent(resolved.account, event))
        if (Either.isLeft(asked)) {
          const { reason } = asked.left
          yield* Effect.logWarning("could not fetch what a webhook event lacks", { provider, reason })
          // A refund or dispute whose payment could not be looked up is not recorded as received, so the same event
          // delivered again (the provider's dashboard can resend it) still takes effect.
          if (unresolved(event) && (reason === "unavailable" || reason === "timeout")) {
            return ack(true, "The payment this event is about could not be looked up at the provider; deliver it again")
          }
        }
        const completed = Either.getOrElse(asked, () => event)
        const enriched =
          completed._tag === "PaymentSucceeded" && completed.method === null
            ? yield* adapter.verify(resolved.account, completed.reference).pipe(
                Effect.map((v) => ({ ...completed, method: v.method })),
                Effect.orElseSucceed(() => completed)
              )
            : completed

        // The dedupe record and the effects commit together: a replay finds the record and does nothing.
        const result = yield* sql
          .withTransaction(
            Effect.gen(function* () {
              const fresh =
                yield* sql`INSERT INTO webhook_events (organization_id, provider, event_key, event_type, received_at)
              VALUES (${org}, ${provider}, ${event.eventKey}, ${event._tag === "Ignored" ? event.type : event._tag}, ${now})
              ON CONFLICT DO NOTHING RETURNING event_key`
              if (fresh.length === 0) return ack(true)
              const applied = yield* payments.applyEvent(org, provider as ProviderName, enriched)
              return ack(!applied)
            })
          )
          .pipe(Effect.orDie)
        // Paystack saves a card through a small real charge: give it back once the card is saved.
        if (
          !result.skipped &&
          enriched._tag === "PaymentSucceeded" &&
          enriched.metadata.purpose === "setup" &&
          enriched.amount > 0
        ) {
          yield* adapter
            .refund(resolved.account, enriched.reference, null)
            .pipe(
              Effect.catchAll((e) => Effect.logWarning("setup charge refund failed", { provider, reason: e.reason }))
            )
        }
        return result
      })

    return { receive }
  })
)
