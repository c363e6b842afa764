import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect } from "effect"
import { createHmac } from "node:crypto"
import { ProviderAccounts } from "../../src/payments/ProviderAccounts.ts"
import { SIGNATURE_HEADER } from "../../src/payments/simulated/SimulatedAdapter.ts"
import { databases, startServer, type TestServer } from "../support/harness.ts"
import { apiView, buildWorld, getJson, orgState, type World } from "./support.ts"

/**
 * Tenant isolation, route by route (issue 6): organization B, with its own key, names organization A's objects
 * (ids, external ids, emails, slugs, references) in paths, bodies and query strings of every route of the served
 * OpenAPI document. Every answer is a 404 (or an empty list, or a denial, or a skipped webhook) that reveals none of
 * A's identifiers, and A's stored rows and everything A reads through the API are the same afterwards. A route of
 * the document without attacks here fails the test: a new route must be added to the walk.
 */

interface Attack {
  readonly method: "GET" | "POST" | "DELETE"
  readonly path: string
  readonly body?: unknown
  /** Sent as is (webhooks are signed over these bytes). */
  readonly rawBody?: string
  readonly headers?: Record<string, string>
  /** The answers that are acceptable: statuses, and codes for error bodies and entitlement denials. */
  readonly expect: {
    readonly status: ReadonlyArray<number>
    readonly codes?: ReadonlyArray<string>
    /** A webhook that must be acknowledged and skipped. */
    readonly skipped?: true
    /** A list answer: B's own objects only. */
    readonly list?: true
  }
}

const NOT_FOUND = { status: [404], codes: ["customer_not_found"] } as const
const NO_SUCH = { status: [404], codes: ["not_found"] } as const
const DENIAL = { status: [200], codes: ["customer_not_found"] } as const

const q = (params: Record<string, string>) => "?" + new URLSearchParams(params).toString()
const enc = encodeURIComponent

/** A's identifiers that B must never learn: none may appear in an answer unless B's request named it. */
const secretsOf = (a: World): ReadonlyArray<string> => [
  a.org.id,
  ...a.customers.flatMap((c) => [c.id, c.externalId, c.email, c.email.toLowerCase()]),
  ...Object.values(a.subscriptions),
  a.invoice!.id,
  a.paymentMethod!,
  a.pendingReference!,
  a.entity,
  a.idempotencyKey,
  ...Object.values(a.catalog.featureIds),
  ...Object.values(a.catalog.planIds),
  a.catalog.packId,
  a.catalog.creditSystemId,
  ...a.webhookEndpoints,
  a.eventId,
  ...["tokens", "seats", "images", "credits", "small", "free", "basic", "off"].map((s) => `${a.prefix}${s}`)
]

const paystackSign = (secret: string, body: string) => createHmac("sha512", secret).update(body).digest("hex")
const simulatedSign = (secret: string, body: string) => createHmac("sha256", secret).update(body).digest("hex")

/** A Paystack `charge.success` for A's pending checkout, naming A in its metadata. */
const paystackEventFor = (a: World, id: number) =>
  JSON.stringify({
    event: "charge.success",
    data: {
      id,
      reference: a.pendingReference,
      amount: 500000,
      currency: "NGN",
      status: "success",
      metadata: {
        organization_id: a.org.id,
        customer_id: a.customers[1]!.id,
        purpose: "subscription",
        target_id: a.subscriptions.pending,
        reference: a.pendingReference
      },
      authorization: {
        authorization_code: `AUTH_${id}`,
        bin: "408408",
        last4: "4081",
        exp_month: "12",
        exp_year: "2030",
        channel: "card",
        card_type: "visa",
        bank: "Test Bank",
        country_code: "NG",
        brand: "visa",
        reusable: true,
        signature: `SIG_${id}`
      },
      customer: { email: a.customers[1]!.email, customer_code: `CUS_${id}` }
    }
  })

const simulatedEventFor = (a: World, id: string) =>
  JSON.stringify({
    id,
    type: "payment.succeeded",
    data: {
      reference: a.pendingReference,
      amount: 500000,
      currency: "NGN",
      metadata: {
        organization_id: a.org.id,
        customer_id: a.customers[1]!.id,
        purpose: "subscription",
        target_id: a.subscriptions.pending,
        reference: a.pendingReference
      }
    }
  })

const SECRETS = { a: "sk_test_isolation_account_of_a", b: "sk_test_isolation_account_of_b" }

