import { readFileSync } from "node:fs"
import { createRequire } from "node:module"
import * as fontkit from "fontkit"

/**
 * The fonts embedded in every document (docs/stack.md): Noto Sans for Latin, Greek and Cyrillic (Yoruba's Ọ and ṣ,
 * Müller's ü, ₦), Noto Sans JP for what it lacks (Han, kana: 山田). Both SIL OFL 1.1, which allows embedding;
 * PDFKit embeds only the glyphs a document uses.
 */
const require = createRequire(import.meta.url)
const file = (path: string) => readFileSync(require.resolve(path))

export interface FontFace {
  readonly name: string
  readonly data: Buffer
  readonly hasGlyph: (codePoint: number) => boolean
}

const face = (name: string, path: string): FontFace => {
  const data = file(path)
  const font = fontkit.create(data) as { hasGlyphForCodePoint: (c: number) => boolean }
  return { name, data, hasGlyph: (c) => font.hasGlyphForCodePoint(c) }
}

export interface FontSet {
  readonly regular: ReadonlyArray<FontFace>
  readonly bold: ReadonlyArray<FontFace>
}

let loaded: FontSet | undefined

/** Loaded once per process, on the first document (about 11 MB read; nothing at start-up). */
export const fonts = (): FontSet => {
  loaded ??= {
    regular: [
      face("sans", "@expo-google-fonts/noto-sans/400Regular/NotoSans_400Regular.ttf"),
      face("sans-jp", "@expo-google-fonts/noto-sans-jp/400Regular/NotoSansJP_400Regular.ttf")
    ],
    bold: [
      face("sans-bold", "@expo-google-fonts/noto-sans/700Bold/NotoSans_700Bold.ttf"),
      face("sans-jp-bold", "@expo-google-fonts/noto-sans-jp/700Bold/NotoSansJP_700Bold.ttf")
    ]
  }
  return loaded
}

export interface Run {
  readonly font: string
  readonly text: string
}

/**
 * `text` cut into runs each drawn in the first face that has all its characters' glyphs (the first face when none
 * has one: it draws its placeholder box), so a name mixing scripts renders whole.
 */
export const runsOf = (text: string, faces: ReadonlyArray<FontFace>): ReadonlyArray<Run> => {
  const runs: Array<Run> = []
  for (const ch of text) {
    const code = ch.codePointAt(0)!
    // Spaces and joiners stay in the run they are in.
    const picked =
      /\s/.test(ch) && runs.length > 0
        ? runs[runs.length - 1]!.font
        : (faces.find((f) => f.hasGlyph(code)) ?? faces[0]!).name
    const last = runs[runs.length - 1]
    if (last !== undefined && last.font === picked) runs[runs.length - 1] = { font: picked, text: last.text + ch }
    else runs.push({ font: picked, text: ch })
  }
  return runs
}
