// The `backline` command: its command groups live in src/cli/ (one file each, listed in
// src/cli/index.ts). This entry point stays where bin/backline.js and `node src/start/cli.ts worker` find it.
await import("../cli/main.ts");
