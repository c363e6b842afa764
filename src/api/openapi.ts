/**
 * decisions.md §1: unknown body fields are ignored (clients of the peer's SDK send extra ones), and the OpenAPI
 * document must not claim otherwise. Effect's JSON Schema output closes every struct with
 * `additionalProperties: false`; `openRequestBodies` drops that from every schema a request body reaches, through
 * `$ref`s too. Answers keep it: a schema only answers use still says exactly what the service sends.
 */
import { errorCodes, errorStatus } from "./errors.ts"

type Json = Record<string, unknown>

const isObject = (value: unknown): value is Json => typeof value === "object" && value !== null && !Array.isArray(value)

/** The subschemas of a JSON Schema (2020-12) node, by keyword: never the values of `properties` as names. */
const subschemas = (schema: Json): ReadonlyArray<unknown> => [
  ...["properties", "patternProperties", "$defs"].flatMap((k) => (isObject(schema[k]) ? Object.values(schema[k]) : [])),
  ...["anyOf", "oneOf", "allOf", "prefixItems"].flatMap((k) => (Array.isArray(schema[k]) ? schema[k] : [])),
  ...["items", "additionalProperties", "not", "contains", "propertyNames"].map((k) => schema[k])
]

const REF = "#/components/schemas/"

export const openRequestBodies = (spec: Record<string, any>): Record<string, any> => {
  const copy = structuredClone(spec) as {
    paths?: Record<string, Record<string, unknown>>
    components?: { schemas?: Json }
  }
  const components = copy.components?.schemas ?? {}
  const visited = new Set<unknown>()
  const open = (schema: unknown): void => {
    if (!isObject(schema) || visited.has(schema)) return
    visited.add(schema)
    if (schema.additionalProperties === false) delete schema.additionalProperties
    if (typeof schema.$ref === "string" && schema.$ref.startsWith(REF)) open(components[schema.$ref.slice(REF.length)])
    for (const sub of subschemas(schema)) open(sub)
  }
  for (const methods of Object.values(copy.paths ?? {})) {
    for (const operation of Object.values(methods)) {
      const content = isObject(operation) && isObject(operation.requestBody) ? operation.requestBody.content : undefined
      if (!isObject(content)) continue
      for (const media of Object.values(content)) if (isObject(media)) open(media.schema)
    }
  }
  return copy
}

const METHODS = ["get", "put", "post", "delete", "patch", "head", "options", "trace"]

/** Every operation of the document, with its path. */
const operationsOf = (spec: { paths?: Record<string, Record<string, unknown>> }) =>
  Object.entries(spec.paths ?? {}).flatMap(([path, methods]) =>
    Object.entries(methods)
      .filter(([method, op]) => METHODS.includes(method) && isObject(op))
      .map(([method, op]) => ({ path, method, op: op as Json }))
  )

/** Every schema a request reaches (bodies and parameters), through `$ref`s, each once. */
const requestSchemas = (spec: Record<string, any>): ReadonlyArray<Json> => {
  const components: Json = spec.components?.schemas ?? {}
  const found: Array<Json> = []
  const visited = new Set<unknown>()
  const visit = (schema: unknown): void => {
    if (!isObject(schema) || visited.has(schema)) return
    visited.add(schema)
    found.push(schema)
    if (typeof schema.$ref === "string" && schema.$ref.startsWith(REF)) visit(components[schema.$ref.slice(REF.length)])
    for (const sub of subschemas(schema)) visit(sub)
  }
  for (const { op } of operationsOf(spec)) {
    const content = isObject(op.requestBody) ? op.requestBody.content : undefined
    if (isObject(content)) for (const media of Object.values(content)) if (isObject(media)) visit(media.schema)
    for (const parameter of Array.isArray(op.parameters) ? op.parameters : []) {
      if (isObject(parameter)) visit(parameter.schema)
    }
  }
  return found
}

const show = (value: unknown) => "`" + JSON.stringify(value) + "`"

/**
 * A request field with a default is optional, and says so the way generators read it: `openapi-typescript` (by
 * default) and others make a property with a `default` required. The default moves into the description (the server
 * applies it); answers keep theirs. Query parameters' defaults, written by Effect as strings, go the same way.
 */
export const requestDefaultsInDescriptions = (spec: Record<string, any>): Record<string, any> => {
  const copy = structuredClone(spec)
  for (const schema of requestSchemas(copy)) {
    if (!("default" in schema)) continue
    const note = `Default: ${show(schema.default)}.`
    delete schema.default
    schema.description = typeof schema.description === "string" ? `${schema.description}. ${note}` : note
  }
  for (const { op } of operationsOf(copy)) {
    for (const parameter of Array.isArray(op.parameters) ? op.parameters : []) {
      if (isObject(parameter) && isObject(parameter.schema) && typeof parameter.schema.description === "string")
        parameter.description = parameter.schema.description
    }
  }
  return copy
}

/** Effect's JSON Schema titles its refinements by their constructor (`maxLength(256)`): noise in generated docs. */
const GENERATED_TITLE = /^(?:[a-zA-Z]+\(.*\)|unknown|int|finite|nonEmptyString)$/

