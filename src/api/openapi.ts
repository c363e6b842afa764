/**
 * decisions.md §1: unknown body fields are ignored (clients of the peer's SDK send extra ones), and the OpenAPI
 * document must not claim otherwise. Effect's JSON Schema output closes every struct with
 * `additionalProperties: false`; `openRequestBodies` drops that from every schema a request body reaches, through
 * `$ref`s too. Answers keep it: a schema only answers use still says exactly what the service sends.
 */
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
