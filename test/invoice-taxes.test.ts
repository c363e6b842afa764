import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { post, syncCatalog } from "./support/catalog.ts"
import { databases, startServer, type TestServer } from "./support/harness.ts"

const taxRates = [
  { slug: "vat-ng", name: "VAT", percentage: 7.5, country: "NG" },
  { slug: "vat-de", name: "MwSt", percentage: 19, inclusive: true, country: "DE" },
  { slug: "ny-sales", name: "NY sales tax", percentage: 4.5, country: "US", state: "NY" },
  { slug: "nyc", name: "NYC tax", percentage: 4.875, country: "US", state: "ny" }
]

const catalog = {
  features: [
    { slug: "calls", name: "API calls", type: "metered" },
    { slug: "renders", name: "Renders", type: "metered" }
  ],
  plans: [
    {
      slug: "payg",
      name: "Pay as you go",
      currency: "NGN",
      autoEnable: true,
      features: [{ slug: "calls", usageModel: "usage_based", pricePerUnit: 3.3 }]
    },
    {
      slug: "renders-jp",
      name: "Renders (JPY)",
      currency: "JPY",
      planGroup: "jp",
      autoEnable: true,
      features: [{ slug: "renders", usageModel: "usage_based", pricePerUnit: 7 }]
    }
  ],
  taxRates
}

/** Half-up (away from zero) integer division. */
const div = (x: bigint, y: bigint) => {
  const neg = x < 0n !== y < 0n
  const ax = x < 0n ? -x : x
  const ay = y < 0n ? -y : y
  const q = ax / ay + ((ax % ay) * 2n >= ay ? 1n : 0n)
  return neg ? -q : q
}
/** A percentage to ten-thousandths (4 decimals), exactly. */
const bp = (p: number) => BigInt(Math.round(p * 10_000))

/** Every number of an invoice recomputed from §16's rules, independently of the service's code. */
const recompute = (invoice: any, rates: ReadonlyArray<{ percentage: number; inclusive?: boolean; slug: string }>) => {
  let subtotal = 0n
  let discount = 0n
  let tax = 0n
  let exclusive = 0n
  const lineTaxes = invoice.lines.map((line: any) => {
    const amount = BigInt(line.amount)
    const discounts = line.discounts.reduce((s: bigint, d: any) => s + BigInt(d.amount), 0n)
    const net = amount - discounts
    subtotal += amount
    discount += discounts
    const inclusiveSum = rates.filter((r) => r.inclusive).reduce((s, r) => s + bp(r.percentage), 0n)
    return rates.map((r) => {
      const t =
        invoice.taxExemptStatus !== "none"
          ? 0n
          : r.inclusive
            ? div(net * bp(r.percentage), 1_000_000n + inclusiveSum)
            : div(net * bp(r.percentage), 1_000_000n)
      tax += t
      if (!r.inclusive) exclusive += t
      return { rate: r.slug, amount: Number(t) }
    })
  })
  return {
    lineTaxes,
    subtotal: Number(subtotal),
    discount: Number(discount),
    tax: Number(tax),
    total: Number(subtotal - discount + exclusive)
  }
}

