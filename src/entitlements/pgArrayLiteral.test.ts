import { describe, expect, test } from "bun:test"
import { pgArrayLiteral } from "./hotStatements.ts"

describe("PostgreSQL array literals of a batch's columns", () => {
  test("numbers bare, texts quoted, nulls as NULL, nothing as {}", () => {
    expect(pgArrayLiteral([])).toBe("{}")
    expect(pgArrayLiteral([1, -2, 9007199254740991])).toBe("{1,-2,9007199254740991}")
    expect(pgArrayLiteral(["cus_1", "a b", "NULL", "{x,y}"])).toBe('{"cus_1","a b","NULL","{x,y}"}')
    expect(pgArrayLiteral(["a", null, 3])).toBe('{"a",NULL,3}')
    expect(pgArrayLiteral(["12345678901234567890", 5])).toBe('{"12345678901234567890",5}')
  })

  test("a quote or backslash escaped wherever it is, the other elements as they are", () => {
    expect(pgArrayLiteral(['{"k":"v"}', "plain", "back\\slash"])).toBe('{"{\\"k\\":\\"v\\"}","plain","back\\\\slash"}')
    expect(pgArrayLiteral(['"', null])).toBe('{"\\"",NULL}')
  })
})
