// The organization's billing profile (decisions.md §16): the seller on its invoices, read and saved through
// GET/POST /v1/billing/profile, so the page validates nothing itself: a refusal's `details` name the fields.
import { ApiFailure, flash, get, h, post, section, when } from "./dom.ts"

const ADDRESS = ["line1", "line2", "city", "postalCode", "state", "country"] as const

/** [field path as the error body names it, label, multi-line]. */
const FIELDS: ReadonlyArray<readonly [string, string, boolean?]> = [
  ["legalName", "Legal name"],
  ["email", "Billing email"],
  ["taxId", "Tax id (VAT, TIN…)"],
  ["invoicePrefix", "Invoice prefix (3–12 of A-Z, 0-9)"],
  ["address.line1", "Address line 1"],
  ["address.line2", "Address line 2"],
  ["address.city", "City"],
  ["address.postalCode", "Postal code"],
  ["address.state", "State or region"],
  ["address.country", "Country (ISO code, e.g. NG, DE)"],
  ["footer", "Invoice footer", true]
]

const fieldId = (path: string) => `profile-${path.replace(".", "-")}`

export const billingProfile = async () => {
  const profile = await get("/v1/billing/profile")
  const inputs = new Map<string, HTMLInputElement | HTMLTextAreaElement>()
  const errors = new Map<string, HTMLElement>()
  const rows = FIELDS.map(([path, label, multiLine]) => {
    const input = h(multiLine ? "textarea" : "input", {
      id: fieldId(path),
      name: path,
      autocomplete: "off",
      ...(multiLine ? { rows: 3 } : { type: "text" })
    }) as HTMLInputElement | HTMLTextAreaElement
    const error = h("span", { class: "field-error", "data-field": path, role: "alert" })
    inputs.set(path, input)
    errors.set(path, error)
    return h("label", { class: "field", for: fieldId(path) }, h("span", null, label), input, error)
  })
  const numbers = h("p", { class: "muted", id: "profile-numbers" })
  const fill = (p: any) => {
    for (const [path, input] of inputs) {
      const [head, tail] = path.split(".") as [string, string | undefined]
      const value = tail === undefined ? p[head] : p.address?.[tail]
      input.value = typeof value === "string" ? value : ""
    }
    numbers.textContent =
      `Invoices are numbered ${p.invoicePrefix}-000001, ${p.invoicePrefix}-000002, …` +
      (p.updatedAt === null ? " · never saved" : ` · last saved ${when(p.updatedAt)}`)
  }
  fill(profile)
  const general = h("p", { class: "field-error", id: "profile-error", role: "alert" })
  const form = h(
    "form",
    { class: "profile", id: "profile-form", novalidate: true },
    rows,
    h("div", null, h("button", { type: "submit" }, "Save profile")),
    general
  )
  form.addEventListener("submit", async (event) => {
    event.preventDefault()
    const value = (path: string) => inputs.get(path)!.value.trim()
    const orNull = (text: string) => (text === "" ? null : text)
    // An empty field clears it (the prefix goes back to INV); an address needs its country, the rest is optional.
    const address = ADDRESS.every((k) => value(`address.${k}`) === "")
      ? null
      : Object.fromEntries(
          ADDRESS.filter((k) => k === "country" || value(`address.${k}`) !== "").map((k) => [k, value(`address.${k}`)])
        )
    const body = {
      legalName: orNull(value("legalName")),
      email: orNull(value("email")),
      taxId: orNull(value("taxId")),
      invoicePrefix: orNull(value("invoicePrefix").toUpperCase()),
      footer: orNull(value("footer")),
      address
    }
    for (const [path, error] of errors) {
      error.textContent = ""
      inputs.get(path)!.removeAttribute("aria-invalid")
    }
    general.textContent = ""
    try {
      fill(await post("/v1/billing/profile", body))
      flash("Saved the billing profile")
    } catch (error) {
      if (error instanceof ApiFailure && error.status === 401) return
      const unplaced: Array<string> = []
      for (const issue of error instanceof ApiFailure ? error.details : []) {
        // `address` alone (the whole object) is shown by its country, the one line it requires.
        const path = issue.path === "address" ? "address.country" : issue.path
        const at = errors.get(path)
        if (at === undefined) unplaced.push(`${issue.path}: ${issue.message}`)
        else {
          at.textContent = at.textContent === "" ? issue.message : `${at.textContent}; ${issue.message}`
          inputs.get(path)!.setAttribute("aria-invalid", "true")
        }
      }
      general.textContent = unplaced.join("; ")
      flash((error as Error).message, true)
    }
  })
  document
    .getElementById("main")!
    .replaceChildren(
      h("h1", null, "Billing profile"),
      section(
        "The seller on your invoices",
        h(
          "p",
          { class: "muted" },
          "Shown on every invoice, its PDF and hosted page; the same profile as GET/POST /v1/billing/profile and ",
          h("code", null, "npm run cli -- profile get <org>"),
          "."
        ),
        numbers,
        form
      )
    )
}
