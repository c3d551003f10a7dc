#!/usr/bin/env node
// The `backline` command. Backline runs its TypeScript sources directly, which needs Node.js
// 22.18 or newer; `npx backline` and npm scripts use the Node.js the project installs.
const [major, minor] = process.versions.node.split(".").map(Number);
if (major < 22 || (major === 22 && minor < 18)) {
  process.stderr.write(
    `backline: Node.js 22.18 or newer is needed (this is ${process.versions.node}). ` +
      "Run it as `npx backline` inside the project, which uses the Node.js that npm install brought.\n",
  );
  process.exit(1);
}
await import("../src/start/cli.ts");
