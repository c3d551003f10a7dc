// A small jest-compatible layer over node:test, enough for storage-js's server tests.

import * as nt from "node:test";
import { isDeepStrictEqual } from "node:util";

const ASYM = Symbol("asym");
type Asym = { [ASYM]: true; match(v: unknown): boolean; toString(): string };
const asym = (match: (v: unknown) => boolean, name: string): Asym => ({
  [ASYM]: true,
  match,
  toString: () => name,
});
const isAsym = (v: unknown): v is Asym => typeof v === "object" && v !== null && ASYM in v;

function eq(a: unknown, b: unknown): boolean {
  if (isAsym(b)) return b.match(a);
  if (isAsym(a)) return a.match(b);
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => eq(x, b[i]));
  if (
    a &&
    b &&
    typeof a === "object" &&
    typeof b === "object" &&
    !(a instanceof Date) &&
    !Buffer.isBuffer(a)
  ) {
    const ka = Object.keys(a).filter((k) => (a as Record<string, unknown>)[k] !== undefined);
    const kb = Object.keys(b).filter((k) => (b as Record<string, unknown>)[k] !== undefined);
    if (ka.length !== kb.length) return false;
    return kb.every((k) => eq((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]));
  }
  return isDeepStrictEqual(a, b) || Object.is(a, b);
}

function contains(a: unknown, b: Record<string, unknown>): boolean {
  if (!a || typeof a !== "object") return false;
  return Object.entries(b).every(([k, v]) => {
    const av = (a as Record<string, unknown>)[k];
    if (v && typeof v === "object" && !isAsym(v) && !Array.isArray(v))
      return contains(av, v as Record<string, unknown>);
    return eq(av, v);
  });
}

const show = (v: unknown) => {
  try {
    return JSON.stringify(v);
  } catch {
    return String(v);
  }
};

function matchers(actual: unknown, negate: boolean) {
  const check = (ok: boolean, what: string) => {
    if (ok === negate) throw new Error(`expected ${show(actual)} ${negate ? "not " : ""}${what}`);
  };
  const calls = () => (actual as { mock?: { calls: unknown[][] } }).mock?.calls ?? [];
  return {
    toBe: (e: unknown) => check(Object.is(actual, e), `to be ${show(e)}`),
    toEqual: (e: unknown) => check(eq(actual, e), `to equal ${show(e)}`),
    toStrictEqual: (e: unknown) => check(eq(actual, e), `to equal ${show(e)}`),
    toBeNull: () => check(actual === null, "to be null"),
    toBeDefined: () => check(actual !== undefined, "to be defined"),
    toBeUndefined: () => check(actual === undefined, "to be undefined"),
    toBeTruthy: () => check(Boolean(actual), "to be truthy"),
    toBeFalsy: () => check(!actual, "to be falsy"),
    toContain: (e: unknown) =>
      check(
        typeof actual === "string"
          ? actual.includes(String(e))
          : Array.isArray(actual) && actual.some((x) => eq(x, e)),
        `to contain ${show(e)}`,
      ),
    toHaveLength: (n: number) => check((actual as { length?: number })?.length === n, `to have length ${n}`),
    toBeInstanceOf: (c: new (...a: never[]) => unknown) =>
      check(actual instanceof c, `to be instance of ${c.name}`),
    toBeGreaterThan: (n: number) => check((actual as number) > n, `to be > ${n}`),
    toBeGreaterThanOrEqual: (n: number) => check((actual as number) >= n, `to be >= ${n}`),
    toBeLessThan: (n: number) => check((actual as number) < n, `to be < ${n}`),
    toMatch: (r: RegExp | string) =>
      check(
        typeof actual === "string" && (typeof r === "string" ? actual.includes(r) : r.test(actual)),
        `to match ${r}`,
      ),
    toMatchObject: (e: Record<string, unknown>) => check(contains(actual, e), `to match ${show(e)}`),
    toHaveProperty: (k: string, v?: unknown) =>
      check(
        actual != null &&
          k in (actual as object) &&
          (v === undefined || eq((actual as Record<string, unknown>)[k], v)),
        `to have property ${k}`,
      ),
    toThrow: (e?: unknown) => {
      let threw = false;
      let err: unknown;
      try {
        (actual as () => unknown)();
      } catch (x) {
        threw = true;
        err = x;
      }
      check(threw && (e === undefined || matchesError(err, e)), `to throw ${show(e)}`);
    },
    toHaveBeenCalled: () => check(calls().length > 0, "to have been called"),
    toHaveBeenCalledTimes: (n: number) => check(calls().length === n, `to have been called ${n} times`),
    toHaveBeenCalledWith: (...args: unknown[]) =>
      check(
        calls().some((c) => eq(c, args)),
        `to have been called with ${show(args)}`,
      ),
  };
}

