import { Effect } from "effect"
import { Credits } from "../credits/Credits.ts"
import { Organizations } from "../organizations/Organizations.ts"
import { isProviderName } from "../payments/PaymentProvider.ts"
import { ProviderAccounts } from "../payments/ProviderAccounts.ts"
import { flag, invalid, need, type Output, type Parsed, UsageError } from "./args.ts"

/** `provider …` (accounts per organization, secrets encrypted at rest) and `credits grant`. */
export const paymentsCommand = (args: Parsed) =>
  Effect.gen(function* () {
    const orgs = yield* Organizations
    const accounts = yield* ProviderAccounts
    const [group, action, orgRef, ...rest] = args.positional
    const org = yield* orgs.get(yield* need(orgRef, "<org>"))

    switch (`${group} ${action}`) {
      case "provider set": {
        const provider = yield* need(rest[0], "<provider>")
        if (provider !== "paystack" && provider !== "stripe") {
          return yield* Effect.fail(new UsageError(`the provider must be paystack or stripe, not '${provider}'`))
        }
        const secretKey = flag(args, "secret-key") ?? process.env.PROVIDER_SECRET_KEY
        if (secretKey === undefined || secretKey === "")
          return yield* Effect.fail(new UsageError("missing --secret-key"))
        const webhookSecret = flag(args, "webhook-secret") ?? process.env.PROVIDER_WEBHOOK_SECRET ?? null
        if (provider === "stripe" && webhookSecret === null) {
          return yield* invalid("Stripe needs its webhook signing secret", [
            { path: "webhook-secret", message: "is missing (whsec_…)" }
          ])
        }
        yield* accounts.set(org.id, provider, { secretKey, webhookSecret, baseUrl: flag(args, "base-url") ?? null })
        return {
          json: { organization: org.slug, provider, configured: true },
          text: `Stored the ${provider} account of ${org.slug} (encrypted). Webhook URL: /webhooks/${org.slug}/${provider}`
        } satisfies Output
      }
      case "provider list": {
        const list = yield* accounts.list(org.id)
        return {
          json: { providers: list },
          text: list.length === 0 ? "No provider accounts." : list.map((p) => p.provider).join("\n")
        } satisfies Output
      }
      case "provider remove": {
        const provider = yield* need(rest[0], "<provider>")
        if (!isProviderName(provider)) return yield* Effect.fail(new UsageError(`unknown provider '${provider}'`))
        const removed = yield* accounts.remove(org.id, provider)
        return {
          json: { removed },
          text: removed ? `Removed the ${provider} account.` : "There was none."
        } satisfies Output
      }
      case "credits grant": {
        const customer = yield* need(rest[0], "<customer>")
        const system = yield* need(rest[1], "<credit-system>")
        const text = yield* need(rest[2], "<amount>")
        if (rest.length > 3) return yield* Effect.fail(new UsageError(`unexpected '${rest.slice(3).join(" ")}'`))
        const amount = /^\d+(\.\d+)?$/.test(text) ? Number(text) : Number.NaN
        if (Number.isNaN(amount)) {
          return yield* invalid(`The amount '${text}' is not a number`, [
            { path: "amount", message: "must be a non-negative decimal number" }
          ])
        }
        const granted = yield* Effect.flatMap(Credits, (credits) =>
          credits.grant(org.id, customer, system, amount, args.flags.has("bonus") ? "bonus" : "addon")
        )
        return {
          json: granted,
          text: `Credits of ${granted.creditSystem}: bonus ${granted.bonusBalance}, purchased ${granted.addonBalance}`
        } satisfies Output
      }
      default:
        return yield* Effect.fail(new UsageError(`unknown command '${args.positional.join(" ")}'`))
    }
  })
