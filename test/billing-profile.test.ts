import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { post } from "./support/catalog.ts"
import { runCli } from "./support/cli.ts"
import { databases, startServer, type TestServer, uniqueSlug } from "./support/harness.ts"

/** decisions.md §16: the seller (the organization's billing profile) and the buyer (a customer's billing details). */
for (const database of databases()) {
  describe(`billing profile and customer billing details on ${database.name}`, () => {
    let server: TestServer
    beforeAll(async () => {
      server = await startServer(database.config)
    })
    afterAll(() => server.close())

    const get = async (apiKey: string, path: string) => {
      const response = await server.fetch(path, { apiKey })
      return { status: response.status, body: (await response.json()) as any }
    }

    test("a new organization's profile has only the default prefix; a partial update keeps the rest", async () => {
      const { apiKey } = await server.createOrg()
      expect(await get(apiKey, "/v1/billing/profile")).toEqual({
        status: 200,
        body: { success: true, invoicePrefix: "INV", updatedAt: null }
      })
      const set = await post(server, apiKey, "/v1/billing/profile", {
        legalName: "Ọlájídé Ventures Ltd",
        address: { line1: "12 Marina", city: "Lagos", state: "Lagos", country: "ng" },
        email: "billing@olajide.example",
        taxId: "NG-TIN-0012345",
        invoicePrefix: "OLA2026",
        footer: "Thank you for your business."
      })
      expect(set.status).toBe(200)
      expect(set.body).toMatchObject({
        legalName: "Ọlájídé Ventures Ltd",
        address: { line1: "12 Marina", city: "Lagos", state: "Lagos", country: "NG" },
        invoicePrefix: "OLA2026",
        footer: "Thank you for your business."
      })
      expect(typeof set.body.updatedAt).toBe("number")
      const partial = await post(server, apiKey, "/v1/billing/profile", { footer: null, taxId: "NG-TIN-999" })
      expect(partial.body).toMatchObject({ legalName: "Ọlájídé Ventures Ltd", taxId: "NG-TIN-999" })
      expect(partial.body.footer).toBeUndefined()
      expect((await get(apiKey, "/v1/billing/profile")).body).toEqual(partial.body)
      // null puts the default prefix back.
      expect((await post(server, apiKey, "/v1/billing/profile", { invoicePrefix: null })).body.invoicePrefix).toBe(
        "INV"
      )
    })

    test("invalid fields: 400 naming each, nothing changed", async () => {
      const { apiKey } = await server.createOrg()
      await post(server, apiKey, "/v1/billing/profile", { legalName: "Müller GmbH", invoicePrefix: "MUE" })
      const before = (await get(apiKey, "/v1/billing/profile")).body
      const bad = await post(server, apiKey, "/v1/billing/profile", {
        legalName: "Other",
        invoicePrefix: "ab-1",
        address: { country: "XX" },
        email: "not-an-email"
      })
      expect(bad.status).toBe(400)
      expect(bad.body.code).toBe("invalid_request")
      const paths = (bad.body.details as Array<{ path: string }>).map((d) => d.path).sort()
      expect(paths).toEqual(["address.country", "email", "invoicePrefix"])
      for (const prefix of ["AB", "ABCDEFGHIJKLM", "inv"]) {
        expect((await post(server, apiKey, "/v1/billing/profile", { invoicePrefix: prefix })).status).toBe(400)
      }
      expect((await get(apiKey, "/v1/billing/profile")).body).toEqual(before)
    })

    test("profiles are per organization", async () => {
      const a = await server.createOrg()
      const b = await server.createOrg()
      await post(server, a.apiKey, "/v1/billing/profile", { legalName: "A Ltd", invoicePrefix: "AAA" })
      expect((await get(b.apiKey, "/v1/billing/profile")).body).toEqual({
        success: true,
        invoicePrefix: "INV",
        updatedAt: null
      })
    })

    test("customer billing details: set on create, replaced field by field on update, on get and in the event", async () => {
      const { apiKey } = await server.createOrg()
      const created = await post(server, apiKey, "/v1/customers", {
        id: "yamada",
        email: "yamada@example.jp",
        name: "山田 太郎",
        address: { line1: "1-2-3 Shibuya", city: "Tokyo", postalCode: "150-0002", country: "JP" },
        taxIds: [{ type: "jp_cn", value: "1234567890123" }],
        taxExempt: "reverse_charge"
      })
      expect(created.status).toBe(200)
      expect(created.body).toMatchObject({
        address: { line1: "1-2-3 Shibuya", city: "Tokyo", postalCode: "150-0002", country: "JP" },
        taxIds: [{ type: "jp_cn", value: "1234567890123" }],
        taxExempt: "reverse_charge"
      })
      const events = await get(apiKey, "/v1/events?type=customer.created")
      expect(events.body.data[0].data).toMatchObject({ taxExempt: "reverse_charge", address: { country: "JP" } })

      // Only the tax status changes; the address and ids stay.
      const updated = await post(server, apiKey, "/v1/customers", {
        id: "yamada",
        email: "yamada@example.jp",
        taxExempt: "none"
      })
      expect(updated.body).toMatchObject({ taxExempt: "none", taxIds: [{ type: "jp_cn", value: "1234567890123" }] })
      expect(updated.body.address.country).toBe("JP")
      const cleared = await post(server, apiKey, "/v1/customers", {
        id: "yamada",
        email: "yamada@example.jp",
        address: null
      })
      expect(cleared.body.address).toBeUndefined()
      expect((await get(apiKey, "/v1/customers/yamada")).body).toMatchObject({
        taxExempt: "none",
        taxIds: [{ value: "1234567890123" }]
      })

      // A customer without details: no address, no ids, `none`.
      const plain = await post(server, apiKey, "/v1/customers", { id: "plain", email: "plain@example.com" })
      expect(plain.body).toMatchObject({ taxIds: [], taxExempt: "none" })
      expect(plain.body.address).toBeUndefined()

      const bad = await post(server, apiKey, "/v1/customers", {
        id: "bad",
        email: "bad@example.com",
        taxExempt: "sometimes",
        taxIds: [{ type: "", value: "x" }],
        address: { city: "Nowhere" }
      })
      expect(bad.status).toBe(400)
      expect((bad.body.details as Array<{ path: string }>).map((d) => d.path).sort()).toEqual([
        "address.country",
        "taxExempt",
        "taxIds[0].type"
      ])
      expect((await get(apiKey, "/v1/customers/bad")).status).toBe(404)
    })
  })
}

