import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { databases, startServer, type TestServer } from "../support/harness.ts"

/**
 * The dashboard's billing profile, coupons and customer discounts without a browser (decisions.md §13, §15, §16):
 * every change goes through `/v1`'s own handlers for the session's organization, needs the CSRF token and the
 * dashboard's origin, and is logged; another organization's customer is as unknown as one that does not exist.
 */
for (const database of databases()) {
  describe(`dashboard billing profile and discounts on ${database.name}`, () => {
    let server: TestServer
    let org: { id: string; apiKey: string }
    let other: { id: string; apiKey: string }
    let cookie: string
    let csrf: string
    let customerId: string
    let foreignCustomerId: string

    const v1 = async (apiKey: string, method: string, path: string, body?: unknown) => {
      const response = await server.fetch(path, {
        method,
        apiKey,
        ...(body === undefined ? {} : { body: JSON.stringify(body) })
      })
      return { status: response.status, body: (await response.json()) as any }
    }
    const change = async (
      method: "POST" | "DELETE",
      path: string,
      body?: unknown,
      headers: Record<string, string> = { origin: server.baseUrl, "x-csrf-token": csrf }
    ) => {
      const response = await server.fetch(`/dashboard/api${path}`, {
        method,
        headers: { cookie, ...headers },
        ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) })
      })
      return { status: response.status, body: (await response.json()) as any }
    }
    const read = async (path: string) => {
      const response = await server.fetch(`/dashboard/api${path}`, { headers: { cookie } })
      return { status: response.status, body: (await response.json()) as any }
    }
    const audit = () =>
      server.run(
        Effect.flatMap(SqlClient.SqlClient, (sql) =>
          sql<{ action: string; objectId: string; outcome: string }>`SELECT action, object_id, outcome
            FROM dashboard_audit WHERE organization_id = ${org.id} AND action <> 'session.sign_in'
            ORDER BY id`.pipe(Effect.orDie)
        )
      )

    beforeAll(async () => {
      server = await startServer(database.config)
      org = await server.createOrg()
      other = await server.createOrg()
      const catalog = {
        features: [{ slug: "calls", name: "Calls", type: "metered" }],
        plans: [
          {
            slug: "pro",
            name: "Pro",
            price: 500000,
            currency: "NGN",
            interval: "monthly",
            features: [{ slug: "calls", limit: 100 }]
          }
        ],
        coupons: [
          { slug: "launch", name: "Launch", percentOff: 12.5, duration: "repeating", durationInCycles: 3 },
          {
            slug: "flat",
            name: "Flat",
            amountOff: 150050,
            currency: "NGN",
            duration: "once",
            maxRedemptions: 5,
            redeemBy: "2099-01-01T00:00:00Z",
            plans: ["pro"]
          }
        ],
        promotionCodes: [
          { code: "LAUNCH10", coupon: "launch", maxRedemptions: 10, expiresAt: "2099-06-01T00:00:00Z" },
          { code: "OFF", coupon: "flat", active: false }
        ]
      }
      expect((await v1(org.apiKey, "POST", "/v1/sync", catalog)).status).toBe(200)
      const created = await v1(org.apiKey, "POST", "/v1/customers", {
        id: "buyer",
        email: "buyer@example.com",
        name: "Müller GmbH",
        address: { line1: "Hauptstraße 1", city: "Berlin", postalCode: "10115", country: "DE" },
        taxIds: [{ type: "eu_vat", value: "DE123456789" }],
        taxExempt: "reverse_charge"
      })
      expect(created.status).toBe(200)
      customerId = created.body.id
      expect((await v1(other.apiKey, "POST", "/v1/sync", catalog)).status).toBe(200)
      foreignCustomerId = (
        await v1(other.apiKey, "POST", "/v1/customers", { id: "theirs", email: "theirs@example.com" })
      ).body.id
      const signed = await server.fetch("/dashboard/sign-in", {
        method: "POST",
        headers: { origin: server.baseUrl },
        body: JSON.stringify({ key: org.apiKey })
      })
      expect(signed.status).toBe(200)
      cookie = signed.headers.get("set-cookie")!.split(";")[0]!
      const page = await (await server.fetch("/dashboard/billing-profile", { headers: { cookie } })).text()
      expect(page).toContain('data-view="billing-profile"')
      csrf = /name="csrf-token" content="([^"]+)"/.exec(page)![1]!
    })
    afterAll(() => server.close())

    test("the billing profile is saved through POST /v1/billing/profile, with the token only, and logged", async () => {
      const profile = {
        legalName: "Ọlájídé Ventures Ltd",
        email: "billing@olajide.example",
        taxId: "NG-TIN-0099",
        invoicePrefix: "OLA",
        footer: "Thank you. <b>not bold</b>",
        address: { line1: "12 Marina", city: "Lagos", country: "NG" }
      }
      // Without the token, with a wrong one, and from another origin: refused, nothing saved.
      expect((await change("POST", "/v1/billing/profile", profile, { origin: server.baseUrl })).status).toBe(403)
      const wrong = await change("POST", "/v1/billing/profile", profile, {
        origin: server.baseUrl,
        "x-csrf-token": "nope"
      })
      expect(wrong).toMatchObject({ status: 403, body: { success: false, code: "csrf_token_invalid" } })
      const crossSite = await change("POST", "/v1/billing/profile", profile, {
        origin: "https://evil.example",
        "x-csrf-token": csrf
      })
      expect(crossSite.status).toBe(403)
      expect((await v1(org.apiKey, "GET", "/v1/billing/profile")).body).toMatchObject({
        invoicePrefix: "INV",
        updatedAt: null
      })

      // A body that is not JSON: /v1's own 400, nothing saved.
      const garbled = await change("POST", "/v1/billing/profile", "{legalName: <b>")
      expect(garbled).toMatchObject({ status: 400, body: { success: false, code: "invalid_request" } })
      expect(JSON.stringify(garbled.body)).not.toMatch(/stack|SELECT|at \//)
      // Invalid fields: /v1's own 400, each field named; nothing saved.
      const invalid = await change("POST", "/v1/billing/profile", {
        ...profile,
        invoicePrefix: "ab",
        email: "not-an-email",
        address: { line1: "x", country: "QQ" }
      })
      expect(invalid.status).toBe(400)
      expect(invalid.body).toMatchObject({ success: false, code: "invalid_request" })
      const paths = (invalid.body.details as Array<{ path: string }>).map((d) => d.path).sort()
      expect(paths).toEqual(["address.country", "email", "invoicePrefix"])
      expect((await v1(org.apiKey, "GET", "/v1/billing/profile")).body.updatedAt).toBeNull()

      const saved = await change("POST", "/v1/billing/profile", profile)
      expect(saved.status).toBe(200)
      expect(saved.body).toMatchObject({ ...profile, success: true })
      const through = await v1(org.apiKey, "GET", "/v1/billing/profile")
      expect(through.body).toMatchObject(profile)
      expect((await read("/v1/billing/profile")).body).toEqual(through.body)
      // The other organization's profile is untouched.
      expect((await v1(other.apiKey, "GET", "/v1/billing/profile")).body.updatedAt).toBeNull()

      expect((await audit()).filter((r) => r.action === "billing_profile.update")).toEqual([
        { action: "billing_profile.update", objectId: org.id, outcome: "refused 400" },
        { action: "billing_profile.update", objectId: org.id, outcome: "refused 400" },
        { action: "billing_profile.update", objectId: org.id, outcome: "ok" }
      ])
    })

    test("the catalog lists coupons with their terms and promotion codes", async () => {
      const { body } = await read("/catalog")
      expect(body.coupons).toEqual([
        {
          slug: "flat",
          name: "Flat",
          percentOff: null,
          amountOff: "150050",
          currency: "NGN",
          duration: "once",
          durationInCycles: null,
          plans: ["pro"],
          redeemBy: "2099-01-01T00:00:00.000Z",
          redemptions: 0,
          maxRedemptions: 5,
          promotionCodes: [{ code: "OFF", active: false, expiresAt: null, redemptions: 0, maxRedemptions: null }]
        },
        {
          slug: "launch",
          name: "Launch",
          percentOff: "12.5",
          amountOff: null,
          currency: null,
          duration: "repeating",
          durationInCycles: 3,
          plans: null,
          redeemBy: null,
          redemptions: 0,
          maxRedemptions: null,
          promotionCodes: [
            {
              code: "LAUNCH10",
              active: true,
              expiresAt: "2099-06-01T00:00:00.000Z",
              redemptions: 0,
              maxRedemptions: 10
            }
          ]
        }
      ])
    })

    test("a customer's discount: applied and removed through /v1's handlers, refusals shown, each logged", async () => {
      expect((await read(`/customers/${customerId}/discount`)).body).toEqual({ discount: null })
      // No token: refused, nothing redeemed.
      const noToken = await change(
        "POST",
        `/v1/customers/${customerId}/discount`,
        { promotionCode: "launch10" },
        {
          origin: server.baseUrl
        }
      )
      expect(noToken.status).toBe(403)
      expect((await read(`/customers/${customerId}/discount`)).body).toEqual({ discount: null })

      // An inactive code: 422 coupon_invalid with its reason, nothing applied.
      const inactive = await change("POST", `/v1/customers/${customerId}/discount`, { promotionCode: "off" })
      expect(inactive).toMatchObject({ status: 422, body: { success: false, code: "coupon_invalid" } })
      expect(inactive.body.message).toContain("not active")
      expect((await read(`/customers/${customerId}/discount`)).body).toEqual({ discount: null })

      // A code, case-insensitively: redeemed once, shown with what is left of it.
      const applied = await change("POST", `/v1/customers/${customerId}/discount`, { promotionCode: "launch10" })
      expect(applied).toMatchObject({
        status: 200,
        body: { success: true, customer: customerId, coupon: "launch", promotionCode: "LAUNCH10", invoicesLeft: 3 }
      })
      const shown = (await read(`/customers/${customerId}/discount`)).body.discount
      expect(shown).toMatchObject({
        coupon: { slug: "launch", percentOff: "12.5", duration: "repeating", durationInCycles: 3 },
        promotionCode: "LAUNCH10",
        invoicesLeft: 3
      })
      const codes = (await read("/catalog")).body.coupons.find((c: any) => c.slug === "launch")
      expect(codes.redemptions).toBe(1)
      expect(codes.promotionCodes[0].redemptions).toBe(1)

      // Another organization's customer: 404 for every route, nothing applied there.
      const foreign = await change("POST", `/v1/customers/${foreignCustomerId}/discount`, { coupon: "launch" })
      expect(foreign).toMatchObject({ status: 404, body: { success: false, code: "customer_not_found" } })
      expect((await change("DELETE", `/v1/customers/${foreignCustomerId}/discount`)).status).toBe(404)
      expect((await read(`/customers/${foreignCustomerId}/discount`)).status).toBe(404)
      expect((await read(`/customers/%E0%A4%A/discount`)).status).toBe(404)

      // Removing: refused without the token, then done.
      expect(
        (await change("DELETE", `/v1/customers/${customerId}/discount`, undefined, { origin: server.baseUrl })).status
      ).toBe(403)
      expect((await read(`/customers/${customerId}/discount`)).body.discount).not.toBeNull()
      const removed = await change("DELETE", `/v1/customers/${customerId}/discount`)
      expect(removed).toMatchObject({ status: 200, body: { success: true, removed: true } })
      expect((await read(`/customers/${customerId}/discount`)).body).toEqual({ discount: null })

      const logged = (await audit()).filter((r) => r.action.startsWith("customer_discount."))
      expect(logged).toEqual([
        { action: "customer_discount.apply", objectId: customerId, outcome: "refused 422" },
        { action: "customer_discount.apply", objectId: customerId, outcome: "ok" },
        { action: "customer_discount.apply", objectId: foreignCustomerId, outcome: "refused 404" },
        { action: "customer_discount.remove", objectId: foreignCustomerId, outcome: "refused 404" },
        { action: "customer_discount.remove", objectId: customerId, outcome: "ok" }
      ])
    })

    test("the customer's billing details come from /v1 as stored; other methods on these routes are 404", async () => {
      const c = (await read(`/v1/customers/${customerId}`)).body
      expect(c).toMatchObject({
        address: { line1: "Hauptstraße 1", city: "Berlin", postalCode: "10115", country: "DE" },
        taxIds: [{ type: "eu_vat", value: "DE123456789" }],
        taxExempt: "reverse_charge"
      })
      // DELETE is a change only where /v1 has one: a key is not created by a DELETE.
      expect((await change("DELETE", "/keys")).status).toBe(404)
      expect((await change("DELETE", "/v1/billing/profile")).status).toBe(404)
    })
  })
}