/**
 * Every route's attacks, by "METHOD /path" as the OpenAPI document writes it. `create` attacks make objects in
 * B (with A's external ids and emails): they run after every read, since B may then legitimately find its own.
 */
const attacksFor = (a: World, b: World, managedSimulatedSecret: string) => {
  const [a1, a2] = a.customers as [World["customers"][number], World["customers"][number]]
  const b1 = b.customers[0]!
  const p = a.prefix
  /** Every way of naming A's customers, including a case variant of the email. */
  const aRefs = [a1.id, a1.externalId, a1.email, a1.email.toUpperCase(), a2.id, a2.externalId]
  const aFeatures = [`${p}tokens`, a.catalog.featureIds[`${p}tokens`]!]
  const aSeats = [`${p}seats`, a.catalog.featureIds[`${p}seats`]!]
  const aPlans = [`${p}basic`, `${p}free`, ...Object.values(a.catalog.planIds)]
  const aPacks = [`${p}small`, a.catalog.packId]
  const aSubs = Object.values(a.subscriptions)
  const bTokens = `${b.prefix}tokens`
  const bSeats = `${b.prefix}seats`
  const list = { status: [200], list: true } as const
  const webhookSkipped = { status: [200], skipped: true } as const

  const paystackByB = (id: number) => {
    const rawBody = paystackEventFor(a, id)
    return {
      rawBody,
      headers: { "content-type": "application/json", "x-paystack-signature": paystackSign(SECRETS.b, rawBody) }
    }
  }
  const simulated = (id: string, secret: string) => {
    const rawBody = simulatedEventFor(a, id)
    return {
      rawBody,
      headers: { "content-type": "application/json", [SIGNATURE_HEADER]: simulatedSign(secret, rawBody) }
    }
  }

  const reads: Record<string, ReadonlyArray<Attack>> = {
    "GET /health": [{ method: "GET", path: "/health", expect: { status: [200] } }],
    "GET /ready": [{ method: "GET", path: "/ready", expect: { status: [200] } }],
    "GET /v1/customers": [
      { method: "GET", path: "/v1/customers", expect: list },
      ...aRefs.map((r): Attack => ({ method: "GET", path: `/v1/customers${q({ search: r })}`, expect: list })),
      { method: "GET", path: `/v1/customers${q({ search: "person" })}`, expect: list },
      { method: "GET", path: `/v1/customers${q({ email: a1.email })}`, expect: list },
      { method: "GET", path: `/v1/customers${q({ externalId: a1.externalId })}`, expect: list },
      { method: "GET", path: `/v1/customers${q({ limit: "100", offset: "0" })}`, expect: list }
    ],
    "GET /v1/customers/{id}": aRefs.map((r) => ({ method: "GET", path: `/v1/customers/${enc(r)}`, expect: NOT_FOUND })),
    // A's customers with A's coupon: B finds neither customer, so no discount is applied nor removed.
    "POST /v1/customers/{id}/discount": aRefs.map((r) => ({
      method: "POST",
      path: `/v1/customers/${enc(r)}/discount`,
      body: { coupon: `${a.prefix}off` },
      expect: NOT_FOUND
    })),
    "DELETE /v1/customers/{id}/discount": aRefs.map((r) => ({
      method: "DELETE",
      path: `/v1/customers/${enc(r)}/discount`,
      expect: NOT_FOUND
    })),
    "POST /v1/customers/overage-limit": aRefs.map((customer) => ({
      method: "POST",
      path: "/v1/customers/overage-limit",
      body: { customer, maxOverageAmount: 1, onLimitReached: "block" },
      expect: NOT_FOUND
    })),
    "POST /v1/customers/feature-config": [
      ...aRefs.map((customer): Attack => ({
        method: "POST",
        path: "/v1/customers/feature-config",
        body: { customer, feature: aFeatures[0], overage: "block", maxOverageUnits: 0 },
        expect: NOT_FOUND
      })),
      ...aFeatures.map((feature): Attack => ({
        method: "POST",
        path: "/v1/customers/feature-config",
        body: { customer: b1.externalId, feature, overage: "block" },
        expect: { status: [404], codes: ["feature_not_found"] }
      }))
    ],
    "POST /v1/check": [
      ...aRefs.flatMap((customer) =>
        [bTokens, ...aFeatures].map((feature): Attack => ({
          method: "POST",
          path: "/v1/check",
          body: { customer, feature, value: 1, sendEvent: true },
          expect: DENIAL
        }))
      ),
      ...aFeatures.map((feature): Attack => ({
        method: "POST",
        path: "/v1/check",
        body: { customer: b1.externalId, feature, value: 1 },
        expect: { status: [200], codes: ["feature_not_found"] }
      })),
      {
        method: "POST",
        path: "/v1/check",
        body: { customer: b1.externalId, feature: bSeats, entity: a.entity },
        expect: { status: [200], codes: ["entity_not_found"] }
      }
    ],
    "POST /v1/track": [
      ...aRefs.map((customer): Attack => ({
        method: "POST",
        path: "/v1/track",
        body: { customer, feature: aFeatures[0], value: 1 },
        expect: DENIAL
      })),
      // A's own request under A's idempotency key, replayed by B: B's scope, not A's stored answer.
      {
        method: "POST",
        path: "/v1/track",
        body: { customer: a1.externalId, feature: `${p}tokens`, value: 150 },
        headers: { "idempotency-key": a.idempotencyKey },
        expect: DENIAL
      },
      ...aFeatures.map((feature): Attack => ({
        method: "POST",
        path: "/v1/track",
        body: { customer: b1.externalId, feature, value: 1 },
        expect: { status: [200], codes: ["feature_not_found"] }
      }))
    ],
    // A batch answers 200 with each item's answer: every one of A's references is unknown to B (no leak is judged
    // on the whole text; nothing changed is checked after the walk).
    "POST /v1/track/batch": [
      {
        method: "POST",
        path: "/v1/track/batch",
        body: {
          events: [
            ...aRefs.map((customer) => ({ customer, feature: aFeatures[0], value: 1 })),
            { customer: a1.externalId, feature: `${p}tokens`, value: 1, idempotencyKey: a.idempotencyKey }
          ]
        },
        expect: { status: [200] }
      }
    ],
    "GET /v1/credit-systems": [{ method: "GET", path: "/v1/credit-systems", expect: list }],
    "GET /v1/credit-packs": [{ method: "GET", path: "/v1/credit-packs", expect: list }],
    "GET /v1/billing/profile": [{ method: "GET", path: "/v1/billing/profile", expect: list }],
    "POST /v1/entities": [
      ...aRefs.map((customer): Attack => ({
        method: "POST",
        path: "/v1/entities",
        body: { customer, feature: aSeats[0], entity: a.entity },
        expect: NOT_FOUND
      })),
      ...aSeats.map((feature): Attack => ({
        method: "POST",
        path: "/v1/entities",
        body: { customer: b1.externalId, feature, entity: a.entity },
        expect: { status: [404], codes: ["feature_not_found"] }
      }))
    ],
    "POST /v1/entities/remove": [
      ...aRefs.map((customer): Attack => ({
        method: "POST",
        path: "/v1/entities/remove",
        body: { customer, feature: aSeats[0], entity: a.entity },
        expect: NOT_FOUND
      })),
      {
        method: "POST",
        path: "/v1/entities/remove",
        body: { customer: b1.externalId, feature: bSeats, entity: a.entity },
        expect: { status: [404], codes: ["entity_not_found"] }
      },
      ...aSeats.map((feature): Attack => ({
        method: "POST",
        path: "/v1/entities/remove",
        body: { customer: b1.externalId, feature, entity: a.entity },
        expect: { status: [404], codes: ["feature_not_found"] }
      }))
    ],
    "POST /v1/attach": [
      ...aRefs.map((customer): Attack => ({
        method: "POST",
        path: "/v1/attach",
        body: { customer, product: `${b.prefix}free` },
        expect: NOT_FOUND
      })),
      ...aPlans.map((product): Attack => ({
        method: "POST",
        path: "/v1/attach",
        body: { customer: b1.externalId, product },
        expect: { status: [404], codes: ["plan_not_found"] }
      })),
      // A's coupon on B's own attach: B's catalog has no such coupon, so nothing is attached or counted.
      {
        method: "POST",
        path: "/v1/attach",
        body: { customer: b1.externalId, product: `${b.prefix}free`, coupon: `${a.prefix}off` },
        expect: { status: [422], codes: ["coupon_invalid"] }
      }
    ],
    "POST /v1/attach/preview": [
      ...aRefs.map((customer): Attack => ({
        method: "POST",
        path: "/v1/attach/preview",
        body: { customer, product: `${b.prefix}free` },
        expect: NOT_FOUND
      })),
      ...aPlans.map((product): Attack => ({
        method: "POST",
        path: "/v1/attach/preview",
        body: { customer: b1.externalId, product },
        expect: { status: [404], codes: ["plan_not_found"] }
      })),
      // A's coupon on B's own attach: B's catalog has no such coupon, so nothing is attached or counted.
      {
        method: "POST",
        path: "/v1/attach/preview",
        body: { customer: b1.externalId, product: `${b.prefix}free`, coupon: `${a.prefix}off` },
        expect: { status: [422], codes: ["coupon_invalid"] }
      }
    ],
    "GET /v1/subscriptions": [
      { method: "GET", path: "/v1/subscriptions", expect: list },
      ...aRefs.map((r): Attack => ({
        method: "GET",
        path: `/v1/subscriptions${q({ customer: r })}`,
        expect: NOT_FOUND
      }))
    ],
    "POST /v1/subscriptions/{id}/checkout": aSubs.map((id) => ({
      method: "POST",
      path: `/v1/subscriptions/${enc(id)}/checkout`,
      body: {},
      expect: { status: [404], codes: ["subscription_not_found"] }
    })),
    "POST /v1/subscriptions/{id}/cancel": aSubs.map((id) => ({
      method: "POST",
      path: `/v1/subscriptions/${enc(id)}/cancel`,
      expect: { status: [404], codes: ["subscription_not_found"] }
    })),
    "POST /v1/subscriptions/{id}/resume": aSubs.map((id) => ({
      method: "POST",
      path: `/v1/subscriptions/${enc(id)}/resume`,
      expect: { status: [404], codes: ["subscription_not_found"] }
    })),
    "POST /v1/subscriptions/{id}/cancel-change": aSubs.map((id) => ({
      method: "POST",
      path: `/v1/subscriptions/${enc(id)}/cancel-change`,
      expect: { status: [404], codes: ["subscription_not_found"] }
    })),
    "POST /v1/billing/invoice": aRefs.map((customer) => ({
      method: "POST",
      path: "/v1/billing/invoice",
      body: { customer },
      expect: NOT_FOUND
    })),
    "GET /v1/billing/invoices": [
      { method: "GET", path: "/v1/billing/invoices", expect: list },
      ...aRefs.map((r): Attack => ({
        method: "GET",
        path: `/v1/billing/invoices${q({ customer: r })}`,
        expect: NOT_FOUND
      }))
    ],
    "GET /v1/billing/usage": [
      { method: "GET", path: "/v1/billing/usage", expect: list },
      ...aRefs.map((r): Attack => ({
        method: "GET",
        path: `/v1/billing/usage${q({ customer: r })}`,
        expect: NOT_FOUND
      }))
    ],
    "GET /v1/billing/credit-notes": [
      { method: "GET", path: "/v1/billing/credit-notes", expect: list },
      { method: "GET", path: `/v1/billing/credit-notes${q({ invoice: a.invoice!.id })}`, expect: list }
    ],
    "GET /v1/billing/credit-notes/{id}/pdf": [
      {
        method: "GET",
        path: `/v1/billing/credit-notes/${enc(a.creditNote!)}/pdf`,
        expect: { status: [404], codes: ["credit_note_not_found"] }
      }
    ],
    "POST /v1/billing/invoices/{id}/refund": [a.invoice!.id, a.invoice!.number].map((id) => ({
      method: "POST",
      path: `/v1/billing/invoices/${enc(id)}/refund`,
      body: {},
      expect: { status: [404], codes: ["invoice_not_found"] }
    })),
    "GET /v1/billing/invoices/{id}/pdf": [a.invoice!.id, a.invoice!.number].map((id) => ({
      method: "GET",
      path: `/v1/billing/invoices/${enc(id)}/pdf`,
      expect: { status: [404], codes: ["invoice_not_found"] }
    })),
    "POST /v1/billing/invoice/{id}/pay": [a.invoice!.id, a.invoice!.number].map((id) => ({
      method: "POST",
      path: `/v1/billing/invoice/${enc(id)}/pay`,
      body: {},
      expect: { status: [404], codes: ["invoice_not_found"] }
    })),
    "POST /v1/addon": [
      ...aRefs.map((customer): Attack => ({
        method: "POST",
        path: "/v1/addon",
        body: { customer, pack: `${b.prefix}small` },
        expect: NOT_FOUND
      })),
      ...aPacks.map((pack): Attack => ({
        method: "POST",
        path: "/v1/addon",
        body: { customer: b1.externalId, pack },
        expect: { status: [404], codes: ["pack_not_found"] }
      }))
    ],
    "POST /v1/wallet/setup": aRefs.map((customer) => ({
      method: "POST",
      path: "/v1/wallet/setup",
      body: { customer },
      expect: NOT_FOUND
    })),
    "POST /v1/wallet/remove": [
      ...aRefs.map((customer): Attack => ({
        method: "POST",
        path: "/v1/wallet/remove",
        body: { customer, id: a.paymentMethod },
        expect: NOT_FOUND
      })),
      {
        method: "POST",
        path: "/v1/wallet/remove",
        body: { customer: b1.externalId, id: a.paymentMethod },
        expect: { status: [404], codes: ["payment_method_not_found"] }
      }
    ],
    "POST /v1/wallet/default": [
      ...aRefs.map((customer): Attack => ({
        method: "POST",
        path: "/v1/wallet/default",
        body: { customer, id: a.paymentMethod },
        expect: NOT_FOUND
      })),
      {
        method: "POST",
        path: "/v1/wallet/default",
        body: { customer: b1.externalId, id: a.paymentMethod },
        expect: { status: [404], codes: ["payment_method_not_found"] }
      }
    ],
    "POST /v1/portal/sessions": aRefs.map((customer) => ({
      method: "POST",
      path: "/v1/portal/sessions",
      body: { customer },
      expect: NOT_FOUND
    })),
    "GET /v1/wallet": aRefs.map((r) => ({ method: "GET", path: `/v1/wallet${q({ customer: r })}`, expect: NOT_FOUND })),
    "GET /v1/customers/{id}/usage/history": [
      ...aRefs.map((r): Attack => ({
        method: "GET",
        path: `/v1/customers/${enc(r)}/usage/history${q({ groupBy: "feature" })}`,
        expect: NOT_FOUND
      })),
      ...aFeatures.map((feature): Attack => ({
        method: "GET",
        path: `/v1/customers/${enc(b1.externalId)}/usage/history${q({ feature })}`,
        expect: { status: [404], codes: ["feature_not_found"] }
      }))
    ],
    // Outbound events: A's endpoints and events, by id, from B.
    "GET /v1/webhook-endpoints": [
      { method: "GET", path: "/v1/webhook-endpoints", expect: list },
      {
        method: "GET",
        path: `/v1/webhook-endpoints${q({ limit: "100", startingAfter: "whe_zzzzzzzzzzzzzzzzzzzzzzzzzz" })}`,
        expect: list
      }
    ],
    "GET /v1/webhook-endpoints/{id}": a.webhookEndpoints.map((id) => ({
      method: "GET",
      path: `/v1/webhook-endpoints/${enc(id)}`,
      expect: NO_SUCH
    })),
    "POST /v1/webhook-endpoints/{id}": a.webhookEndpoints.map((id) => ({
      method: "POST",
      path: `/v1/webhook-endpoints/${enc(id)}`,
      body: { url: "https://example.com/stolen", enabled: false, events: ["invoice.paid"] },
      expect: NO_SUCH
    })),
    "DELETE /v1/webhook-endpoints/{id}": a.webhookEndpoints.map((id) => ({
      method: "DELETE",
      path: `/v1/webhook-endpoints/${enc(id)}`,
      expect: NO_SUCH
    })),
    "POST /v1/webhook-endpoints/{id}/rotate-secret": a.webhookEndpoints.map((id) => ({
      method: "POST",
      path: `/v1/webhook-endpoints/${enc(id)}/rotate-secret`,
      expect: NO_SUCH
    })),
    "GET /v1/webhook-endpoints/{id}/deliveries": a.webhookEndpoints.map((id) => ({
      method: "GET",
      path: `/v1/webhook-endpoints/${enc(id)}/deliveries`,
      expect: NO_SUCH
    })),
    "GET /v1/events": [
      { method: "GET", path: "/v1/events", expect: list },
      { method: "GET", path: `/v1/events${q({ type: "customer.created", limit: "100" })}`, expect: list },
      { method: "GET", path: `/v1/events${q({ startingAfter: "msg_zzzzzzzzzzzzzzzzzzzzzzzzzz" })}`, expect: list },
      ...aRefs.map((r): Attack => ({ method: "GET", path: `/v1/events${q({ customer: r })}`, expect: NOT_FOUND }))
    ],
    "GET /v1/events/{id}": [{ method: "GET", path: `/v1/events/${enc(a.eventId)}`, expect: NO_SUCH }],
    "POST /v1/events/{id}/resend": [
      { method: "POST", path: `/v1/events/${enc(a.eventId)}/resend`, body: {}, expect: NO_SUCH },
      {
        method: "POST",
        path: `/v1/events/${enc(a.eventId)}/resend`,
        body: { endpoint: b.webhookEndpoints[0] },
        expect: NO_SUCH
      },
      ...a.webhookEndpoints.map((endpoint): Attack => ({
        method: "POST",
        path: `/v1/events/${enc(b.eventId)}/resend`,
        body: { endpoint },
        expect: NO_SUCH
      }))
    ],
    // Webhooks: an event naming A's checkout and A's organization, signed for B's own account.
    "POST /webhooks/{organizationId}/{provider}": [
      // On B's route, verified with B's secret: processed in B's scope, where A's checkout does not exist.
      { method: "POST", path: `/webhooks/${b.org.slug}/paystack`, ...paystackByB(9001), expect: webhookSkipped },
      { method: "POST", path: `/webhooks/${b.org.id}/paystack`, ...paystackByB(9002), expect: webhookSkipped },
      // B has no simulated account of its own: its route verifies with the managed secret, still B's scope.
      {
        method: "POST",
        path: `/webhooks/${b.org.slug}/simulated`,
        ...simulated("sim_evt_isolation_1", managedSimulatedSecret),
        expect: webhookSkipped
      },
      // B's signature on A's route: A's account does not verify it.
      {
        method: "POST",
        path: `/webhooks/${a.org.slug}/paystack`,
        ...paystackByB(9003),
        expect: { status: [401], codes: ["invalid_signature"] }
      },
      {
        method: "POST",
        path: `/webhooks/${a.org.slug}/simulated`,
        ...simulated("sim_evt_isolation_2", SECRETS.b),
        expect: { status: [401], codes: ["invalid_signature"] }
      }
    ],
    "POST /webhooks/{organizationId}": [
      { method: "POST", path: `/webhooks/${b.org.slug}`, ...paystackByB(9004), expect: webhookSkipped },
      {
        method: "POST",
        path: `/webhooks/${a.org.slug}`,
        ...paystackByB(9005),
        expect: { status: [401], codes: ["invalid_signature"] }
      }
    ],
    "POST /webhooks/sandbox/{provider}": [
      // The sandbox route routes by metadata.organization_id, so only the managed secret may sign for it.
      {
        method: "POST",
        path: "/webhooks/sandbox/simulated",
        ...simulated("sim_evt_isolation_3", SECRETS.b),
        expect: { status: [401], codes: ["invalid_signature"] }
      },
      // No managed Paystack secret is configured: nothing can verify it (decisions.md §8).
      {
        method: "POST",
        path: "/webhooks/sandbox/paystack",
        ...paystackByB(9006),
        expect: { status: [401], codes: ["invalid_signature"] }
      }
    ]
  }

  // B creates its own objects under A's names: allowed, and still nothing of A's is seen or changed.
  const creates: Record<string, ReadonlyArray<Attack>> = {
    "POST /v1/billing/profile": [
      {
        method: "POST",
        path: "/v1/billing/profile",
        body: { legalName: "B Ltd", invoicePrefix: "BBB", address: { country: "NG" } },
        expect: { status: [200] }
      }
    ],
    "POST /v1/webhook-endpoints": [
      {
        method: "POST",
        path: "/v1/webhook-endpoints",
        body: { url: `https://example.com/${p}hooks-1`, description: `${p}endpoint 1` },
        expect: { status: [200] }
      }
    ],
    "POST /v1/customers": [
      {
        method: "POST",
        path: "/v1/customers",
        body: { id: a1.externalId, email: a1.email },
        expect: { status: [200] }
      },
      {
        method: "POST",
        path: "/v1/customers",
        body: { id: a2.externalId, email: a2.email.toUpperCase() },
        expect: { status: [200] }
      }
    ],
    "POST /v1/sync": [
      {
        method: "POST",
        path: "/v1/sync",
        body: {
          features: [{ slug: `${p}tokens`, name: "Tokens of B", type: "metered" }],
          plans: [{ slug: `${p}basic`, name: "Basic of B", features: [{ slug: `${p}tokens`, limit: 1 }] }]
        },
        expect: { status: [200] }
      }
    ],
    "POST /v1/check": [
      {
        method: "POST",
        path: "/v1/check",
        body: { customer: a1.id, feature: bTokens, sendEvent: true, customerData: { email: `x-${a1.email}` } },
        expect: { status: [200] }
      }
    ],
    "POST /v1/track": [
      {
        method: "POST",
        path: "/v1/track",
        body: { customer: a2.id, feature: bTokens, customerData: { email: a2.email } },
        expect: { status: [200] }
      }
    ]
  }
  return { reads, creates }
}

