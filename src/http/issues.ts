import type { Issue } from "../api/errors.ts"

interface RawIssue {
  readonly path: ReadonlyArray<PropertyKey>
  readonly message: string
}

/** `features[2].slug`: the path of a schema issue as a caller reads it. */
export const formatPath = (path: ReadonlyArray<PropertyKey>) =>
  path.reduce<string>((out, key) =>
    typeof key === "number" ? `${out}[${key}]` : out === "" ? String(key) : `${out}.${String(key)}`, "")

/**
 * One line per problem: an optional field's union with `undefined` adds an "Expected undefined" twin to every
 * real problem of that field, which says nothing to the caller.
 */
export const readableIssues = (issues: ReadonlyArray<RawIssue>): Array<Issue> => {
  const formatted = issues.map((issue) => ({ path: formatPath(issue.path), message: issue.message }))
  const useful = formatted.filter((issue) =>
    !issue.message.startsWith("Expected undefined,") ||
    !formatted.some((other) => other.path === issue.path && other !== issue)
  )
  return useful.filter((issue, i) =>
    useful.findIndex((other) => other.path === issue.path && other.message === issue.message) === i
  )
}