for (const database of databases()) {
  describe(`invoice taxes on ${database.name}`, () => {
    let server: TestServer
    beforeAll(async () => {
      server = await startServer(database.config)
    })
    afterAll(() => server.close())

    const get = async (apiKey: string, path: string) => {
      const response = await server.fetch(path, { apiKey })
      return { status: response.status, body: (await response.json()) as any }
    }

    test("tax rates sync by slug: created, unchanged, updated; bad ones are 400 naming every problem", async () => {
      const { apiKey } = await server.createOrg()
      const first = (await syncCatalog(server, apiKey, catalog)) as any
      expect(first.taxRates).toEqual({
        created: ["vat-ng", "vat-de", "ny-sales", "nyc"],
        updated: [],
        unchanged: []
      })
      const second: any = await syncCatalog(server, apiKey, {
        ...catalog,
        taxRates: [
          { ...taxRates[0], percentage: 7.5 },
          { ...taxRates[1], percentage: 16 }
        ]
      })
      expect(second.taxRates).toEqual({ created: [], updated: ["vat-de"], unchanged: ["vat-ng"] })
      expect(second.warnings).toEqual(
        expect.arrayContaining([expect.stringContaining("tax rate 'ny-sales'"), expect.stringContaining("'nyc'")])
      )
      const bad = await post(server, apiKey, "/v1/sync", {
        ...catalog,
        taxRates: [
          { slug: "a", name: "A", percentage: 100.5, country: "NG" },
          { slug: "b", name: "B", percentage: 7.12345, country: "NG" },
          { slug: "c", name: "C", percentage: 5, country: "QQ" }
        ]
      })
      expect(bad.status).toBe(400)
      expect((bad.body.details as Array<{ path: string }>).map((d) => d.path).sort()).toEqual([
        "taxRates[0].percentage",
        "taxRates[1].percentage",
        "taxRates[2].country"
      ])
      const duplicate = await post(server, apiKey, "/v1/sync", {
        ...catalog,
        taxRates: [
          { slug: "vat-ng", name: "VAT", percentage: 5, country: "NG" },
          { slug: "vat-ng", name: "VAT", percentage: 6, country: "NG" }
        ]
      })
      expect(duplicate.status).toBe(400)
      expect(duplicate.body.details).toEqual([{ path: "taxRates[1].slug", message: "duplicate tax rate 'vat-ng'" }])
      // Nothing changed: vat-ng is still 7.5.
      const again: any = await syncCatalog(server, apiKey, {
        ...catalog,
        taxRates: [{ ...taxRates[0] }, { ...taxRates[1], percentage: 16 }]
      })
      expect(again.taxRates.unchanged).toEqual(["vat-ng", "vat-de"])
    })

    test("every invoice's lines, taxes and totals follow §16, in the list and in the event", async () => {
      const { apiKey } = await server.createOrg()
      await syncCatalog(server, apiKey, catalog)
      const people = [
        // exclusive 7.5%: 3.3 × 373 = 1230.9 → 1231; tax 92.325 → 92
        { id: "ada", address: { country: "NG", city: "Lagos" }, calls: 373, renders: 0, rates: [taxRates[0]!] },
        // inclusive 19%: 3.3 × 1000 = 3300 → tax 3300 × 19 / 119 = 526.89 → 527, total unchanged
        { id: "jonas", address: { country: "DE" }, calls: 1000, renders: 11, rates: [taxRates[1]!] },
        // reverse charge: the rate listed at zero, with the note
        {
          id: "firma",
          address: { country: "DE" },
          taxExempt: "reverse_charge",
          calls: 10,
          renders: 0,
          rates: [taxRates[1]!]
        },
        // two state rates on one line: 4.5% and 4.875%
        { id: "nyc", address: { country: "US", state: "NY" }, calls: 77, renders: 0, rates: taxRates.slice(2) },
        // another state: no rate
        { id: "cal", address: { country: "US", state: "CA" }, calls: 5, renders: 0, rates: [] },
        // no address: no tax
        { id: "nowhere", calls: 9, renders: 3, rates: [] }
      ]
      for (const p of people) {
        const body: Record<string, unknown> = { id: p.id, email: `${p.id}@x.test`, address: p.address }
        if (p.address === undefined) delete body.address
        if (p.taxExempt !== undefined) body.taxExempt = p.taxExempt
        expect((await post(server, apiKey, "/v1/customers", body)).status).toBe(200)
        if (p.calls > 0) await post(server, apiKey, "/v1/track", { customer: p.id, feature: "calls", value: p.calls })
        if (p.renders > 0)
          await post(server, apiKey, "/v1/track", { customer: p.id, feature: "renders", value: p.renders })
        const generated = await post(server, apiKey, "/v1/billing/invoice", { customer: p.id })
        expect(generated.status).toBe(200)
        const listed = (await get(apiKey, `/v1/billing/invoices?customer=${p.id}`)).body.invoices
        expect(listed.length).toBe(generated.body.invoices.length)
        for (const invoice of listed) {
          const expected = recompute({ ...invoice, taxExemptStatus: p.taxExempt ?? "none" }, p.rates)
          expect(invoice.lines.map((l: any) => l.taxes.map((t: any) => ({ rate: t.rate, amount: t.amount })))).toEqual(
            expected.lineTaxes
          )
          expect({
            subtotal: invoice.subtotal,
            discount: invoice.discount,
            tax: invoice.tax,
            total: invoice.total
          }).toEqual({
            subtotal: expected.subtotal,
            discount: expected.discount,
            tax: expected.tax,
            total: expected.total
          })
          expect(invoice.amountDue).toBe(invoice.total)
          if (p.taxExempt === "reverse_charge")
            expect(invoice.taxNote).toBe("Reverse charge: MwSt to be accounted for by the recipient")
          else expect(invoice.taxNote).toBeUndefined()
          const event = (
            await get(apiKey, `/v1/events?type=invoice.created&customer=${p.id}&limit=100`)
          ).body.data.find((e: any) => e.data.id === invoice.id)
          const { amountRefunded: _r, ...fromList } = invoice
          expect(event.data).toMatchObject(fromList)
        }
      }
      // The figures the rules give, spelled out for two of them.
      const ada = (await get(apiKey, "/v1/billing/invoices?customer=ada")).body.invoices[0]
      expect({ subtotal: ada.subtotal, tax: ada.tax, total: ada.total }).toEqual({
        subtotal: 1231,
        tax: 92,
        total: 1323
      })
      const jonas = (await get(apiKey, "/v1/billing/invoices?customer=jonas")).body.invoices
      const ngn = jonas.find((i: any) => i.currency === "NGN")
      const jpy = jonas.find((i: any) => i.currency === "JPY")
      expect({ subtotal: ngn.subtotal, tax: ngn.tax, total: ngn.total }).toEqual({
        subtotal: 3300,
        tax: 527,
        total: 3300
      })
      // JPY has no minor unit below the yen: 77 yen, of which 12 (12.29…) is tax.
      expect({ subtotal: jpy.subtotal, tax: jpy.tax, total: jpy.total }).toEqual({ subtotal: 77, tax: 12, total: 77 })
    })
  })
}
