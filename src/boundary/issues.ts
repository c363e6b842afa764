import type { Issue } from "../api/errors.ts"

interface RawIssue {
  readonly path: ReadonlyArray<PropertyKey>
  readonly message: string
}

/** `features[2].slug`: the path of a schema issue as a caller reads it. */
export const formatPath = (path: ReadonlyArray<PropertyKey>) =>
  path.reduce<string>(
    (out, key) => (typeof key === "number" ? `${out}[${key}]` : out === "" ? String(key) : `${out}.${String(key)}`),
    ""
  )

/** The other member of a union with `undefined` (an optional field) or `null` (a nullable one). */
const isUnionTwin = (message: string) =>
  message.startsWith("Expected undefined,") || message.startsWith("Expected null,")

/**
 * One line per problem: an optional field's union with `undefined`, and a nullable one's with `null`, add an
 * "Expected undefined" / "Expected null" twin to every real problem of that field, which says nothing to the caller
 * (a limit of 1e308 is "must be at most 1000000000000", not also "Expected null"; an address whose country is wrong
 * is that, not also "Expected null" for the address).
 */
export const readableIssues = (issues: ReadonlyArray<RawIssue>): Array<Issue> => {
  const formatted = issues.map((issue) => ({ path: formatPath(issue.path), message: issue.message }))
  const useful = formatted.filter(
    (issue) =>
      !isUnionTwin(issue.message) ||
      !formatted.some(
        (other) =>
          other !== issue &&
          !isUnionTwin(other.message) &&
          // The field itself, or one inside it (a nullable object whose own field is wrong).
          (other.path === issue.path ||
            other.path.startsWith(`${issue.path}.`) ||
            other.path.startsWith(`${issue.path}[`))
      )
  )
  return useful.filter(
    (issue, i) => useful.findIndex((other) => other.path === issue.path && other.message === issue.message) === i
  )
}

/** A request the schema refused, as its 400 says it: one message naming every field, and the fields as details. */
export const invalidRequest = (raw: ReadonlyArray<RawIssue>): { message: string; details: Array<Issue> } => {
  const details = readableIssues(raw)
  const message =
    details.length === 0
      ? "The request is invalid"
      : `The request is invalid: ${details.map((i) => (i.path === "" ? i.message : `${i.path}: ${i.message}`)).join("; ")}`
  return { message, details }
}
