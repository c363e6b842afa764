import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { formatMinor } from "../src/domain/majorUnits.ts"
import { post, syncCatalog } from "./support/catalog.ts"
import { pdfText } from "./support/pdf.ts"
import { databases, startServer, type TestServer } from "./support/harness.ts"

const catalog = {
  features: [{ slug: "calls", name: "API calls", type: "metered" }],
  plans: [
    {
      slug: "payg",
      name: "Pay as you go",
      currency: "NGN",
      autoEnable: true,
      features: [{ slug: "calls", usageModel: "usage_based", pricePerUnit: 3.3 }]
    }
  ],
  taxRates: [
    { slug: "vat-ng", name: "VAT", percentage: 7.5, country: "NG" },
    { slug: "vat-de", name: "MwSt", percentage: 19, inclusive: true, country: "DE" }
  ]
}

/** Every number of an invoice as its document must show it. */
const figures = (invoice: any): Array<string> => {
  const money = (n: number) => formatMinor(n, invoice.currency)
  return [
    invoice.number,
    money(invoice.subtotal),
    money(invoice.total),
    money(invoice.amountPaid),
    money(invoice.amountDue),
    ...invoice.lines.flatMap((l: any) => [
      money(l.amount),
      money(l.unitPrice),
      ...l.taxes.map((t: any) => money(t.amount)),
      ...l.discounts.map((d: any) => money(-d.amount))
    ])
  ]
}

