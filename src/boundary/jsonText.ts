/**
 * Checks of a JSON text before anything parses it, shared by every entry that reads JSON from outside (API bodies,
 * the check/track endpoint, signed provider webhooks).
 */

/** JSON bodies nested deeper than this are refused before anything parses them (decisions.md, Hardening). */
export const MAX_JSON_DEPTH = 64

const hexAt = (text: string, at: number) => {
  const digits = text.slice(at, at + 4)
  return /^[0-9a-fA-F]{4}$/.test(digits) ? parseInt(digits, 16) : -1
}

/**
 * What makes a JSON body unacceptable before it is parsed, in one linear pass (no allocation but for `\u`
 * escapes): nesting deeper than `maxDepth` (decoding and error messages recurse on it), a U+0000 in a string
 * (PostgreSQL cannot store it, so both databases refuse it), or an unpaired surrogate escape (not Unicode, so not
 * storable as UTF-8). Undefined when none; malformed JSON is left to the parser.
 */
export const jsonTextProblem = (text: string, maxDepth: number): string | undefined => {
  let depth = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (inString) {
      if (c === 34) {
        inString = false
      } else if (c === 92) {
        if (text.charCodeAt(i + 1) !== 117) {
          i++ // \" \\ \n ...
          continue
        }
        const code = hexAt(text, i + 2)
        if (code === 0) return "A string in the request body contains U+0000"
        if (code >= 0xdc00 && code <= 0xdfff) return "A string in the request body contains an unpaired surrogate"
        if (code >= 0xd800 && code <= 0xdbff) {
          const low = text.charCodeAt(i + 6) === 92 && text.charCodeAt(i + 7) === 117 ? hexAt(text, i + 8) : -1
          if (!(low >= 0xdc00 && low <= 0xdfff)) return "A string in the request body contains an unpaired surrogate"
          i += 11
        } else {
          i += 5
        }
      }
    } else if (c === 34) {
      inString = true
    } else if (c === 123 || c === 91) {
      if (++depth > maxDepth) return `The request body is nested more than ${maxDepth} levels deep`
    } else if (c === 125 || c === 93) {
      depth--
    }
  }
  return undefined
}
