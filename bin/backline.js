#!/usr/bin/env -S node --max-semi-space-size=8
// The `backline` command. Backline runs its TypeScript sources directly, which needs Node.js
// 22.18 or newer; `npx backline` and npm scripts use the Node.js the project installs.
//
// --max-semi-space-size=8: V8 sizes its young generation from the machine's memory (3 × 64 MB on
// a 25 GB machine), and a long `royalties import` or `worker` fills it; 8 MB semi-spaces keep a
// 10-million-line import under 300 MB at the same speed (bench/README.md). The operator's own
// NODE_OPTIONS come first, so this flag wins over theirs; run `node bin/backline.js` to choose.
const [major, minor] = process.versions.node.split(".").map(Number);
if (major < 22 || (major === 22 && minor < 18)) {
  process.stderr.write(
    `backline: Node.js 22.18 or newer is needed (this is ${process.versions.node}). ` +
      "Run it as `npx backline` inside the project, which uses the Node.js that npm install brought.\n",
  );
  process.exit(1);
}
await import("../src/start/cli.ts");
