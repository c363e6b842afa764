// The building blocks of the service's pages (the dashboard's and the customer portal's scripts import them). Text
// reaches a page only as text nodes and attribute values set one by one: no markup is ever parsed from data
// (decisions.md §13, §17), so a customer named `<img src=x onerror=…>` is just text.

export type Child = Node | string | number | null | undefined | false | ReadonlyArray<Child>
type Props = Record<string, string | number | boolean | EventListener | undefined | null>

export const h = (tag: string, props: Props | null = null, ...children: Array<Child>): HTMLElement => {
  const el = document.createElement(tag)
  if (props !== null) {
    for (const [key, value] of Object.entries(props)) {
      if (value === undefined || value === null || value === false) continue
      if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value)
      else if (key === "class") el.className = String(value)
      else if (key === "value" && "value" in el) (el as HTMLInputElement).value = String(value)
      else el.setAttribute(key, value === true ? "" : String(value))
    }
  }
  append(el, children)
  return el
}

const append = (el: Node, children: ReadonlyArray<Child>) => {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue
    if (Array.isArray(child)) append(el, child)
    else el.appendChild(child instanceof Node ? child : document.createTextNode(String(child)))
  }
}

/** Replaces an element's content with children as `h` takes them (arrays, strings, nothing). */
export const fill = (el: Node & ParentNode, ...children: Array<Child>) => {
  el.replaceChildren()
  append(el, children)
  return el
}

export const csrf = (): string => document.querySelector<HTMLMetaElement>('meta[name="csrf-token"]')?.content ?? ""

/** One problem of a 400's error body: the field (`address.country`) and what is wrong with it. */
export interface FieldIssue {
  readonly path: string
  readonly message: string
}

export class ApiFailure extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: ReadonlyArray<FieldIssue> = []
  ) {
    super(message)
  }
}

/**
 * A page's JSON routes: `get("/overview")` reads `${api}/overview`; `post(path, body)` is a change, sent with the
 * session's CSRF token, to `${api}${path}` or, for a path under `root` (`/dashboard/sign-out`), to the path itself;
 * `del(path)` a removal. A refusal is an `ApiFailure` with the error body's code, message and field `details`.
 * A 401 calls `signedOut`, which answers whether it took the page elsewhere (then the call fails quietly).
 */
export const jsonApi = (root: string, api: string, signedOut: () => boolean) => {
  const answer = async (response: Response): Promise<any> => {
    if (response.status === 401 && signedOut()) throw new ApiFailure(401, "unauthorized", "Signed out")
    const body = await response.json().catch(() => ({}))
    if (!response.ok) {
      const details = Array.isArray(body.details)
        ? body.details.map((d: any) => ({ path: String(d?.path ?? ""), message: String(d?.message ?? "") }))
        : []
      throw new ApiFailure(
        response.status,
        String(body.code ?? "error"),
        String(body.message ?? response.statusText),
        details
      )
    }
    return body
  }
  return {
    get: (path: string): Promise<any> =>
      fetch(`${api}${path}`, { headers: { accept: "application/json" }, credentials: "same-origin" }).then(answer),
    post: (path: string, body: unknown = {}): Promise<any> =>
      fetch(path.startsWith(`${root}/`) ? path : `${api}${path}`, {
        method: "POST",
        credentials: "same-origin",
        headers: { "content-type": "application/json", accept: "application/json", "x-csrf-token": csrf() },
        body: JSON.stringify(body)
      }).then(answer),
    /** A removal: DELETE with the session's CSRF token. */
    del: (path: string): Promise<any> =>
      fetch(`${api}${path}`, {
        method: "DELETE",
        credentials: "same-origin",
        headers: { accept: "application/json", "x-csrf-token": csrf() }
      }).then(answer)
  }
}

export const table = (headers: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<Child>>, empty = "None") =>
  rows.length === 0
    ? h("p", { class: "muted" }, empty)
    : h(
        "table",
        null,
        h(
          "thead",
          null,
          h(
            "tr",
            null,
            headers.map((x) => h("th", null, x))
          )
        ),
        h(
          "tbody",
          null,
          rows.map((r) =>
            h(
              "tr",
              null,
              // Each cell names its column: a narrow screen shows rows as cards labelled from it (portal's app.css).
              r.map((c, i) => h("td", { "data-label": headers[i] ?? "" }, c))
            )
          )
        )
      )

export const section = (title: string, ...children: Array<Child>) =>
  h("section", { class: "card" }, h("h2", null, title), ...children)

export const link = (href: string, text: string) => h("a", { href }, text)

/** A button that asks once more before it acts ("Cancel" → "Confirm cancel?"). */
export const confirmButton = (label: string, action: () => Promise<void>, cls = "danger") => {
  let armed = false
  const button = h("button", { class: cls, type: "button" }, label) as HTMLButtonElement
  button.addEventListener("click", async () => {
    if (!armed) {
      armed = true
      button.textContent = `Confirm ${label.toLowerCase()}?`
      return
    }
    button.disabled = true
    try {
      await action()
    } catch (error) {
      flash((error as Error).message, true)
      button.disabled = false
      armed = false
      button.textContent = label
    }
  })
  return button
}

/** A message at the top of the page. */
export const flash = (message: string, error = false) => {
  const box = document.getElementById("flash")
  if (box === null) return
  box.textContent = message
  box.className = error ? "flash error" : "flash ok"
}

/** Marks the page interactive: what the browser tests and the benches wait for. */
export const ready = () => {
  document.body.dataset.ready = String(performance.now())
}