describe("billing profile through the CLI", () => {
  let dir: string
  let env: Record<string, string | undefined>
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "cli-profile-"))
    env = { DATA_DIR: join(dir, "data"), APP_ENV: "sandbox", ENCRYPTION_KEY: "0".repeat(64) }
  })
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  test("profile set and get: the same rules and answers as the API", async () => {
    const org = uniqueSlug("prof")
    expect((await runCli(env, "org", "create", org, "--json")).code).toBe(0)
    const set = await runCli(
      env,
      "profile",
      "set",
      org,
      "--legal-name",
      "Müller GmbH",
      "--invoice-prefix",
      "MUELLER",
      "--line1",
      "Hauptstraße 1",
      "--city",
      "Berlin",
      "--postal-code",
      "10115",
      "--country",
      "de",
      "--json"
    )
    expect(set.code).toBe(0)
    expect(JSON.parse(set.stdout)).toMatchObject({
      legalName: "Müller GmbH",
      invoicePrefix: "MUELLER",
      address: { line1: "Hauptstraße 1", city: "Berlin", postalCode: "10115", country: "DE" }
    })
    const shown = await runCli(env, "profile", "get", org)
    expect(shown.code).toBe(0)
    expect(shown.stdout).toContain("Müller GmbH")
    expect(shown.stdout).toContain("MUELLER")
    const bad = await runCli(env, "profile", "set", org, "--invoice-prefix", "x", "--json")
    expect(bad.code).toBe(1)
    expect(JSON.parse(bad.stderr)).toMatchObject({ code: "invalid_request", details: [{ path: "--invoice-prefix" }] })
    expect(JSON.parse((await runCli(env, "profile", "get", org, "--json")).stdout).invoicePrefix).toBe("MUELLER")
    expect((await runCli(env, "profile", "set", org)).code).toBe(2)
  })
})
