// Coupons, promotion codes and a customer's billing details and discount (decisions.md §15, §16), as text only.
import { ApiFailure, confirmButton, del, flash, get, h, num, post, section, table, when } from "./dom.ts"
import { money } from "./format.ts"

/** "12.5% off" or "5,000.00 NGN off" (the amount in major units, §13). */
export const couponOff = (c: any): string =>
  c.percentOff !== null ? `${c.percentOff}% off` : `${money(c.amountOff, c.currency)} off`

const duration = (c: any): string =>
  c.duration === "repeating" ? `repeating, ${num(c.durationInCycles)} invoices` : String(c.duration)

const plans = (c: any): string => (c.plans === null ? "all plans" : c.plans.join(", ") || "no plan")

/** "3 / 10", or "3 / unlimited" without a limit. */
const redemptions = (x: any): string =>
  `${num(x.redemptions)} / ${x.maxRedemptions === null ? "unlimited" : num(x.maxRedemptions)}`

/** The catalog view's coupons, then every promotion code with the coupon it redeems. */
export const couponsSection = (coupons: ReadonlyArray<any>) =>
  section(
    "Coupons",
    h(
      "div",
      { id: "coupons" },
      table(
        ["Name", "Slug", "Off", "Duration", "Plans", "Redeem by", "Redemptions"],
        coupons.map((c) => [
          c.name,
          h("code", null, c.slug),
          couponOff(c),
          duration(c),
          plans(c),
          when(c.redeemBy),
          redemptions(c)
        ]),
        "No coupons (coupons in POST /v1/sync)"
      )
    ),
    h("h3", null, "Promotion codes"),
    h(
      "div",
      { id: "promotion-codes" },
      table(
        ["Code", "Coupon", "Active", "Expires", "Redemptions"],
        coupons.flatMap((c) =>
          c.promotionCodes.map((p: any) => [
            h("code", null, p.code),
            c.slug,
            p.active ? "yes" : "no",
            when(p.expiresAt),
            redemptions(p)
          ])
        ),
        "No promotion codes"
      )
    )
  )

const regionNames = new Intl.DisplayNames(["en"], { type: "region", fallback: "code" })

const TAX_STATUS: Record<string, string> = {
  none: "taxable (rates of its country and state)",
  exempt: "exempt: taxed at zero",
  reverse_charge: "reverse charge: taxed at zero, the recipient accounts for it"
}

/** The customer as the buyer on its invoices: address, tax ids, tax status. */
export const billingDetailsSection = (c: any) => {
  const a = c.address
  const address =
    a === undefined
      ? "—"
      : [a.line1, a.line2, [a.postalCode, a.city].filter(Boolean).join(" "), a.state, regionNames.of(a.country)]
          .filter((part) => typeof part === "string" && part !== "")
          .join(", ")
  return section(
    "Billing details",
    h(
      "dl",
      { class: "facts" },
      h("dt", null, "Address"),
      h("dd", { id: "billing-address" }, address),
      h("dt", null, "Tax ids"),
      h("dd", { id: "tax-ids" }, (c.taxIds ?? []).map((t: any) => `${t.type} ${t.value}`).join("; ") || "—"),
      h("dt", null, "Tax status"),
      h("dd", { id: "tax-status" }, TAX_STATUS[c.taxExempt] ?? String(c.taxExempt ?? "—"))
    ),
    h("p", { class: "muted" }, "Set through POST /v1/customers (address, taxIds, taxExempt).")
  )
}

/** "forever", "1 invoice left", "2 of 3 invoices left". */
const left = (d: any): string => {
  if (d.invoicesLeft === null) return "forever"
  const of = d.coupon.duration === "repeating" ? ` of ${num(d.coupon.durationInCycles)}` : ""
  return `${num(d.invoicesLeft)}${of} invoice${d.invoicesLeft === 1 && of === "" ? "" : "s"} left`
}

/**
 * The customer's current discount with remove, and a form applying a coupon or a promotion code: both through
 * POST/DELETE /v1/customers/{id}/discount; a refusal (422 `coupon_invalid`) shows its reason under the form.
 */
export const discountSection = (customerId: string, initial: any) => {
  const path = `/customers/${encodeURIComponent(customerId)}/discount`
  const current = h("div", { id: "discount" })
  const show = (d: any) =>
    current.replaceChildren(
      d === null
        ? h("p", { class: "muted", id: "discount-none" }, "No discount")
        : h(
            "p",
            null,
            h("strong", { id: "discount-coupon" }, `${d.coupon.name} (${d.coupon.slug})`),
            h(
              "span",
              { id: "discount-terms" },
              ` · ${couponOff(d.coupon)} · ${d.coupon.plans === null ? "all plans" : `on ${plans(d.coupon)}`} · ${left(d)}` +
                (d.promotionCode === null ? "" : ` · promotion code ${d.promotionCode}`)
            ),
            " ",
            confirmButton("Remove discount", async () => {
              await del(`/v1${path}`)
              flash(`Removed the discount ${d.coupon.slug}`)
              show((await get(path)).discount)
            })
          )
    )
  show(initial)
  const kind = h(
    "select",
    { id: "discount-kind", "aria-label": "Apply by" },
    h("option", { value: "promotionCode" }, "Promotion code"),
    h("option", { value: "coupon" }, "Coupon (slug)")
  ) as HTMLSelectElement
  const code = h("input", { id: "discount-code", required: true, "aria-label": "Code", placeholder: "Code" })
  const refused = h("p", { class: "field-error", id: "discount-error", role: "alert" })
  const form = h(
    "form",
    { class: "inline", id: "discount-form" },
    kind,
    code,
    h("button", { type: "submit" }, "Apply discount")
  )
  form.addEventListener("submit", async (event) => {
    event.preventDefault()
    const input = code as HTMLInputElement
    refused.textContent = ""
    try {
      const applied = await post(`/v1${path}`, { [kind.value]: input.value.trim() })
      flash(`Applied ${applied.coupon}${applied.promotionCode ? ` (${applied.promotionCode})` : ""}`)
      input.value = ""
      show((await get(path)).discount)
    } catch (error) {
      if (error instanceof ApiFailure && error.status === 401) return
      refused.textContent = (error as Error).message
      flash((error as Error).message, true)
    }
  })
  return section(
    "Discount",
    current,
    h("p", { class: "muted" }, "Taken off every later invoice while it lasts; applying another replaces it."),
    form,
    refused
  )
}