function matchesError(err: unknown, e: unknown): boolean {
  if (typeof e === "string") return String((err as Error)?.message).includes(e);
  if (e instanceof RegExp) return e.test(String((err as Error)?.message));
  if (typeof e === "function") return err instanceof e;
  if (e instanceof Error) return (err as Error)?.message === e.message;
  return true;
}

type M = ReturnType<typeof matchers>;
type Promised = { [K in keyof M]: (...a: Parameters<M[K]>) => Promise<void> };

function expectFn(actual: unknown) {
  const m = matchers(actual, false) as M & {
    not: M;
    rejects: Promised & { not: Promised };
    resolves: Promised & { not: Promised };
  };
  m.not = matchers(actual, true);
  const wrap = (settle: () => Promise<unknown>, negate: boolean) =>
    new Proxy({} as Promised, {
      get:
        (_t, name: string) =>
        async (...args: unknown[]) => {
          const v = await settle();
          const target =
            name === "toThrow"
              ? () => {
                  throw v;
                }
              : v;
          (matchers(target, negate) as unknown as Record<string, (...a: unknown[]) => void>)[name]?.(...args);
        },
    });
  const rejected = async () => {
    try {
      await actual;
    } catch (e) {
      return e;
    }
    throw new Error("expected the promise to reject");
  };
  m.rejects = Object.assign(wrap(rejected, false), { not: wrap(rejected, true) });
  m.resolves = Object.assign(
    wrap(async () => await actual, false),
    { not: wrap(async () => await actual, true) },
  );
  return m;
}
expectFn.any = (c: unknown) =>
  asym(
    (v) =>
      c === String
        ? typeof v === "string"
        : c === Number
          ? typeof v === "number"
          : c === Object
            ? typeof v === "object" && v !== null
            : c === Function
              ? typeof v === "function"
              : v instanceof (c as new () => unknown),
    `any(${(c as { name?: string }).name})`,
  );
expectFn.objectContaining = (o: Record<string, unknown>) =>
  asym((v) => contains(v, o), `objectContaining(${show(o)})`);
expectFn.arrayContaining = (a: unknown[]) =>
  asym((v) => Array.isArray(v) && a.every((x) => v.some((y) => eq(y, x))), "arrayContaining");
expectFn.stringContaining = (s: string) =>
  asym((v) => typeof v === "string" && v.includes(s), `stringContaining(${s})`);

type Mock = ((...a: unknown[]) => unknown) & Record<string, unknown>;
function fn(impl?: (...a: unknown[]) => unknown): Mock {
  let current = impl;
  const mock = { calls: [] as unknown[][], results: [] as unknown[] };
  const f = ((...args: unknown[]) => {
    mock.calls.push(args);
    return current?.(...args);
  }) as Mock;
  const use = (i: ((...a: unknown[]) => unknown) | undefined) => {
    current = i;
    return f;
  };
  Object.assign(f, {
    mock,
    mockImplementation: (i: (...a: unknown[]) => unknown) => use(i),
    mockResolvedValue: (v: unknown) => use(() => Promise.resolve(v)),
    mockRejectedValue: (v: unknown) => use(() => Promise.reject(v)),
    mockReturnValue: (v: unknown) => use(() => v),
    mockRestore: () => {},
    mockClear: () => {
      mock.calls.length = 0;
      return f;
    },
  });
  return f;
}
const restorers: (() => void)[] = [];
const jestObj = {
  fn,
  spyOn(obj: Record<string, unknown>, name: string) {
    const original = obj[name] as (...a: unknown[]) => unknown;
    const spy = fn(original);
    spy.mockRestore = () => {
      obj[name] = original;
    };
    obj[name] = spy;
    restorers.push(() => {
      obj[name] = original;
    });
    return spy;
  },
  restoreAllMocks() {
    for (const r of restorers.splice(0)) r();
  },
  resetAllMocks() {},
  clearAllMocks() {},
  setTimeout() {},
};

const g = globalThis as unknown as Record<string, unknown>;
g.expect = expectFn;
g.jest = jestObj;
g.describe = Object.assign((name: string, body: () => void) => nt.describe(name, body), {
  skip: nt.describe.skip,
});
g.test = Object.assign(
  (name: string, body: () => unknown) =>
    nt.test(name, async () => {
      await body();
    }),
  {
    skip: nt.test.skip,
  },
);
g.it = g.test;
g.beforeEach = nt.beforeEach;
g.afterEach = nt.afterEach;
g.beforeAll = nt.before;
g.afterAll = nt.after;