type Document = { paths: Record<string, Record<string, unknown>> }
const routesOf = (doc: Document) =>
  Object.entries(doc.paths).flatMap(([path, methods]) => Object.keys(methods).map((m) => `${m.toUpperCase()} ${path}`))

/** The route template an attack's path belongs to (static segments before parameters, as the router does). */
const matches = (template: string, method: string, path: string) => {
  const [tm, tp] = template.split(" ") as [string, string]
  if (tm !== method) return false
  const t = tp.split("/")
  const s = path.split("?")[0]!.split("/")
  return t.length === s.length && t.every((seg, i) => seg.startsWith("{") || seg === s[i])
}

for (const database of databases()) {
  describe(`tenant isolation on ${database.name}`, () => {
    let server: TestServer
    let a: World
    let b: World
    let doc: Document
    let managedSimulatedSecret: string
    beforeAll(async () => {
      server = await startServer(database.config)
      a = await buildWorld(server, { prefix: "a-", payments: true })
      b = await buildWorld(server, { prefix: "b-", payments: false })
      // Each organization's own Paystack account (after A's payments, which went through the simulated provider).
      managedSimulatedSecret = await server.run(
        Effect.gen(function* () {
          const accounts = yield* ProviderAccounts
          yield* accounts.set(a.org.id, "paystack", {
            secretKey: SECRETS.a,
            webhookSecret: null,
            baseUrl: "http://127.0.0.1:9"
          })
          yield* accounts.set(b.org.id, "paystack", {
            secretKey: SECRETS.b,
            webhookSecret: null,
            baseUrl: "http://127.0.0.1:9"
          })
          const managed = accounts.managed("simulated")
          if (managed._tag === "None") throw new Error("no simulated provider on sandbox")
          return managed.value.webhookSecret!
        })
      )
      const response = await server.fetch("/openapi.json")
      doc = (await response.json()) as Document
    }, 60_000)
    afterAll(() => server.close())

    const send = async (attack: Attack) => {
      const body = attack.rawBody ?? (attack.body === undefined ? undefined : JSON.stringify(attack.body))
      const response = await server.fetch(attack.path, {
        method: attack.method,
        ...(attack.path.startsWith("/v1/") ? { apiKey: b.org.apiKey } : {}),
        ...(body === undefined ? {} : { body }),
        headers: attack.headers ?? {}
      })
      return { status: response.status, text: await response.text() }
    }

    /** Why an answer is not acceptable, or undefined. */
    const judge = (attack: Attack, status: number, text: string, secrets: ReadonlyArray<string>) => {
      const problems: Array<string> = []
      if (!attack.expect.status.includes(status)) problems.push(`status ${status}`)
      let body: any
      try {
        body = JSON.parse(text)
      } catch {
        problems.push("not JSON")
      }
      if (body !== undefined) {
        if (attack.expect.codes !== undefined) {
          if (!attack.expect.codes.includes(body.code)) problems.push(`code ${body.code}`)
          if (status === 200 && body.allowed !== false) problems.push("not a denial")
          if (status >= 400 && body.success !== false) problems.push("not an error body")
        }
        if (attack.expect.skipped && !(body.received === true && body.skipped === true))
          problems.push("webhook not skipped")
      }
      const request =
        decodeURIComponent(attack.path) +
        (attack.rawBody ?? JSON.stringify(attack.body ?? "")) +
        JSON.stringify(attack.headers ?? {})
      const leaked = secrets.filter(
        (s) => text.includes(s) && !request.includes(s) && !request.toLowerCase().includes(s.toLowerCase())
      )
      if (leaked.length > 0) problems.push(`reveals ${leaked.join(", ")}`)
      return problems.length === 0
        ? undefined
        : `${attack.method} ${attack.path} ${attack.rawBody === undefined ? JSON.stringify(attack.body ?? "") : "(webhook)"}: ${problems.join("; ")} — ${text.slice(0, 300)}`
    }

    test("every route of the OpenAPI document, called with B's key on A's objects, finds nothing and changes nothing", async () => {
      const { reads, creates } = attacksFor(a, b, managedSimulatedSecret)
      const routes = routesOf(doc)
      expect(routes.length).toBeGreaterThan(20)
      // New routes must be added to the walk.
      expect(routes.filter((r) => !(r in reads) && !(r in creates))).toEqual([])
      expect(Object.keys({ ...reads, ...creates }).filter((r) => !routes.includes(r))).toEqual([])
      for (const [route, attacks] of [...Object.entries(reads), ...Object.entries(creates)]) {
        for (const attack of attacks)
          expect(`${route}: ${matches(route, attack.method, attack.path)}`).toBe(`${route}: true`)
      }

      const secrets = secretsOf(a)
      const stateBefore = await orgState(server, a.org.id)
      const viewBefore = await apiView(server, a)
      expect(JSON.stringify(viewBefore)).toContain(a.customers[0]!.email) // the view does see A's objects

      const failures: Array<string> = []
      let sent = 0
      for (const phase of [reads, creates]) {
        for (const attacks of Object.values(phase)) {
          for (const attack of attacks) {
            const { status, text } = await send(attack)
            sent++
            const problem = judge(attack, status, text, secrets)
            if (problem !== undefined) failures.push(problem)
          }
        }
      }
      expect(failures).toEqual([])
      expect(sent).toBeGreaterThan(150)
      expect(await orgState(server, a.org.id)).toEqual(stateBefore)
      expect(await apiView(server, a)).toEqual(viewBefore)
    }, 60_000)

    test("the objects B created under A's names are B's own: A still finds only its own", async () => {
      const bCustomers = await getJson(server, b.org.apiKey, `/v1/customers${q({ search: a.customers[0]!.email })}`)
      expect(bCustomers.status).toBe(200)
      for (const c of bCustomers.body.data) expect(a.customers.map((x) => x.id)).not.toContain(c.id)
      const aCustomers = await getJson(server, a.org.apiKey, "/v1/customers?limit=100")
      expect(aCustomers.body.data.map((c: any) => c.id).sort()).toEqual(a.customers.map((c) => c.id).sort())
    })

    test("the simulated provider's hosted pages (outside the document) find A's checkout only under A", async () => {
      const before = await orgState(server, a.org.id)
      for (const org of [b.org.id, b.org.slug, a.org.slug]) {
        const path = `/simulated/checkout/${org}/${a.pendingReference}`
        const page = await server.fetch(path)
        expect({ path, status: page.status }).toEqual({ path, status: 404 })
        const done = await server.fetch(path, {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded" },
          body: "outcome=pay&card=ok"
        })
        expect({ path, status: done.status }).toEqual({ path, status: 404 })
      }
      expect(await orgState(server, a.org.id)).toEqual(before)
      // Under A's own id the page is there (it is how A's customer pays).
      expect((await server.fetch(`/simulated/checkout/${a.org.id}/${a.pendingReference}`)).status).toBe(200)
    })

    test("control: the same events on A's own route: the simulated provider's completes A's checkout, Paystack's does not", async () => {
      // Shows the webhook attacks above were effective events, refused only because of whose they were.
      const pendingStatus = async () => {
        const subs = await getJson(
          server,
          a.org.apiKey,
          `/v1/subscriptions${q({ customer: a.customers[1]!.externalId })}`
        )
        return subs.body.subscriptions.find((s: any) => s.id === a.subscriptions.pending).status
      }
      expect(await pendingStatus()).toBe("pending")
      // A's checkout was opened through the simulated provider: an event of A's own Paystack account naming it is
      // about a payment Paystack never held, and settles nothing (issue 37 item 8).
      const paystackBody = paystackEventFor(a, 9100)
      const byPaystack = await server.fetch(`/webhooks/${a.org.slug}/paystack`, {
        method: "POST",
        body: paystackBody,
        headers: { "content-type": "application/json", "x-paystack-signature": paystackSign(SECRETS.a, paystackBody) }
      })
      expect(await byPaystack.json()).toEqual({ success: true, received: true, skipped: true })
      expect(await pendingStatus()).toBe("pending")
      const simulatedBody = simulatedEventFor(a, "sim_evt_isolation_control")
      const bySimulated = await server.fetch(`/webhooks/${a.org.slug}/simulated`, {
        method: "POST",
        body: simulatedBody,
        headers: {
          "content-type": "application/json",
          [SIGNATURE_HEADER]: simulatedSign(managedSimulatedSecret, simulatedBody)
        }
      })
      expect(await bySimulated.json()).toEqual({ success: true, received: true, skipped: false })
      expect(await pendingStatus()).toBe("active")
    })
  })
}
