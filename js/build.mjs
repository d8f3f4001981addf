// Bundle the widget front end into ../tensprov_lab/static (shipped in the wheel, so
// installing the package needs no Node).
//
//   node build.mjs                 build into ../tensprov_lab/static and write the hash
//   node build.mjs --outdir DIR    build into DIR only (tests compare it with static/)
//
// explorer.js.sha256 holds the sha256 of the sources (js/src/** and this file), so a
// test without Node can still tell that js/src changed and the bundle was not rebuilt.
// tests/test_widget.py computes the same hash: keep both in step.
import { createHash } from "node:crypto";
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const here = dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const custom = args.indexOf("--outdir");
const outdir = custom >= 0 ? resolve(args[custom + 1]) : resolve(here, "../tensprov_lab/static");
mkdirSync(outdir, { recursive: true });

const common = { bundle: true, minify: true, legalComments: "none", logLevel: "warning" };
await esbuild.build({
  ...common,
  entryPoints: [join(here, "src/explorer.js")],
  outfile: join(outdir, "explorer.js"),
  format: "esm",
  target: "es2020",
});
await esbuild.build({
  ...common,
  entryPoints: [join(here, "src/explorer.css")],
  outfile: join(outdir, "explorer.css"),
});

/** sha256 over (relative path, NUL, bytes, NUL) of every source file, in sorted order. */
function sourceHash() {
  const files = [];
  const walk = (dir) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else files.push(path);
    }
  };
  walk(join(here, "src"));
  files.push(join(here, "build.mjs"));
  const rel = files.map((f) => relative(here, f).split("\\").join("/")).sort();
  const hash = createHash("sha256");
  for (const r of rel) {
    hash.update(r + "\0");
    hash.update(readFileSync(join(here, r)));
    hash.update("\0");
  }
  return hash.digest("hex");
}

writeFileSync(join(outdir, "explorer.js.sha256"), `${sourceHash()}\n`);