export const dropGeneratedTitles = (spec: Record<string, any>): Record<string, any> => {
  const copy = structuredClone(spec)
  const visit = (node: unknown): void => {
    if (Array.isArray(node)) return node.forEach(visit)
    if (!isObject(node)) return
    if (typeof node.title === "string" && GENERATED_TITLE.test(node.title)) delete node.title
    if (node.$id === "/schemas/unknown") delete node.$id
    Object.values(node).forEach(visit)
  }
  visit(copy.components)
  visit(copy.paths)
  return copy
}

type Tag = keyof typeof errorStatus

/**
 * Every error answer documented as the body the service sends (decisions.md §10): `{success: false, error, code,
 * message}` (plus `details` on 400s), one component per status whose `code` is the enum of that status's codes,
 * in place of Effect's own `HttpApiDecodeError` (which the service never sends: its 400s are `BadRequest`s) and the
 * per-class components. Each operation lists the statuses it can answer: no 413 without a body, no 404 on a route
 * that names nothing (the probes), 429 on every route with a key (the rate limit comes before the handler).
 */
export const documentErrors = (spec: Record<string, any>): Record<string, any> => {
  const copy = structuredClone(spec)
  const schemas: Json = ((copy.components ??= {}).schemas ??= {})
  const byStatus = new Map<string, Tag>(
    (Object.keys(errorStatus) as Array<Tag>).map((tag) => [String(errorStatus[tag][0]), tag])
  )
  const name = (tag: Tag) => `Error${errorStatus[tag][0]}`
  for (const tag of byStatus.values()) {
    const [status, title] = errorStatus[tag]
    schemas[name(tag)] = {
      type: "object",
      description: `The body of a ${status} ${title}: \`code\` says why.`,
      required: ["success", "error", "code", "message"],
      properties: {
        success: { type: "boolean", enum: [false] },
        error: { type: "string", enum: [title] },
        code: { type: "string", enum: [...errorCodes[tag]] },
        message: { type: "string", description: "For people; may change. Branch on `code`." },
        ...(status === 400
          ? {
              details: {
                type: "array",
                description: "Every invalid field, with its path",
                items: { $ref: `${REF}ValidationIssue` }
              }
            }
          : {})
      },
      additionalProperties: false
    }
    delete schemas[`${tag}Error`]
  }
  delete schemas.HttpApiDecodeError
  const used = new Set<string>()
  for (const { op } of operationsOf(copy)) {
    const responses = (op.responses ??= {}) as Json
    const secured = Array.isArray(op.security) && op.security.some((s) => isObject(s) && Object.keys(s).length > 0)
    const hasPathParameters = Array.isArray(op.parameters) && op.parameters.some((p) => isObject(p) && p.in === "path")
    if (op.requestBody === undefined) delete responses["413"]
    if (!secured && !hasPathParameters) delete responses["404"]
    if (secured && responses["429"] === undefined) responses["429"] = {}
    for (const status of Object.keys(responses)) {
      const tag = byStatus.get(status)
      if (tag === undefined) continue
      responses[status] = {
        description: `${errorStatus[tag][1]}: ${errorCodes[tag].map((c) => `\`${c}\``).join(", ")}`,
        content: { "application/json": { schema: { $ref: `${REF}${name(tag)}` } } }
      }
      used.add(name(tag))
    }
  }
  for (const tag of byStatus.values()) if (!used.has(name(tag))) delete schemas[name(tag)]
  return copy
}

/** An operation without a description says what it needs to be called: a key, or none. */
export const describeOperations = (spec: Record<string, any>): Record<string, any> => {
  const copy = structuredClone(spec)
  for (const { op } of operationsOf(copy)) {
    if (typeof op.description === "string" && op.description !== "") continue
    const secured = Array.isArray(op.security) && op.security.some((s) => isObject(s) && Object.keys(s).length > 0)
    const summary = typeof op.summary === "string" ? `${op.summary}. ` : ""
    op.description = `${summary}${secured ? "Needs an organization's API key (`Authorization: Bearer sk_…`)." : "Needs no key."}`
  }
  return copy
}

/** Drops the component schemas nothing reaches from the paths (left behind by the transforms above). */
export const pruneComponents = (spec: Record<string, any>): Record<string, any> => {
  const copy = structuredClone(spec)
  const schemas: Json = copy.components?.schemas ?? {}
  const reached = new Set<string>()
  const visit = (node: unknown): void => {
    if (Array.isArray(node)) return node.forEach(visit)
    if (!isObject(node)) return
    if (typeof node.$ref === "string" && node.$ref.startsWith(REF)) {
      const name = node.$ref.slice(REF.length)
      if (!reached.has(name)) {
        reached.add(name)
        visit(schemas[name])
      }
    }
    Object.values(node).forEach(visit)
  }
  visit(copy.paths)
  for (const name of Object.keys(schemas)) if (!reached.has(name)) delete schemas[name]
  return copy
}

/** Every transform of the document, in order: one annotation on the API applies them to every endpoint. */
export const transformDocument = (spec: Record<string, any>): Record<string, any> =>
  pruneComponents(
    describeOperations(documentErrors(dropGeneratedTitles(requestDefaultsInDescriptions(openRequestBodies(spec)))))
  )
