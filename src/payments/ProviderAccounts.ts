import { SqlClient } from "@effect/sql"
import { Clock, Context, Effect, Layer, Option, Redacted } from "effect"
import { ProviderNotConfigured } from "../domain/errors.ts"
import { AppConfig } from "../platform/config.ts"
import { Encryption } from "../platform/encryption.ts"
import { isProviderName, type ProviderAccount, type ProviderName } from "./PaymentProvider.ts"

/** An account in use: whose it is decides how its webhooks are routed (decisions.md §8). */
export interface ResolvedAccount {
  readonly account: ProviderAccount
  /** `managed`: the service's own sandbox account, whose webhooks arrive on /webhooks/sandbox/{provider}. */
  readonly owner: "organization" | "managed"
}

export interface ProviderAccountsShape {
  readonly set: (
    organizationId: string,
    provider: ProviderName,
    secrets: { readonly secretKey: string; readonly webhookSecret: string | null; readonly baseUrl: string | null }
  ) => Effect.Effect<void>
  readonly remove: (organizationId: string, provider: ProviderName) => Effect.Effect<boolean>
  /** Configured providers of an organization, never their secrets. */
  readonly list: (organizationId: string) => Effect.Effect<ReadonlyArray<{ provider: ProviderName; updatedAt: number }>>
  /**
   * The account to use: the organization's own, else on sandbox the managed test account, else (sandbox) the
   * built-in simulated provider, whatever `preferred` names. `preferred` names a provider; without it the first of
   * paystack, stripe wins. On live, no account of the provider is `ProviderNotConfigured`.
   */
  readonly resolve: (
    organizationId: string,
    preferred?: string | null
  ) => Effect.Effect<ResolvedAccount, ProviderNotConfigured>
  /** For webhooks: the account a provider's event for this organization must be verified with. */
  readonly forWebhook: (organizationId: string, provider: ProviderName) => Effect.Effect<Option.Option<ResolvedAccount>>
  /** The managed sandbox account of a provider (sandbox route). */
  readonly managed: (provider: ProviderName) => Option.Option<ProviderAccount>
}

export class ProviderAccounts extends Context.Tag("ProviderAccounts")<ProviderAccounts, ProviderAccountsShape>() {}

export const ProviderAccountsLive = Layer.effect(
  ProviderAccounts,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const encryption = yield* Encryption
    const config = yield* AppConfig
    const sandbox = config.appEnv === "sandbox"

    const managed = (provider: ProviderName): Option.Option<ProviderAccount> => {
      if (!sandbox) return Option.none()
      switch (provider) {
        case "paystack":
          return Option.map(config.sandboxAccounts.paystack, (key) => ({
            provider,
            secretKey: Redacted.value(key),
            webhookSecret: null,
            baseUrl: Option.getOrUndefined(config.providerBaseUrls.paystack)
          }))
        case "stripe":
          return Option.map(config.sandboxAccounts.stripe, (key) => ({
            provider,
            secretKey: Redacted.value(key),
            webhookSecret: Option.getOrNull(Option.map(config.sandboxAccounts.stripeWebhookSecret, Redacted.value)),
            baseUrl: Option.getOrUndefined(config.providerBaseUrls.stripe)
          }))
        case "simulated":
          return Option.some({
            provider,
            secretKey: encryption.derive("simulated-secret"),
            webhookSecret: encryption.derive("simulated-webhooks")
          })
      }
    }

    const own = (organizationId: string, provider: ProviderName) =>
      sql<{
        secretKey: string
        webhookSecret: string | null
        baseUrl: string | null
      }>`SELECT secret_key, webhook_secret, base_url
          FROM provider_accounts WHERE organization_id = ${organizationId} AND provider = ${provider}`.pipe(
        Effect.map((rows) =>
          Option.fromNullable(rows[0]).pipe(
            Option.map((row): ProviderAccount => ({
              provider,
              secretKey: encryption.decrypt(row.secretKey),
              webhookSecret: row.webhookSecret === null ? null : encryption.decrypt(row.webhookSecret),
              baseUrl:
                row.baseUrl ??
                Option.getOrUndefined(
                  provider === "paystack"
                    ? config.providerBaseUrls.paystack
                    : provider === "stripe"
                      ? config.providerBaseUrls.stripe
                      : Option.none()
                )
            }))
          )
        ),
        Effect.orDie
      )

    const forWebhook = (organizationId: string, provider: ProviderName) =>
      Effect.map(own(organizationId, provider), (account) =>
        Option.isSome(account)
          ? Option.some<ResolvedAccount>({ account: account.value, owner: "organization" })
          : Option.map(managed(provider), (m): ResolvedAccount => ({ account: m, owner: "managed" }))
      )

    const resolve = (organizationId: string, preferred?: string | null) =>
      Effect.gen(function* () {
        const order: ReadonlyArray<ProviderName> =
          preferred !== undefined && preferred !== null
            ? isProviderName(preferred)
              ? [preferred]
              : []
            : ["paystack", "stripe"]
        for (const provider of order) {
          const found = yield* forWebhook(organizationId, provider)
          if (Option.isSome(found)) return found.value
        }
        // A sandbox flow never ends in provider_not_configured (decisions.md §8): what no account serves, the
        // simulated provider does, also when the plan or pack names another provider.
        if (sandbox) return { account: Option.getOrThrow(managed("simulated")), owner: "managed" as const }
        return yield* new ProviderNotConfigured({
          message:
            preferred !== undefined && preferred !== null
              ? `The payment provider '${preferred}' is not configured for this organization`
              : "No payment provider is configured for this organization"
        })
      })

    return {
      set: (organizationId, provider, secrets) =>
        Effect.gen(function* () {
          const now = yield* Clock.currentTimeMillis
          const row = {
            organizationId,
            provider,
            secretKey: encryption.encrypt(secrets.secretKey),
            webhookSecret: secrets.webhookSecret === null ? null : encryption.encrypt(secrets.webhookSecret),
            baseUrl: secrets.baseUrl,
            createdAt: now,
            updatedAt: now
          }
          yield* sql`INSERT INTO provider_accounts ${sql.insert(row)}
            ON CONFLICT (organization_id, provider) DO UPDATE SET secret_key = excluded.secret_key,
              webhook_secret = excluded.webhook_secret, base_url = excluded.base_url, updated_at = excluded.updated_at`
        }).pipe(Effect.orDie),
      remove: (organizationId, provider) =>
        sql`DELETE FROM provider_accounts WHERE organization_id = ${organizationId} AND provider = ${provider}
            RETURNING provider`.pipe(
          Effect.map((rows) => rows.length > 0),
          Effect.orDie
        ),
      list: (organizationId) =>
        sql<{ provider: ProviderName; updatedAt: number }>`SELECT provider, updated_at FROM provider_accounts
            WHERE organization_id = ${organizationId} ORDER BY provider`.pipe(
          Effect.map((rows) => rows.map((r) => ({ provider: r.provider, updatedAt: Number(r.updatedAt) }))),
          Effect.orDie
        ),
      resolve,
      forWebhook,
      managed
    }
  })
)
