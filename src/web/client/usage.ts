// A feature's usage against its limit (the /v1/check answer): a bar, the numbers, and when it resets. The dashboard's
// customer view and the customer portal's overview show the same row.
import { h } from "./dom.ts"
import { num, when } from "./format.ts"

export interface FeatureState {
  readonly feature: {
    readonly slug: string
    readonly name: string
    readonly type: string
    readonly unit?: string | null
  }
  readonly state: any
}

export const usageRow = (b: FeatureState) => {
  const s = b.state
  const unit = b.feature.unit ? ` ${b.feature.unit}` : ""
  if (b.feature.type === "boolean") {
    return h(
      "div",
      { class: "balance", "data-feature": b.feature.slug },
      h("strong", null, b.feature.name),
      h("span", null, s.allowed ? "enabled" : "not included")
    )
  }
  const limit: number | null = s.limit
  const used: number = s.usage ?? 0
  const share = limit === null || limit <= 0 ? (limit === null ? 0 : 1) : Math.min(1, used / limit)
  const bar = h("div", { class: "bar", title: `${Math.round(share * 100)}%` }, h("div", { class: "fill" }))
  ;(bar.firstChild as HTMLElement).style.width = `${(share * 100).toFixed(1)}%`
  if (share >= 1) bar.classList.add("full")
  else if (share >= 0.8) bar.classList.add("warn")
  const credits = s.credits ? ` · credits ${num(s.credits.totalBalance)} (bonus ${num(s.credits.bonusBalance)})` : ""
  return h(
    "div",
    { class: "balance", "data-feature": b.feature.slug },
    h("strong", null, b.feature.name),
    bar,
    h(
      "span",
      { class: "numbers" },
      // The catalog's unit as given, after the numbers as a measure's unit ("1,234 / 5,000 token"): made plural it
      // would read right for "token" and wrong for "GB" or "kWh", so it is never changed.
      `Used ${num(used)}${limit === null ? `${unit} (no limit)` : ` / ${num(limit)}${unit}`} · balance ${s.balance === null ? "∞" : num(s.balance)}${credits}`
    ),
    h("span", { class: "muted" }, s.resetsAt ? `resets ${when(s.resetsAt)}` : "no reset")
  )
}