for (const database of databases()) {
  describe(`invoice documents on ${database.name}`, () => {
    let server: TestServer
    beforeAll(async () => {
      server = await startServer(database.config)
    })
    afterAll(() => server.close())

    const setup = async () => {
      const { apiKey } = await server.createOrg()
      await syncCatalog(server, apiKey, catalog)
      await post(server, apiKey, "/v1/billing/profile", {
        legalName: "Ọlájídé Ventures Ltd",
        address: { line1: "12 Marina", city: "Lagos", country: "NG" },
        email: "billing@olajide.example",
        taxId: "NG-TIN-0012345",
        invoicePrefix: "OLA",
        footer: "Thank you. Payment within 14 days."
      })
      return apiKey
    }

    const invoiceFor = async (apiKey: string, body: Record<string, unknown>, calls: number) => {
      expect((await post(server, apiKey, "/v1/customers", body)).status).toBe(200)
      await post(server, apiKey, "/v1/track", { customer: body.id, feature: "calls", value: calls })
      const generated = await post(server, apiKey, "/v1/billing/invoice", { customer: body.id })
      expect(generated.status).toBe(200)
      const list = await server.fetch(`/v1/billing/invoices?customer=${body.id}`, { apiKey })
      return ((await list.json()) as any).invoices[0]
    }

    test("the PDF: seller, buyer and tax ids, every number as the API has it, the footer; any name renders", async () => {
      const apiKey = await setup()
      const invoice = await invoiceFor(
        apiKey,
        {
          id: "mueller",
          email: "einkauf@mueller.example",
          name: "Müller 山田 GmbH",
          address: { line1: "Hauptstraße 1", city: "Berlin", postalCode: "10115", country: "NG" },
          taxIds: [{ type: "ng_tin", value: "TIN-998877" }]
        },
        373
      )
      const response = await server.fetch(`/v1/billing/invoices/${invoice.id}/pdf`, { apiKey })
      expect(response.status).toBe(200)
      expect(response.headers.get("content-type")).toBe("application/pdf")
      const pdf = new Uint8Array(await response.arrayBuffer())
      expect(new TextDecoder().decode(pdf.slice(0, 5))).toBe("%PDF-")
      const text = await pdfText(pdf)
      for (const expected of [
        "Ọlájídé Ventures Ltd",
        "NG-TIN-0012345",
        "Müller 山田 GmbH",
        "Hauptstraße 1",
        "NG TIN: TIN-998877",
        "Thank you. Payment within 14 days.",
        "VAT 7.5%",
        ...figures(invoice)
      ]) {
        expect({ expected, found: text.includes(expected) }).toEqual({ expected, found: true })
      }
      // 1231 NGN subtotal, 92 tax, 1323 total, nothing paid.
      expect(figures(invoice).slice(1, 5)).toEqual(["12.31 NGN", "13.23 NGN", "0.00 NGN", "13.23 NGN"])
      // The fonts are embedded (as subsets), not referenced.
      expect(new TextDecoder("latin1").decode(pdf)).toContain("/FontFile2")
      expect(pdf.length).toBeLessThan(200_000)
    })

    test("the hosted page: no key, the same numbers, CSP, a PDF link, and a Pay button that collects", async () => {
      const apiKey = await setup()
      const invoice = await invoiceFor(
        apiKey,
        { id: "ada", email: "ada@x.test", name: "<script>alert(1)</script> Ọlájídé", address: { country: "NG" } },
        373
      )
      expect(invoice.hostedUrl).toMatch(/^http:\/\/localhost\/i\/org_[^/]+\/inv_[^/]+\/[A-Za-z0-9_-]{32}$/)
      const path = new URL(invoice.hostedUrl).pathname
      const page = await server.fetch(path)
      expect(page.status).toBe(200)
      expect(page.headers.get("content-type")).toContain("text/html")
      const csp = page.headers.get("content-security-policy")!
      expect(csp).toContain("default-src 'none'")
      expect(csp).toContain("frame-ancestors 'none'")
      expect(csp).not.toMatch(/https?:/)
      const html = await page.text()
      for (const expected of figures(invoice))
        expect({ expected, found: html.includes(expected) }).toEqual({ expected, found: true })
      expect(html).not.toContain("<script>")
      expect(html).toContain("&lt;script&gt;alert(1)&lt;/script&gt; Ọlájídé")
      expect(html).toContain(`action="${path}/pay"`)
      expect(html).toContain(`href="${path}/pdf"`)

      const pdf = await server.fetch(`${path}/pdf`)
      expect(pdf.status).toBe(200)
      expect(pdf.headers.get("content-type")).toBe("application/pdf")
      const text = await pdfText(new Uint8Array(await pdf.arrayBuffer()))
      for (const expected of figures(invoice)) expect(text).toContain(expected)

      // A wrong token, or the token of another invoice, is an unknown invoice.
      const tampered = path.slice(0, -1) + (path.endsWith("A") ? "B" : "A")
      expect((await server.fetch(tampered)).status).toBe(404)
      expect((await server.fetch(`${tampered}/pdf`)).status).toBe(404)
      expect((await server.fetch(`${tampered}/pay`, { method: "POST" })).status).toBe(404)
      const other = await invoiceFor(apiKey, { id: "bo", email: "bo@x.test" }, 2)
      const otherToken = new URL(other.hostedUrl).pathname.split("/").pop()
      expect((await server.fetch(path.replace(/[^/]+$/, otherToken!))).status).toBe(404)

      // Pay: no saved method, so the provider's checkout (the sandbox's simulated one), which returns here.
      const pay = await server.fetch(`${path}/pay`, { method: "POST", redirect: "manual" })
      expect(pay.status).toBe(303)
      const checkout = new URL(pay.headers.get("location")!)
      expect(checkout.pathname).toMatch(/^\/simulated\/checkout\//)
      const done = await server.fetch(checkout.pathname, { method: "POST", redirect: "manual" })
      expect(done.status).toBe(303)
      expect(new URL(done.headers.get("location")!).pathname).toBe(path)
      const paid = (await (await server.fetch(`/v1/billing/invoices?customer=ada`, { apiKey })).json()) as any
      expect(paid.invoices[0]).toMatchObject({ status: "paid", amountPaid: invoice.total, amountDue: 0 })
      const after = await (await server.fetch(path)).text()
      expect(after).not.toContain(`action="${path}/pay"`)
      expect(after).toContain(formatMinor(invoice.total, "NGN"))
      const paidText = await pdfText(new Uint8Array(await (await server.fetch(`${path}/pdf`)).arrayBuffer()))
      for (const expected of figures(paid.invoices[0])) expect(paidText).toContain(expected)
      expect(paidText).toContain("Paid on")
    })

    test("letters the font draws as a base and a mark (Yoruba ṣ ẹ ọ) are extracted as themselves, as is a plain s", async () => {
      const apiKey = await setup()
      // NFD input too: a vendor's system may send "s" + U+0323; the document shows (and extracts) the letter.
      const name = "Olúwaṣeun Adéọlá Ẹniọlá s"
      const invoice = await invoiceFor(apiKey, { id: "seun", email: "s@x.test", name: name.normalize("NFD") }, 7)
      const text = await pdfText(
        new Uint8Array(await (await server.fetch(`/v1/billing/invoices/${invoice.id}/pdf`, { apiKey })).arrayBuffer())
      )
      expect(text).toContain(name)
      // The seller's plain "s" letters stay plain (one glyph is never read back as another letter).
      expect(text).toContain("Thank you. Payment within 14 days.")
    })

    test("inclusive and exclusive taxes on one invoice: each, and the invoice's tax (their sum), on PDF and page", async () => {
      const apiKey = await setup()
      await syncCatalog(server, apiKey, {
        ...catalog,
        taxRates: [...catalog.taxRates, { slug: "levy-de", name: "Levy", percentage: 2, country: "DE" }]
      })
      const invoice = await invoiceFor(apiKey, { id: "de", email: "de@x.test", address: { country: "DE" } }, 1000)
      // 3300: 19% carved out (527) and 2% on top (66); tax 593, total 3366.
      expect([invoice.subtotal, invoice.tax, invoice.total]).toEqual([3300, 593, 3366])
      const text = await pdfText(
        new Uint8Array(await (await server.fetch(`/v1/billing/invoices/${invoice.id}/pdf`, { apiKey })).arrayBuffer())
      )
      const html = await (await server.fetch(new URL(invoice.hostedUrl).pathname)).text()
      for (const expected of [...figures(invoice), formatMinor(invoice.tax, "NGN"), "Total tax"]) {
        expect({ expected, pdf: text.includes(expected), page: html.includes(expected) }).toEqual({
          expected,
          pdf: true,
          page: true
        })
      }
    })

    test("another organization's invoice and an unknown one: 404", async () => {
      const apiKey = await setup()
      const invoice = await invoiceFor(apiKey, { id: "a", email: "a@x.test" }, 5)
      const other = await server.createOrg()
      expect((await server.fetch(`/v1/billing/invoices/${invoice.id}/pdf`, { apiKey: other.apiKey })).status).toBe(404)
      const unknown = await server.fetch(`/v1/billing/invoices/inv_nope/pdf`, { apiKey })
      expect(unknown.status).toBe(404)
      expect(((await unknown.json()) as any).code).toBe("invoice_not_found")
      expect((await server.fetch(`/v1/billing/invoices/${invoice.id}/pdf`)).status).toBe(401)
    })
  })
}
