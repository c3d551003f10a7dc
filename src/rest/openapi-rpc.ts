import { errorResponses, ref, scalar } from "./openapi-schemas.ts";
import type { Column, Routine, SchemaCache } from "./schema-cache.ts";

/**
 * The functions part of GET /rest/v1/'s description (openapi.ts): one path `/rpc/{name}` per
 * function the described role may execute, as PostgREST describes them (`post` always, `get` for a
 * stable or immutable one, with its arguments as query parameters), plus what PostgREST leaves out:
 * the answer's shape (a value, rows, or none) and the errors (docs/rest.md#functions-rpc).
 */

type Obj = Record<string, unknown>;

/** The JSON of one value of a PostgreSQL type: an array for `x[]`, else its scalar schema. */
function valueSchema(type: string): Obj {
  return type.endsWith("[]") ? { type: "array", items: valueSchema(type.slice(0, -2)) } : scalar(type);
}

function rowSchema(columns: Column[]): Obj {
  return {
    type: "object",
    properties: Object.fromEntries(columns.map((c) => [c.name, { ...valueSchema(c.type), nullable: true }])),
  };
}

/** The responses of rpc operations that tables do not give. */
export const RPC_RESPONSES: Obj = {
  FunctionNotFound: {
    description:
      "No function of that name, taking those argument names, that the caller may execute (PGRST202; `hint` may name a close one).",
    content: { "application/json": { schema: ref("schemas", "Error") } },
  },
  FunctionAmbiguous: {
    description:
      "Several functions fit the argument names (PGRST203), or an embed several relationships could mean (PGRST201).",
    content: { "application/json": { schema: ref("schemas", "Error") } },
  },
  ReadOnly: {
    description:
      "A GET of a function that writes: it runs in a read-only transaction (25006). Call it by POST.",
    content: { "application/json": { schema: ref("schemas", "Error") } },
  },
};

export const RPC_PARAMETERS: Obj = {
  preferRpc: {
    name: "Prefer",
    in: "header",
    required: false,
    description:
      "`count=exact`, `tx=commit|rollback`, `handling=strict|lenient`, `max-affected=n`, `params=single-object`; comma-separated. The ones honoured come back in `Preference-Applied`.",
    schema: { type: "string" },
  },
};

/** What a call of `r` answers with, as JSON. */
function answerSchema(r: Routine): Obj {
  const one =
    r.returns === "composite" ? rowSchema(r.returnColumns) : { ...valueSchema(r.returnType), nullable: true };
  return r.returnsSet ? { type: "array", items: one } : one;
}

/** The paths of the functions `role` may execute, and whether there is any (for the tag). */
export function rpcPaths(cache: SchemaCache, role: string): Obj {
  const paths: Obj = {};
  const names = [...cache.routines.keys()].sort();
  for (const name of names) {
    const overloads = (cache.routines.get(name) ?? []).filter((r) => r.executableBy.has(role));
    const first = overloads[0];
    if (!first) continue;
    const described = overloads.length === 1 ? first : undefined;
    const summary = first.description?.split("\n")[0] || `Call ${first.schema}.${name}`;
    const about = (described?.description ?? `The function ${first.schema}.${name}`).replace(/\.?\s*$/, ".");
    const sets = overloads.some((r) => r.returnsSet);
    const read = sets ? ["select", "order", "limit", "offset", "or"].map((p) => ref("parameters", p)) : [];
    const body = (r: Routine): Obj => ({
      type: "object",
      properties: Object.fromEntries(r.params.map((p) => [p.name, valueSchema(p.type)])),
      ...(r.params.some((p) => p.required)
        ? { required: r.params.filter((p) => p.required).map((p) => p.name) }
        : {}),
    });
    const answer = (rs: Routine[], method: "get" | "post"): Obj => {
      const answering = rs.filter((r) => r.returns !== "void");
      const schema =
        answering.length === 1
          ? answerSchema(answering[0] as Routine)
          : { oneOf: answering.map(answerSchema) };
      const responses: Obj = {};
      if (answering.length) {
        responses[200] = {
          description: "The function's answer: a value, a row as an object, or a set as an array.",
          headers: {
            "Content-Range": {
              description: "The rows answered, and the total when counted.",
              schema: { type: "string" },
            },
          },
          content: { "application/json": { schema } },
        };
        if (answering.some((r) => r.returnsSet)) {
          responses[206] = {
            description: "A part of a counted set: `Content-Range` says which, of how many.",
            headers: { "Content-Range": { description: "`0-24/100`.", schema: { type: "string" } } },
            content: { "application/json": { schema } },
          };
        }
      }
      if (rs.some((r) => r.returns === "void"))
        responses[204] = { description: "Done: the function returns void." };
      return {
        ...responses,
        ...errorResponses({
          404: "FunctionNotFound",
          409: "Conflict",
          300: "FunctionAmbiguous",
          ...(method === "get" ? { 405: "ReadOnly" } : {}),
        }),
      };
    };
    const path: Obj = {
      post: {
        tags: ["rpc"],
        operationId: `rpc.${name}.post`,
        summary,
        description: `${about} Arguments by name in the body; volatile functions run here only (docs/rest.md#functions-rpc).`,
        parameters: [...read, ref("parameters", "preferRpc"), ref("parameters", "contentProfile")],
        requestBody: {
          required: false,
          content: {
            "application/json": { schema: described ? body(described) : { oneOf: overloads.map(body) } },
          },
        },
        responses: answer(overloads, "post"),
      },
    };
    const readable = overloads.filter((r) => r.volatility !== "volatile");
    if (readable.length) {
      const args = new Map<string, Obj>();
      for (const r of readable) {
        for (const p of r.params) {
          if (p.name && !args.has(p.name)) {
            args.set(p.name, {
              name: p.name,
              in: "query",
              required: readable.length === 1 && p.required,
              description: `The argument ${p.name} (${p.type})${p.variadic ? ", repeated for each value" : ""}.`,
              schema: { type: "string" },
            });
          }
        }
      }
      path.get = {
        tags: ["rpc"],
        operationId: `rpc.${name}.get`,
        summary,
        description: `${about} In a read-only transaction, with its arguments in the query string.`,
        parameters: [
          ...args.values(),
          ...read,
          ...(sets ? [ref("parameters", "range")] : []),
          ref("parameters", "preferGet"),
          ref("parameters", "acceptProfile"),
        ],
        responses: answer(readable, "get"),
      };
    }
    paths[`/rpc/${name}`] = path;
  }
  return paths;
}
