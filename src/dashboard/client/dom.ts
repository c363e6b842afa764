// The dashboard's JSON routes, over the building blocks its pages share with the customer portal's (src/web/client/).
import { jsonApi } from "../../web/client/dom.ts"

export {
  ApiFailure,
  confirmButton,
  type FieldIssue,
  flash,
  h,
  link,
  ready,
  section,
  table
} from "../../web/client/dom.ts"
export { creditBalanceText, num, when } from "../../web/client/format.ts"
export { usageRow } from "../../web/client/usage.ts"

// Signed out (the session ended, the key was revoked): back to sign-in, unless this is sign-in's own answer.
const api = jsonApi("/dashboard", "/dashboard/api", () => {
  if (location.pathname.startsWith("/dashboard/sign-in")) return false
  location.assign("/dashboard/sign-in")
  return true
})

/** GET a dashboard route (`/overview`, `/v1/customers?…`). */
export const get = api.get

/** A change: POST with the session's CSRF token. */
export const post = api.post

/** A removal: DELETE with the session's CSRF token. */
export const del = api.del

export const customerHref = (id: string) => `/dashboard/customers/${encodeURIComponent(id)}`
