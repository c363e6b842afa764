import { spawnSync } from "node:child_process"
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { tmpdir, userInfo } from "node:os"
import { dirname, join } from "node:path"
import { brotliDecompressSync } from "node:zlib"

/**
 * The Chromium that the devDependency `@sparticuz/chromium` carries in its own tarball (a brotli-compressed headless
 * shell, the NSS libraries it links and a font), unpacked once per machine into the temporary directory. Nothing is
 * downloaded: the package's files are all there is. The package's own unpacker is not used: it writes straight to fixed
 * names in /tmp, so two test processes starting at once could run a half-written binary; here each unpacks into its own
 * directory and renames it into place, and the loser of that rename uses the winner's.
 */
export interface PackagedChromium {
  readonly executablePath: string
  /** For the browser process: its bundled libraries first, and a font configuration that finds the bundled font. */
  readonly env: Record<string, string>
}

const require = createRequire(import.meta.url)

const packageDir = () => {
  try {
    // The package's exports list only its entry (build/cjs/index.cjs); its root is two folders up.
    return join(dirname(require.resolve("@sparticuz/chromium")), "..", "..")
  } catch {
    throw new Error(
      "No browser: neither CHROMIUM_PATH nor /usr/bin/chromium exists, and the devDependency @sparticuz/chromium " +
        "is not installed (npm install)"
    )
  }
}

const unpackTar = (archive: string, into: string) => {
  const tar = spawnSync("tar", ["-x", "-C", into], { input: brotliDecompressSync(readFileSync(archive)) })
  if (tar.status !== 0) throw new Error(`tar could not unpack ${archive}: ${tar.stderr.toString()}`)
}

const fontsConf = (dir: string) =>
  [
    `<?xml version="1.0"?>`,
    `<!DOCTYPE fontconfig SYSTEM "fonts.dtd">`,
    `<fontconfig>`,
    `  <dir>${join(dir, "fonts")}</dir>`,
    `  <dir>/usr/share/fonts</dir>`,
    `  <cachedir>${join(dir, "fonts-cache")}</cachedir>`,
    `</fontconfig>`,
    ``
  ].join("\n")

/** Unpacks into `into`, which is renamed to `final` afterwards (the font configuration names the final place). */
const unpack = (bin: string, into: string, final: string) => {
  mkdirSync(into, { recursive: true })
  writeFileSync(join(into, "chromium"), brotliDecompressSync(readFileSync(join(bin, "chromium.br"))), { mode: 0o755 })
  // al2023 holds libnss3, libnspr4 and libexpat: the only libraries the headless shell links beyond glibc, so that a
  // machine without Debian's chromium (which brings them) runs it too.
  unpackTar(join(bin, "al2023.tar.br"), into)
  unpackTar(join(bin, "fonts.tar.br"), into)
  writeFileSync(join(into, "fonts.conf"), fontsConf(final))
}

export const packagedChromium = (): PackagedChromium => {
  const root = packageDir()
  const version: string = JSON.parse(readFileSync(join(root, "package.json"), "utf8")).version
  const dir = join(tmpdir(), `billing-test-chromium-${version}-${userInfo().uid}`)
  if (!existsSync(join(dir, "chromium"))) {
    const partial = `${dir}.partial-${process.pid}-${Date.now()}`
    try {
      unpack(join(root, "bin"), partial, dir)
      renameSync(partial, dir)
    } catch (error) {
      // Another process renamed its copy into place first: use it. Anything else is a real failure.
      if (!existsSync(join(dir, "chromium"))) throw error
    } finally {
      rmSync(partial, { recursive: true, force: true })
    }
  }
  return {
    executablePath: join(dir, "chromium"),
    env: {
      LD_LIBRARY_PATH: [join(dir, "lib"), process.env.LD_LIBRARY_PATH].filter(Boolean).join(":"),
      FONTCONFIG_FILE: join(dir, "fonts.conf"),
      // Under LANG=C.UTF-8 (Debian's default in containers) this build's default locale is "en-US@posix", which its
      // own Intl rejects: every toLocaleString() throws. A browser under test speaks en-US.
      LANG: "en_US.UTF-8"
    }
  }
}
