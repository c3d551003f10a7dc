/**
 * A node:test reporter for compare.ts: one JSON line per finished test, its full name (the
 * `describe` blocks around it joined with " > "), `pass`, `fail` or `skip`, and the first line of
 * the failure. A `describe` finishes after its tests, so their results wait until it does and take
 * its name then.
 */
export interface TestResult {
  name: string;
  result: "pass" | "fail" | "skip";
  error?: string;
}

interface Ev {
  type: string;
  data: {
    name: string;
    nesting: number;
    skip?: unknown;
    todo?: unknown;
    details?: { type?: string; error?: { message?: string; cause?: unknown } };
  };
}

function firstLine(error: { message?: string; cause?: unknown } | undefined): string | undefined {
  const cause = error?.cause;
  const message =
    cause && typeof cause === "object" && "message" in cause ? String(cause.message) : error?.message;
  return message?.split("\n")[0]?.slice(0, 400);
}

export default async function* reporter(source: AsyncIterable<Ev>): AsyncGenerator<string> {
  // Results by nesting level, waiting for the describe that holds them.
  const waiting = new Map<number, TestResult[]>();
  for await (const ev of source) {
    if (ev.type !== "test:pass" && ev.type !== "test:fail") continue;
    const { name, nesting, details } = ev.data;
    const children = waiting.get(nesting + 1) ?? [];
    waiting.delete(nesting + 1);
    let own: TestResult[];
    if (details?.type === "suite") {
      own = children.map((c) => ({ ...c, name: `${name} > ${c.name}` }));
    } else {
      own = [
        {
          name,
          result: ev.data.skip || ev.data.todo ? "skip" : ev.type === "test:pass" ? "pass" : "fail",
          ...(ev.type === "test:fail" ? { error: firstLine(details?.error) } : {}),
        },
      ];
    }
    if (nesting === 0) {
      for (const r of own) yield `${JSON.stringify(r)}\n`;
    } else {
      waiting.set(nesting, [...(waiting.get(nesting) ?? []), ...own]);
    }
  }
}
