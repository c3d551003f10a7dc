import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { createClient, type SupabaseClient } from "@supabase/supabase-js";
import type {
  Condition,
  EmbedItem,
  FieldItem,
  FieldRef,
  Filter,
  FilterOp,
  JsonStep,
  LogicTree,
  OrderTerm,
  ParsedQuery,
  SelectItem,
} from "./ast.ts";
import { ParseError } from "./ast.ts";
import { parseQuery } from "./parse-query.ts";

// ---- builders for expected values ----

function fld(name: string, ...jsonPath: JsonStep[]): FieldRef {
  return { name, jsonPath };
}
const arrow = (key: string | number): JsonStep => ({ op: "->", key });
const arrow2 = (key: string | number): JsonStep => ({ op: "->>", key });

function filter(
  field: FieldRef | string,
  op: FilterOp,
  value: string | string[],
  extra: Partial<Filter> = {},
): Filter {
  return {
    kind: "filter",
    field: typeof field === "string" ? fld(field) : field,
    negated: false,
    op,
    quantifier: undefined,
    language: undefined,
    value,
    ...extra,
  };
}
const not = (f: Filter): Filter => ({ ...f, negated: true });
const or = (...children: Condition[]): LogicTree => ({ kind: "or", negated: false, children });
const and = (...children: Condition[]): LogicTree => ({ kind: "and", negated: false, children });
const negate = (t: LogicTree): LogicTree => ({ ...t, negated: true });

function col(name: string | FieldRef, extra: Partial<FieldItem> = {}): FieldItem {
  return {
    kind: "field",
    field: typeof name === "string" ? fld(name) : name,
    alias: undefined,
    cast: undefined,
    ...extra,
  };
}
const star: SelectItem = { kind: "star" };
function embed(relation: string, select: SelectItem[], extra: Partial<EmbedItem> = {}): EmbedItem {
  return {
    kind: "embed",
    relation,
    alias: undefined,
    hint: undefined,
    inner: false,
    spread: false,
    select,
    ...extra,
  };
}
function term(field: FieldRef | string, direction?: "asc" | "desc", nulls?: "first" | "last"): OrderTerm {
  return { field: typeof field === "string" ? fld(field) : field, direction, nulls };
}

const empty: ParsedQuery = {
  select: undefined,
  conditions: [],
  order: [],
  limits: [],
  columns: undefined,
  onConflict: undefined,
};

function q(query: string): ParsedQuery {
  return parseQuery([...new URLSearchParams(query)]);
}
function one(key: string, value: string): ParsedQuery {
  return parseQuery([[key, value]]);
}
function condition(key: string, value: string): Condition {
  const parsed = one(key, value);
  assert.equal(parsed.conditions.length, 1);
  return (parsed.conditions[0] as { condition: Condition }).condition;
}

/** Runs `fn` and returns the ParseError it must throw. */
function parseError(fn: () => unknown): ParseError {
  try {
    fn();
  } catch (e) {
    assert.ok(e instanceof ParseError, `expected a ParseError, got ${String(e)}`);
    return e;
  }
  assert.fail("expected a ParseError");
}

// ---- filters ----

describe("filters", () => {
  const cases: [string, string, string, Filter][] = [
    ["eq", "id", "eq.5", filter("id", "eq", "5")],
    ["eq with dots in the value", "title", "eq.a.b.c", filter("title", "eq", "a.b.c")],
    ["eq keeps quotes raw outside logic trees", "title", 'eq."a,b"', filter("title", "eq", '"a,b"')],
    ["eq empty value", "title", "eq.", filter("title", "eq", "")],
    ["eq unicode", "title", "eq.Björk 🎵", filter("title", "eq", "Björk 🎵")],
    ["neq", "status", "neq.draft", filter("status", "neq", "draft")],
    ["gt", "duration", "gt.100", filter("duration", "gt", "100")],
    ["gte", "duration", "gte.100", filter("duration", "gte", "100")],
    ["lt", "duration", "lt.100", filter("duration", "lt", "100")],
    ["lte", "duration", "lte.100", filter("duration", "lte", "100")],
    ["like keeps *", "title", "like.*love*", filter("title", "like", "*love*")],
    ["ilike", "title", "ilike.%Love_", filter("title", "ilike", "%Love_")],
    ["match", "isrc", "match.^US[A-Z]{3}", filter("isrc", "match", "^US[A-Z]{3}")],
    ["imatch", "isrc", "imatch.^us", filter("isrc", "imatch", "^us")],
    ["in", "id", "in.(1,2,3)", filter("id", "in", ["1", "2", "3"])],
    [
      "in with quoted items",
      "t",
      'in.(a,"b,c","d\\"e","f\\\\g")',
      filter("t", "in", ["a", "b,c", 'd"e', "f\\g"]),
    ],
    ["in keeps item spaces", "t", "in.( a , b )", filter("t", "in", ["a ", " b "])],
    ["in empty list", "id", "in.()", filter("id", "in", [])],
    ["in one empty string", "id", 'in.("")', filter("id", "in", [""])],
    ["in empty items", "id", "in.(,)", filter("id", "in", ["", ""])],
    ["in with parens in quotes", "t", 'in.("a(b)",c)', filter("t", "in", ["a(b)", "c"])],
    ["in unclosed quote stays raw (PostgREST)", "t", 'in.("abc)', filter("t", "in", ['"abc'])],
    ["not.in", "id", "not.in.(1,2)", not(filter("id", "in", ["1", "2"]))],
    ["is null", "bio", "is.null", filter("bio", "is", "null")],
    ["is NULL case-insensitive", "bio", "is.NULL", filter("bio", "is", "null")],
    ["is not_null", "bio", "is.not_null", filter("bio", "is", "not_null")],
    ["is true", "read", "is.TRUE", filter("read", "is", "true")],
    ["is false", "read", "is.false", filter("read", "is", "false")],
    ["is unknown", "read", "is.Unknown", filter("read", "is", "unknown")],
    ["not.is.null", "bio", "not.is.null", not(filter("bio", "is", "null"))],
    ["isdistinct", "status", "isdistinct.draft", filter("status", "isdistinct", "draft")],
    ["cs array", "tags", "cs.{a,b}", filter("tags", "cs", "{a,b}")],
    ["cs json", "data", 'cs.{"a":1}', filter("data", "cs", '{"a":1}')],
    ["cs json array", "data", 'cs.["a"]', filter("data", "cs", '["a"]')],
    ["cd", "tags", "cd.{a,b}", filter("tags", "cd", "{a,b}")],
    ["ov array", "tags", "ov.{1,2}", filter("tags", "ov", "{1,2}")],
    ["ov range", "during", "ov.[1,10)", filter("during", "ov", "[1,10)")],
    ["ov parenthesised", "during", "ov.(1,2)", filter("during", "ov", "(1,2)")],
    ["sl", "r", "sl.(1,10)", filter("r", "sl", "(1,10)")],
    ["sr", "r", "sr.[1,10]", filter("r", "sr", "[1,10]")],
    ["nxl", "r", "nxl.[1,10)", filter("r", "nxl", "[1,10)")],
    ["nxr", "r", "nxr.[1,10)", filter("r", "nxr", "[1,10)")],
    ["adj", "r", "adj.[1,10)", filter("r", "adj", "[1,10)")],
    ["fts", "body", "fts.love", filter("body", "fts", "love")],
    [
      "fts with language",
      "body",
      "fts(english).love & hate",
      filter("body", "fts", "love & hate", { language: "english" }),
    ],
    ["plfts", "body", "plfts.a b", filter("body", "plfts", "a b")],
    [
      "phfts with language",
      "body",
      "phfts(french).a b",
      filter("body", "phfts", "a b", { language: "french" }),
    ],
    ["wfts", "body", 'wfts."a" -b', filter("body", "wfts", '"a" -b')],
    ["not.fts", "body", "not.fts(simple).x", not(filter("body", "fts", "x", { language: "simple" }))],
    ["not.eq", "id", "not.eq.5", not(filter("id", "eq", "5"))],
    ["eq(any)", "id", "eq(any).{1,2}", filter("id", "eq", ["1", "2"], { quantifier: "any" })],
    ["neq(all)", "id", "neq(all).{1,2}", filter("id", "neq", ["1", "2"], { quantifier: "all" })],
    ["gt(any) with a paren list", "n", "gt(any).(1,2)", filter("n", "gt", ["1", "2"], { quantifier: "any" })],
    ["like(all)", "title", "like(all).{a*,*b}", filter("title", "like", ["a*", "*b"], { quantifier: "all" })],
    ["ilike(any)", "title", "ilike(any).{a*}", filter("title", "ilike", ["a*"], { quantifier: "any" })],
    [
      "quantified array literal rules",
      "t",
      'eq(any).{ a b , "c,}d" ,e\\,f,"NULL",\\ x\\  ,nul\\l}',
      filter("t", "eq", ["a b", "c,}d", "e,f", "NULL", " x ", "null"], { quantifier: "any" }),
    ],
    ["quantified empty", "t", "eq(any).{}", filter("t", "eq", [], { quantifier: "any" })],
    [
      "not with quantifier",
      "t",
      "not.match(any).{^a,^b}",
      not(filter("t", "match", ["^a", "^b"], { quantifier: "any" })),
    ],
    ["imatch(all)", "t", "imatch(all).{a}", filter("t", "imatch", ["a"], { quantifier: "all" })],
    ["lte(any)", "t", "lte(any).{1}", filter("t", "lte", ["1"], { quantifier: "any" })],
    ["json path ->>", "data->a->>b", "eq.x", filter(fld("data", arrow("a"), arrow2("b")), "eq", "x")],
    ["json path index", "tags->0", "eq.x", filter(fld("tags", arrow(0)), "eq", "x")],
    ["json path negative index", "tags->>-1", "eq.x", filter(fld("tags", arrow2(-1)), "eq", "x")],
    ["json quoted key stays a string", 'data->"0"', "eq.x", filter(fld("data", arrow("0")), "eq", "x")],
    ["json key with symbols", "data->a b!@#$", "eq.x", filter(fld("data", arrow("a b!@#$")), "eq", "x")],
    ["json key with a dash", "data->a-b", "eq.x", filter(fld("data", arrow("a-b")), "eq", "x")],
    ["camelCase column", "streamingA_id", "eq.x", filter("streamingA_id", "eq", "x")],
    ["quoted column", '"my.col"', "eq.x", filter("my.col", "eq", "x")],
    ["column with dashes and spaces", "first name-x", "eq.x", filter("first name-x", "eq", "x")],
    ["unicode column", "título", "eq.x", filter("título", "eq", "x")],
  ];
  for (const [name, key, value, expected] of cases) {
    test(name, () => {
      assert.deepEqual(one(key, value).conditions, [{ path: [], condition: expected }]);
    });
  }

  test("embed paths: the last segment is the field", () => {
    assert.deepEqual(one("tracks.title", "eq.x").conditions, [
      { path: ["tracks"], condition: filter("title", "eq", "x") },
    ]);
    assert.deepEqual(one("tracks.credits.data->a", "eq.x").conditions, [
      { path: ["tracks", "credits"], condition: filter(fld("data", arrow("a")), "eq", "x") },
    ]);
  });

  test("repeated keys give one filter each, in order", () => {
    assert.deepEqual(q("id=gt.1&id=lt.9").conditions, [
      { path: [], condition: filter("id", "gt", "1") },
      { path: [], condition: filter("id", "lt", "9") },
    ]);
  });

  test("keys named like reserved words are filters elsewhere", () => {
    assert.deepEqual(q("tracks.select=eq.1&limit->a=eq.2&select_x=eq.3").conditions, [
      { path: ["tracks"], condition: filter("select", "eq", "1") },
      { path: [], condition: filter(fld("limit", arrow("a")), "eq", "2") },
      { path: [], condition: filter("select_x", "eq", "3") },
    ]);
  });
});

// ---- logic trees ----

describe("logic trees", () => {
  const cases: [string, string, string, LogicTree][] = [
    ["or", "or", "(a.eq.1,b.gt.2)", or(filter("a", "eq", "1"), filter("b", "gt", "2"))],
    ["and", "and", "(a.eq.1,b.gt.2)", and(filter("a", "eq", "1"), filter("b", "gt", "2"))],
    ["not.or", "not.or", "(a.eq.1)", negate(or(filter("a", "eq", "1")))],
    ["not.and", "not.and", "(a.eq.1)", negate(and(filter("a", "eq", "1")))],
    [
      "nested and / or / not.and",
      "or",
      "(a.eq.1,and(b.eq.2,or(c.eq.3,not.and(d.eq.4,e.eq.5))))",
      or(
        filter("a", "eq", "1"),
        and(
          filter("b", "eq", "2"),
          or(filter("c", "eq", "3"), negate(and(filter("d", "eq", "4"), filter("e", "eq", "5")))),
        ),
      ),
    ],
    [
      "negated filters",
      "or",
      "(a.not.eq.1,b.not.is.null)",
      or(not(filter("a", "eq", "1")), not(filter("b", "is", "null"))),
    ],
    [
      "in lists with commas",
      "or",
      '(id.in.(1,2,"3,4"),b.eq.x)',
      or(filter("id", "in", ["1", "2", "3,4"]), filter("b", "eq", "x")),
    ],
    ["not.in", "or", "(id.not.in.(1,2))", or(not(filter("id", "in", ["1", "2"])))],
    [
      "quoted values",
      "or",
      '(name.eq."a,b",name.eq."c\\"d)")',
      or(filter("name", "eq", "a,b"), filter("name", "eq", 'c"d)')),
    ],
    ["quoted value not closing stays raw", "or", '(name.eq."a"b)', or(filter("name", "eq", '"a"b'))],
    ["values with dots", "or", "(a.eq.1.5,b.eq.x.y)", or(filter("a", "eq", "1.5"), filter("b", "eq", "x.y"))],
    ["empty value", "or", "(a.eq.,b.eq.)", or(filter("a", "eq", ""), filter("b", "eq", ""))],
    [
      "pg arrays keep their commas",
      "or",
      "(tags.cs.{a,b},tags.ov.{c})",
      or(filter("tags", "cs", "{a,b}"), filter("tags", "ov", "{c}")),
    ],
    ["quoted ranges", "or", '(r.ov."[1,10)")', or(filter("r", "ov", "[1,10)"))],
    [
      "json paths",
      "or",
      "(data->>a.eq.x,tags->0.eq.y)",
      or(filter(fld("data", arrow2("a")), "eq", "x"), filter(fld("tags", arrow(0)), "eq", "y")),
    ],
    [
      "fts with language",
      "or",
      "(body.fts(english).w,body.wfts.x)",
      or(filter("body", "fts", "w", { language: "english" }), filter("body", "wfts", "x")),
    ],
    [
      "quantifiers",
      "or",
      "(t.like(any).{a*,b*},t.eq(all).(x,y))",
      or(
        filter("t", "like", ["a*", "b*"], { quantifier: "any" }),
        filter("t", "eq", ["x", "y"], { quantifier: "all" }),
      ),
    ],
    ["is values", "and", "(a.is.NULL,b.is.true)", and(filter("a", "is", "null"), filter("b", "is", "true"))],
    [
      "whitespace around items",
      "or",
      "( a.eq.1 , and ( b.eq.2 ) ) ",
      or(filter("a", "eq", "1 "), and(filter("b", "eq", "2 "))),
    ],
    [
      "columns named and / or / not",
      "or",
      "(and.eq.1,or.eq.2,not.eq.3)",
      or(filter("and", "eq", "1"), filter("or", "eq", "2"), filter("not", "eq", "3")),
    ],
    ["unicode", "or", "(title.eq.Sigur Rós ✨)", or(filter("title", "eq", "Sigur Rós ✨"))],
  ];
  for (const [name, key, value, expected] of cases) {
    test(name, () => {
      assert.deepEqual(one(key, value).conditions, [{ path: [], condition: expected }]);
    });
  }

  test("with an embed path the tree applies there", () => {
    assert.deepEqual(q("tracks.or=(title.eq.a,duration.gt.9)&tracks.credits.not.and=(a.eq.1)").conditions, [
      { path: ["tracks"], condition: or(filter("title", "eq", "a"), filter("duration", "gt", "9")) },
      { path: ["tracks", "credits"], condition: negate(and(filter("a", "eq", "1"))) },
    ]);
  });

  test("depth 32 is allowed", () => {
    const value = `(${"and(".repeat(31)}a.eq.1${")".repeat(31)})`;
    let tree = condition("or", value);
    for (let depth = 1; depth < 32; depth++) tree = (tree as LogicTree).children[0] as Condition;
    assert.deepEqual(tree, and(filter("a", "eq", "1")));
  });
});

// ---- select ----

describe("select", () => {
  const cases: [string, string, SelectItem[]][] = [
    ["star", "*", [star]],
    ["columns", "id,title", [col("id"), col("title")]],
    ["empty", "", []],
    ["alias", "name:title", [col("title", { alias: "name" })]],
    ["cast", "duration::text", [col("duration", { cast: "text" })]],
    ["cast with spaces", "t::timestamp with time zone", [col("t", { cast: "timestamp with time zone" })]],
    ["alias and cast", "d:duration::int", [col("duration", { alias: "d", cast: "int" })]],
    ["json path", "data->a->>b", [col(fld("data", arrow("a"), arrow2("b")))]],
    [
      "json path with alias and cast",
      "x:data->0::int",
      [col(fld("data", arrow(0)), { alias: "x", cast: "int" })],
    ],
    ["embed", "tracks(*)", [embed("tracks", [star])]],
    [
      "embed with columns",
      "title,tracks(id,title)",
      [col("title"), embed("tracks", [col("id"), col("title")])],
    ],
    [
      "embed with alias",
      "artist:artist_profiles(name)",
      [embed("artist_profiles", [col("name")], { alias: "artist" })],
    ],
    [
      "hint (constraint)",
      "artist_profiles!releases_artist_id_fkey(name)",
      [embed("artist_profiles", [col("name")], { hint: "releases_artist_id_fkey" })],
    ],
    [
      "hint (column)",
      "artist_profiles!artist_id(*)",
      [embed("artist_profiles", [star], { hint: "artist_id" })],
    ],
    ["inner", "tracks!inner(*)", [embed("tracks", [star], { inner: true })]],
    ["hint and inner", "rel!hint!inner(id)", [embed("rel", [col("id")], { hint: "hint", inner: true })]],
    [
      "inner and hint",
      "a:rel!inner!hint(id)",
      [embed("rel", [col("id")], { alias: "a", hint: "hint", inner: true })],
    ],
    ["left", "rel!left(id)", [embed("rel", [col("id")])]],
    [
      "hints starting like join types",
      "rel!inner_fk(id),x!leftover(id)",
      [embed("rel", [col("id")], { hint: "inner_fk" }), embed("x", [col("id")], { hint: "leftover" })],
    ],
    ["empty embed", "title,tracks!inner()", [col("title"), embed("tracks", [], { inner: true })]],
    [
      "spread",
      "title,...artist_profiles(name)",
      [col("title"), embed("artist_profiles", [col("name")], { spread: true })],
    ],
    [
      "spread with hint and inner",
      "...artist_profiles!artist_id!inner(name)",
      [embed("artist_profiles", [col("name")], { spread: true, hint: "artist_id", inner: true })],
    ],
    [
      "nested embeds",
      "*,tracks(id,credits(*,people!inner(name)))",
      [
        star,
        embed("tracks", [
          col("id"),
          embed("credits", [star, embed("people", [col("name")], { inner: true })]),
        ]),
      ],
    ],
    [
      "whitespace around items",
      " id , tracks ( * ) ,\ttitle ",
      [col("id"), embed("tracks", [star]), col("title")],
    ],
    ["quoted names", '"streamingA_id","a,b":"c d"', [col("streamingA_id"), col("c d", { alias: "a,b" })]],
    [
      "camelCase is case-sensitive",
      "streamingA_id,streamingb_id",
      [col("streamingA_id"), col("streamingb_id")],
    ],
    ["quoted names with escapes", '"a\\"b"', [col('a"b')]],
    ["unicode names", "título,曲(名)", [col("título"), embed("曲", [col("名")])]],
  ];
  for (const [name, value, expected] of cases) {
    test(name, () => {
      assert.deepEqual(one("select", value).select, expected);
    });
  }

  test("undefined when absent, the first one counts when repeated", () => {
    assert.equal(q("id=eq.1").select, undefined);
    assert.deepEqual(q("select=id&select=((((").select, [col("id")]);
  });

  test("depth 32 is allowed", () => {
    const value = `${"a(".repeat(32)}*${")".repeat(32)}`;
    let item = (one("select", value).select as SelectItem[])[0] as EmbedItem;
    for (let depth = 1; depth < 32; depth++) item = item.select[0] as EmbedItem;
    assert.deepEqual(item, embed("a", [star]));
  });
});

// ---- order, limit, offset, columns, on_conflict ----

describe("order", () => {
  const cases: [string, string, OrderTerm[]][] = [
    ["one column", "title", [term("title")]],
    ["asc", "title.asc", [term("title", "asc")]],
    ["desc nullslast", "title.desc.nullslast,id", [term("title", "desc", "last"), term("id")]],
    ["nulls without direction", "title.nullsfirst", [term("title", undefined, "first")]],
    [
      "json paths",
      "data->a.desc,tags->0.asc,data->>b",
      [
        term(fld("data", arrow("a")), "desc"),
        term(fld("tags", arrow(0)), "asc"),
        term(fld("data", arrow2("b"))),
      ],
    ],
    [
      "several terms with spaces",
      "a.asc , b.desc.nullsfirst",
      [term("a", "asc"), term("b", "desc", "first")],
    ],
    ["quoted column", '"streamingA_id".desc', [term("streamingA_id", "desc")]],
  ];
  for (const [name, value, expected] of cases) {
    test(name, () => {
      assert.deepEqual(one("order", value).order, [{ path: [], terms: expected }]);
    });
  }

  test("at embed paths; the first order for a path counts", () => {
    assert.deepEqual(q("order=id&tracks.order=title.desc&tracks.credits.order=a&order=title").order, [
      { path: [], terms: [term("id")] },
      { path: ["tracks"], terms: [term("title", "desc")] },
      { path: ["tracks", "credits"], terms: [term("a")] },
    ]);
  });
});

describe("limit and offset", () => {
  test("root and embed paths, merged per path", () => {
    assert.deepEqual(q("limit=10&offset=20&tracks.limit=0&tracks.credits.offset=5").limits, [
      { path: [], limit: 10, offset: 20 },
      { path: ["tracks"], limit: 0, offset: undefined },
      { path: ["tracks", "credits"], limit: undefined, offset: 5 },
    ]);
  });

  test("the last one given wins", () => {
    assert.deepEqual(q("limit=10&limit=3").limits, [{ path: [], limit: 3, offset: undefined }]);
  });

  for (const bad of ["", "-1", "1.5", "abc", " 1", "1 ", "0x10", "1e3", "+1", "9007199254740993", "１"]) {
    test(`refuses ${JSON.stringify(bad)}`, () => {
      for (const key of ["limit", "offset", "tracks.limit"]) {
        const e = parseError(() => one(key, bad));
        assert.equal(e.code, "PGRST100");
        assert.match(e.message, /^"failed to parse (limit|offset) parameter \(/);
      }
    });
  }
});

describe("columns and on_conflict", () => {
  const cases: [string, string, string[]][] = [
    ["plain", "title,artist_id", ["title", "artist_id"]],
    [
      "quoted, as postgrest-js sends them",
      '"title","streamingA_id","artist_id"',
      ["title", "streamingA_id", "artist_id"],
    ],
    ["spaces", " release_id , isrc ", ["release_id", "isrc"]],
    ["duplicates dropped", "a,b,a", ["a", "b"]],
  ];
  for (const [name, value, expected] of cases) {
    test(name, () => {
      assert.deepEqual(one("columns", value).columns, expected);
      assert.deepEqual(one("on_conflict", value).onConflict, expected);
    });
  }
  test("on_conflict=id", () => {
    assert.deepEqual(q("on_conflict=id"), { ...empty, onConflict: ["id"] });
  });
});

// ---- the whole query ----

describe("parseQuery", () => {
  test("nothing gives the empty query", () => {
    assert.deepEqual(parseQuery([]), empty);
  });

  test("apikey is ignored", () => {
    assert.deepEqual(q("apikey=not.a.filter&id=eq.1").conditions, [
      { path: [], condition: filter("id", "eq", "1") },
    ]);
  });

  test("a full request", () => {
    assert.deepEqual(
      q(
        "select=id,title,artist:artist_profiles(name),tracks(title)&status=eq.submitted&or=(title.ilike.*x*,release_date.gte.2024-01-01)" +
          "&tracks.order=title.asc&tracks.limit=2&order=release_date.desc.nullslast&limit=10&offset=0",
      ),
      {
        select: [
          col("id"),
          col("title"),
          embed("artist_profiles", [col("name")], { alias: "artist" }),
          embed("tracks", [col("title")]),
        ],
        conditions: [
          { path: [], condition: filter("status", "eq", "submitted") },
          {
            path: [],
            condition: or(filter("title", "ilike", "*x*"), filter("release_date", "gte", "2024-01-01")),
          },
        ],
        order: [
          { path: ["tracks"], terms: [term("title", "asc")] },
          { path: [], terms: [term("release_date", "desc", "last")] },
        ],
        limits: [
          { path: ["tracks"], limit: 2, offset: undefined },
          { path: [], limit: 10, offset: 0 },
        ],
        columns: undefined,
        onConflict: undefined,
      },
    );
  });
});

// ---- what @supabase/postgrest-js sends ----

describe("what supabase-js sends", () => {
  /** The query string supabase-js sends for a request, captured at its fetch. */
  async function sent(build: (db: SupabaseClient) => PromiseLike<unknown>): Promise<[string, string][]> {
    let url = "";
    const db = createClient("http://backline.test", "anon-key", {
      auth: { persistSession: false, autoRefreshToken: false },
      global: {
        fetch: async (input) => {
          url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
          return new Response("[]", { headers: { "content-type": "application/json" } });
        },
      },
    });
    await build(db);
    return [...new URL(url).searchParams];
  }

  test("filters of every kind", async () => {
    const entries = await sent((db) =>
      db
        .from("releases")
        .select('id, title, artist:artist_profiles!artist_id ( name, "streamingA_id" ), tracks!inner(*)')
        .eq("status", "draft")
        .neq("title", "a,b (c)")
        .gt("release_date", "2024-01-01")
        .in("id", ["a", "b,c", "d(e)", 'f"g'])
        .notIn("id", [1, 2])
        .is("bio", null)
        .isDistinct("status", "draft")
        .like("title", "*x*")
        .likeAllOf("title", ["a*", "b*"])
        .ilikeAnyOf("title", ["a*", "b*"])
        .contains("tags", ["a", "b"])
        .contains("data", { a: 1 })
        .containedBy("tags", "{a}")
        .overlaps("tags", ["x"])
        .rangeGt("during", "[1,10)")
        .textSearch("body", "'a' & 'b'", { config: "english", type: "websearch" })
        .not("bio", "is", null)
        .or("title.eq.x,and(id.eq.1,status.neq.draft)")
        .or("title.eq.y", { referencedTable: "tracks" })
        .filter("data->>a", "eq", "v")
        .match({ "tracks.title": "t" })
        .order("title", { ascending: false, nullsFirst: false })
        .order("id")
        .order("title", { referencedTable: "tracks" })
        .limit(2, { referencedTable: "tracks" })
        .range(10, 19),
    );
    const parsed = parseQuery(entries);
    assert.deepEqual(parsed.select, [
      col("id"),
      col("title"),
      embed("artist_profiles", [col("name"), col("streamingA_id")], { alias: "artist", hint: "artist_id" }),
      embed("tracks", [star], { inner: true }),
    ]);
    assert.deepEqual(parsed.conditions, [
      { path: [], condition: filter("status", "eq", "draft") },
      { path: [], condition: filter("title", "neq", "a,b (c)") },
      { path: [], condition: filter("release_date", "gt", "2024-01-01") },
      { path: [], condition: filter("id", "in", ["a", "b,c", "d(e)", 'f"g']) },
      { path: [], condition: not(filter("id", "in", ["1", "2"])) },
      { path: [], condition: filter("bio", "is", "null") },
      { path: [], condition: filter("status", "isdistinct", "draft") },
      { path: [], condition: filter("title", "like", "*x*") },
      { path: [], condition: filter("title", "like", ["a*", "b*"], { quantifier: "all" }) },
      { path: [], condition: filter("title", "ilike", ["a*", "b*"], { quantifier: "any" }) },
      { path: [], condition: filter("tags", "cs", "{a,b}") },
      { path: [], condition: filter("data", "cs", '{"a":1}') },
      { path: [], condition: filter("tags", "cd", "{a}") },
      { path: [], condition: filter("tags", "ov", "{x}") },
      { path: [], condition: filter("during", "sr", "[1,10)") },
      { path: [], condition: filter("body", "wfts", "'a' & 'b'", { language: "english" }) },
      { path: [], condition: not(filter("bio", "is", "null")) },
      {
        path: [],
        condition: or(
          filter("title", "eq", "x"),
          and(filter("id", "eq", "1"), filter("status", "neq", "draft")),
        ),
      },
      { path: ["tracks"], condition: or(filter("title", "eq", "y")) },
      { path: [], condition: filter(fld("data", arrow2("a")), "eq", "v") },
      { path: ["tracks"], condition: filter("title", "eq", "t") },
    ]);
    assert.deepEqual(parsed.order, [
      { path: [], terms: [term("title", "desc", "last"), term("id", "asc")] },
      { path: ["tracks"], terms: [term("title", "asc")] },
    ]);
    assert.deepEqual(parsed.limits, [
      { path: ["tracks"], limit: 2, offset: undefined },
      { path: [], limit: 10, offset: 10 },
    ]);
  });

  test("insert and upsert", async () => {
    const insert = parseQuery(
      await sent((db) =>
        db
          .from("artist_profiles")
          .insert([{ name: "a", streamingA_id: "x" }, { bio: "b" }])
          .select(),
      ),
    );
    assert.deepEqual(insert.columns, ["name", "streamingA_id", "bio"]);
    assert.deepEqual(insert.select, [star]);
    const upsert = parseQuery(
      await sent((db) =>
        db.from("tracks").upsert([{ release_id: "r", isrc: "i" }], { onConflict: "release_id, isrc" }),
      ),
    );
    assert.deepEqual(upsert.onConflict, ["release_id", "isrc"]);
    assert.deepEqual(upsert.columns, ["release_id", "isrc"]);
  });
});

// ---- errors ----

describe("errors", () => {
  /** [case, key, value, message prefix, details pattern] */
  const cases: [string, string, string, string, RegExp][] = [
    [
      "missing dot",
      "id",
      "eq5",
      '"failed to parse filter (eq5)" (line 1, column 3)',
      /^unexpected "5" expecting "\(" or delimiter/,
    ],
    [
      "unknown operator",
      "id",
      "noop.0",
      '"failed to parse filter (noop.0)" (line 1, column 1)',
      /^unexpected "noop" expecting "not" or operator/,
    ],
    ["no operator", "id", "5", '"failed to parse filter (5)"', /^unexpected "5" at index 0/],
    ["empty filter", "id", "", '"failed to parse filter ()"', /^unexpected end of input at index 0/],
    ["uppercase operator", "id", "EQ.1", '"failed to parse filter (EQ.1)"', /unexpected "EQ"/],
    [
      "double not",
      "id",
      "not.not.eq.1",
      '"failed to parse filter (not.not.eq.1)"',
      /unexpected "not" at index 4/,
    ],
    [
      "bad is value",
      "bio",
      "is.nothing",
      '"failed to parse filter (is.nothing)"',
      /unexpected "nothing" expecting isVal/,
    ],
    [
      "is with trailing garbage",
      "bio",
      "is.null.x",
      '"failed to parse filter (is.null.x)"',
      /unexpected "\." expecting end of input/,
    ],
    ["empty is value", "bio", "is.", '"failed to parse filter (is.)"', /unexpected end of input at index 3/],
    [
      "in without parens",
      "id",
      "in.1,2",
      '"failed to parse filter (in.1,2)"',
      /unexpected "1" expecting "\("/,
    ],
    [
      "in unclosed",
      "id",
      "in.(1,2",
      '"failed to parse filter (in.(1,2)"',
      /unexpected end of input expecting "," or "\)"/,
    ],
    [
      "in trailing garbage",
      "id",
      "in.(1,2)x",
      '"failed to parse filter (in.(1,2)x)"',
      /unexpected "x" expecting end of input/,
    ],
    ["in quantifier", "id", "in(any).(1)", '"failed to parse filter (in(any).(1))"', /expecting delimiter/],
    [
      "bad quantifier",
      "id",
      "eq(some).{1}",
      '"failed to parse filter (eq(some).{1})"',
      /expecting "any\)" or "all\)"/,
    ],
    [
      "quantifier on cs",
      "t",
      "cs(any).{1}",
      '"failed to parse filter (cs(any).{1})"',
      /unexpected "\(" expecting delimiter/,
    ],
    ["quantified scalar", "t", "eq(any).x", '"failed to parse filter (eq(any).x)"', /expecting a list/],
    [
      "quantified unclosed",
      "t",
      "eq(any).{a,b",
      '"failed to parse filter (eq(any).{a,b)"',
      /unexpected end of input expecting "," or "}"/,
    ],
    [
      "quantified nested array",
      "t",
      "eq(any).{{1}}",
      '"failed to parse filter (eq(any).{{1}})"',
      /unexpected "{" at index 9/,
    ],
    [
      "quantified NULL",
      "t",
      "eq(any).{a,NULL}",
      '"failed to parse filter (eq(any).{a,NULL})"',
      /unquoted NULL/,
    ],
    [
      "quantified empty element",
      "t",
      "eq(any).{a,,b}",
      '"failed to parse filter (eq(any).{a,,b})"',
      /expecting an array element/,
    ],
    [
      "quantified trailing",
      "t",
      "eq(any).{a}b",
      '"failed to parse filter (eq(any).{a}b)"',
      /expecting end of input/,
    ],
    [
      "fts empty language",
      "t",
      "fts().x",
      '"failed to parse filter (fts().x)"',
      /unexpected "\)" expecting text search configuration/,
    ],
    [
      "fts unclosed language",
      "t",
      "fts(english.x",
      '"failed to parse filter (fts(english.x)"',
      /expecting "\)"/,
    ],
    ["empty field name", "", "eq.1", '"failed to parse tree path ()"', /expecting field name/],
    [
      "empty path segment",
      "tracks..title",
      "eq.1",
      '"failed to parse tree path (tracks..title)"',
      /unexpected "\." at index 7/,
    ],
    [
      "trailing dot",
      "tracks.",
      "eq.1",
      '"failed to parse tree path (tracks.)"',
      /unexpected end of input at index 7/,
    ],
    ["unclosed quoted key", '"abc', "eq.1", '"failed to parse tree path ("abc)"', /expecting closing quote/],
    [
      "empty quoted key",
      '""',
      "eq.1",
      '"failed to parse tree path ("")"',
      /unexpected "" expecting non-empty field name/,
    ],
    ["key garbage", "a)b", "eq.1", '"failed to parse tree path (a)b)"', /unexpected "\)" at index 1/],
    ["empty json key", "data->", "eq.1", '"failed to parse tree path (data->)"', /expecting JSON key/],
    [
      "bad negative index",
      "data->-1x",
      "eq.1",
      '"failed to parse tree path (data->-1x)"',
      /unexpected "x" expecting digit/,
    ],
    [
      "json path in the middle",
      "data->a.b",
      "eq.1",
      '"failed to parse tree path (data->a.b)"',
      /unexpected "\." at index 7/,
    ],
    ["empty or", "or", "", '"failed to parse logic tree ()"', /unexpected end of input expecting "\("/],
    ["or without parens", "or", "a.eq.1", '"failed to parse logic tree (a.eq.1)"', /expecting "\("/],
    [
      "empty or list",
      "or",
      "()",
      '"failed to parse logic tree (())"',
      /unexpected "\)" expecting field name .* or logic operator/,
    ],
    [
      "unclosed or",
      "or",
      "(a.eq.1,b.eq.2",
      '"failed to parse logic tree ((a.eq.1,b.eq.2)"',
      /unexpected end of input expecting "," or "\)"/,
    ],
    [
      "extra paren",
      "or",
      "(a.eq.1))",
      '"failed to parse logic tree ((a.eq.1)))"',
      /unexpected "\)" expecting end of input/,
    ],
    [
      "unknown op in tree",
      "or",
      "(a.eq.1,b.foo.2)",
      '"failed to parse logic tree ((a.eq.1,b.foo.2))"',
      /unexpected "foo" at index 10/,
    ],
    [
      "missing op in tree",
      "or",
      "(a)",
      '"failed to parse logic tree ((a))"',
      /unexpected "\)" expecting delimiter/,
    ],
    ["in list unsplit", "or", "(id.in.1,2)", '"failed to parse logic tree ((id.in.1,2))"', /expecting "\("/],
    [
      "bad nested operator",
      "or",
      "(id.eq.1,not.xor(id.eq.2))",
      '"failed to parse logic tree ((id.eq.1,not.xor(id.eq.2)))"',
      /unexpected "xor"/,
    ],
    [
      "trailing comma",
      "and",
      "(a.eq.1,)",
      '"failed to parse logic tree ((a.eq.1,))"',
      /unexpected "\)" at index 8/,
    ],
    [
      "trailing garbage",
      "or",
      "(a.eq.1)x",
      '"failed to parse logic tree ((a.eq.1)x)"',
      /unexpected "x" at index 8/,
    ],
    ["bad is in tree", "or", "(a.is.nul)", '"failed to parse logic tree ((a.is.nul))"', /unexpected "nul"/],
    [
      "is trailing in tree",
      "or",
      "(a.is.null x)",
      '"failed to parse logic tree ((a.is.null x))"',
      /unexpected "x" at index 11/,
    ],
    ["empty logic path", ".or", "(a.eq.1)", '"failed to parse logic path (.or)"', /expecting field name/],
    [
      "empty select item",
      "select",
      "id,,title",
      '"failed to parse select parameter (id,,title)"',
      /unexpected "," expecting field name/,
    ],
    [
      "trailing comma in select",
      "select",
      "id,",
      '"failed to parse select parameter (id,)"',
      /unexpected end of input at index 3/,
    ],
    [
      "unclosed embed",
      "select",
      "tracks(id",
      '"failed to parse select parameter (tracks(id)"',
      /unexpected end of input expecting "," or "\)"/,
    ],
    [
      "unopened embed",
      "select",
      "id)",
      '"failed to parse select parameter (id))"',
      /unexpected "\)" expecting "," or end of input/,
    ],
    [
      "embed garbage",
      "select",
      "tracks(*)x",
      '"failed to parse select parameter (tracks(*)x)"',
      /unexpected "x" at index 9/,
    ],
    [
      "unclosed quote",
      "select",
      '"abc',
      '"failed to parse select parameter ("abc)"',
      /unexpected end of input expecting closing quote/,
    ],
    ["lone quote", "select", '"', '"failed to parse select parameter (")"', /expecting closing quote/],
    [
      "hint without embed",
      "select",
      "name!hint",
      '"failed to parse select parameter (name!hint)"',
      /unexpected end of input expecting "!" or "\("/,
    ],
    [
      "three embed params",
      "select",
      "a!b!c!d(*)",
      '"failed to parse select parameter (a!b!c!d(*))"',
      /unexpected "!" expecting "\("/,
    ],
    [
      "json path on an embed",
      "select",
      "rel->x(*)",
      '"failed to parse select parameter (rel->x(*))"',
      /unexpected "\(" at index 6/,
    ],
    [
      "star with alias",
      "select",
      "a:*",
      '"failed to parse select parameter (a:*)"',
      /unexpected "\*" expecting field name/,
    ],
    [
      "star with cast",
      "select",
      "*::text",
      '"failed to parse select parameter (*::text)"',
      /unexpected ":" at index 1/,
    ],
    [
      "empty cast",
      "select",
      "id::",
      '"failed to parse select parameter (id::)"',
      /unexpected end of input expecting cast type/,
    ],
    [
      "array cast",
      "select",
      "id::int[]",
      '"failed to parse select parameter (id::int[])"',
      /unexpected "\[" at index 7/,
    ],
    [
      "old spread syntax",
      "select",
      "..rel(*)",
      '"failed to parse select parameter (..rel(*))"',
      /unexpected "\." at index 0/,
    ],
    [
      "aliased spread",
      "select",
      "a:...rel(*)",
      '"failed to parse select parameter (a:...rel(*))"',
      /unexpected "\." at index 2/,
    ],
    ["empty alias", "select", ":id", '"failed to parse select parameter (:id)"', /unexpected ":" at index 0/],
    [
      "dangling dash",
      "select",
      "a-",
      '"failed to parse select parameter (a-)"',
      /unexpected end of input at index 2/,
    ],
    [
      "bad direction",
      "order",
      "id.ac",
      '"failed to parse order (id.ac)"',
      /unexpected "ac" expecting "asc", "desc"/,
    ],
    [
      "direction typo",
      "order",
      "id.descc",
      '"failed to parse order (id.descc)"',
      /unexpected "descc" at index 3/,
    ],
    [
      "bad nulls",
      "order",
      "id.asc.nlsfst",
      '"failed to parse order (id.asc.nlsfst)"',
      /unexpected "nlsfst" expecting "nullsfirst" or "nullslast"/,
    ],
    [
      "nulls then direction",
      "order",
      "id.nullsfirst.asc",
      '"failed to parse order (id.nullsfirst.asc)"',
      /unexpected "\." expecting "," or end of input/,
    ],
    ["empty order", "order", "", '"failed to parse order ()"', /expecting field name/],
    [
      "trailing comma in order",
      "order",
      "id,",
      '"failed to parse order (id,)"',
      /unexpected end of input at index 3/,
    ],
    [
      "order by relation",
      "order",
      "clients(name).desc",
      '"failed to parse order (clients(name).desc)"',
      /relation\(column\), is not supported/,
    ],
    [
      "uppercase direction",
      "order",
      "id.DESC",
      '"failed to parse order (id.DESC)"',
      /unexpected "D" at index 3/,
    ],
    ["empty columns", "columns", "", '"failed to parse columns parameter ()"', /expecting field name/],
    [
      "columns garbage",
      "columns",
      "a,b)",
      '"failed to parse columns parameter (a,b))"',
      /unexpected "\)" expecting "," or end of input/,
    ],
    [
      "empty on_conflict item",
      "on_conflict",
      "a,,b",
      '"failed to parse on_conflict parameter (a,,b)"',
      /unexpected "," at index 2/,
    ],
    [
      "bad reserved key",
      "tracks..limit",
      "1",
      '"failed to parse tree path (tracks..limit)"',
      /unexpected "\." at index 7/,
    ],
    [
      "bad order key",
      "a b)c.order",
      "id",
      '"failed to parse tree path (a b)c.order)"',
      /unexpected "\)" expecting "." or end of input/,
    ],
  ];
  for (const [name, key, value, message, details] of cases) {
    test(name, () => {
      const e = parseError(() => one(key, value));
      assert.equal(e.code, "PGRST100");
      assert.ok(
        e.message.startsWith(message),
        `message ${JSON.stringify(e.message)} should start with ${JSON.stringify(message)}`,
      );
      assert.match(e.message, /\(line 1, column \d+\)$/);
      // A pattern may name the position as "at index N": it is checked as the message's column
      // (N + 1), since the details use PostgREST's wording, which carries no position.
      const at = /at index (\d+)/.exec(details.source);
      if (at) assert.match(e.message, new RegExp(`column ${Number(at[1]) + 1}\\)$`));
      assert.match(
        e.details,
        at ? new RegExp(details.source.replace(/ at index \d+/, ""), details.flags) : details,
      );
      assert.equal(e.hint, undefined);
    });
  }

  test("the column in the message is the index plus one", () => {
    const e = parseError(() => one("id", "eq5"));
    assert.equal(e.message, '"failed to parse filter (eq5)" (line 1, column 3)');
    assert.equal(e.details, 'unexpected "5" expecting "(" or delimiter (.)');
  });

  test("aggregates parse as PostgREST's db-aggregates-enabled grammar", () => {
    const sel = (v: string) => one("select", v).select;
    assert.deepEqual(sel("total:count()::int"), [
      {
        kind: "field",
        field: { name: "*", jsonPath: [] },
        alias: "total",
        cast: undefined,
        aggregate: "count",
        aggregateCast: "int",
      },
    ]);
    assert.deepEqual(sel("d:duration::int.avg()::text"), [
      {
        kind: "field",
        field: { name: "duration", jsonPath: [] },
        alias: "d",
        cast: "int",
        aggregate: "avg",
        aggregateCast: "text",
      },
    ]);
    const nested = sel("t(x.max())")?.[0];
    assert.equal(nested?.kind, "embed");
    assert.deepEqual(nested?.kind === "embed" ? nested.select : undefined, [
      {
        kind: "field",
        field: { name: "x", jsonPath: [] },
        alias: undefined,
        cast: undefined,
        aggregate: "max",
        aggregateCast: undefined,
      },
    ]);
    // `.sumx()` is no aggregate: the field ends at the dot.
    assert.equal(parseError(() => one("select", "duration.sumx()")).code, "PGRST100");
  });
});

// ---- hostile input ----

describe("hostile input", () => {
  test("nesting 1000 deep is refused, not overflowed", () => {
    const tree = parseError(() => one("or", `(${"and(".repeat(1000)}a.eq.1${")".repeat(1001)}`));
    assert.match(tree.details, /logic trees nest at most 32 levels deep/);
    const tree33 = parseError(() => one("or", `(${"and(".repeat(32)}a.eq.1${")".repeat(33)}`));
    assert.match(tree33.details, /at most 32 levels/);
    const select = parseError(() => one("select", `${"a(".repeat(1000)}*${")".repeat(1000)}`));
    assert.match(select.details, /embeds nest at most 32 levels deep/);
    const select33 = parseError(() => one("select", `${"a(".repeat(33)}*${")".repeat(33)}`));
    assert.match(select33.details, /at most 32 levels/);
  });

  test("10,000-character inputs", { timeout: 5000 }, () => {
    const long = "x".repeat(10_000);
    assert.equal((condition("title", `eq.${long}`) as Filter).value, long);
    assert.equal((condition(long, "eq.1") as Filter).field.name, long);
    const items = Array.from({ length: 2000 }, (_, i) => `"v${i},"`).join(",");
    assert.equal(((condition("id", `in.(${items})`) as Filter).value as string[]).length, 2000);
    const children = Array.from({ length: 1000 }, (_, i) => `c${i}.eq.${i}`).join(",");
    assert.equal((condition("or", `(${children})`) as LogicTree).children.length, 1000);
    const columns = Array.from({ length: 2000 }, (_, i) => `c${i}`).join(",");
    assert.equal(one("select", columns).select?.length, 2000);
    assert.equal(one("columns", columns).columns?.length, 2000);
    assert.equal(one("order", columns).order[0]?.terms.length, 2000);
    const e = parseError(() => one("select", `${"a,".repeat(5000)}(`));
    assert.ok(e.message.length < 400, "the message quotes a bounded part of the input");
  });

  test("pathological quotes and braces stay fast", { timeout: 5000 }, () => {
    for (const value of [
      `in.(${'"a,'.repeat(20_000)})`,
      `in.(${'"\\",'.repeat(20_000)})`,
      `eq(any).{${'"a\\",'.repeat(20_000)}}`,
    ]) {
      try {
        one("id", value);
      } catch (e) {
        assert.ok(e instanceof ParseError);
      }
    }
    for (const value of [
      `(${"a.eq.{,".repeat(20_000)})`,
      `(${'a.eq."x,'.repeat(20_000)})`,
      `(${"a.in.(".repeat(20_000)})`,
    ]) {
      try {
        one("or", value);
      } catch (e) {
        assert.ok(e instanceof ParseError);
      }
    }
    assert.equal(parseError(() => one("select", '"'.repeat(50_001))).code, "PGRST100");
  });

  test("NUL bytes are refused everywhere", () => {
    for (const [key, value] of [
      ["id", "eq.a\u0000b"],
      ["id\u0000", "eq.1"],
      ["select", "id,\u0000"],
      ["or", "(a.eq.\u0000)"],
      ["order", "id\u0000"],
      ["limit", "1\u0000"],
      ["columns", "a\u0000"],
    ] as const) {
      const e = parseError(() => one(key, value));
      assert.match(e.details, /^unexpected "\\u0000" expecting any character but NUL$/);
      assert.ok(!e.message.includes("\u0000"));
    }
  });

  test("unicode and astral characters count as one position", () => {
    assert.deepEqual(condition("𝒜𝒷", "eq.🎶"), filter("𝒜𝒷", "eq", "🎶"));
    assert.deepEqual(condition('"🎵"', "eq.1"), filter("🎵", "eq", "1"));
    assert.match(parseError(() => one("🎵", "eq.1")).details, /^unexpected "🎵" expecting field name/);
    assert.match(parseError(() => one("𝒜𝒷)", "eq.1")).message, /column 3\)$/);
    const e = parseError(() => one("id", "🎵🎵x"));
    assert.match(e.details, /^unexpected "🎵"/);
    assert.match(e.message, /column 1\)$/);
    const e2 = parseError(() => one("order", "título.🎵"));
    assert.match(e2.message, /column 8\)$/);
  });

  test("lone quotes", () => {
    assert.deepEqual(condition("t", 'eq."'), filter("t", "eq", '"'));
    assert.deepEqual(condition("t", 'in.(")'), filter("t", "in", ['"']));
    assert.deepEqual(condition("or", '(t.eq.")'), or(filter("t", "eq", '"')));
    for (const [key, value] of [
      ["select", '"'],
      ["order", '"'],
      ['"', "eq.1"],
      ["columns", 'a,"'],
      ["t", 'eq(any).{"}'],
      ['data->"', "eq.1"],
    ] as const) {
      assert.equal(parseError(() => one(key, value)).code, "PGRST100");
    }
  });

  test("random input only ever throws ParseError", { timeout: 20_000 }, () => {
    // A fixed-seed generator, so a failure can be replayed.
    let seed = 0x2545f491;
    const random = () => {
      seed ^= seed << 13;
      seed ^= seed >>> 17;
      seed ^= seed << 5;
      return (seed >>> 0) / 2 ** 32;
    };
    const alphabet = [
      ...'abc_019 .,:()!"\\*->{}[]$\t',
      "eq.",
      "in.",
      "is.",
      "not.",
      "and(",
      "or(",
      "...",
      "::",
      "->>",
      "é",
      "🎵",
      "\u0000",
    ];
    const keys = [
      "select",
      "order",
      "or",
      "not.and",
      "tracks.or",
      "limit",
      "offset",
      "columns",
      "on_conflict",
      "id",
      "data->a",
    ];
    for (let i = 0; i < 5000; i++) {
      const length = Math.floor(random() * 40);
      let value = "";
      for (let j = 0; j < length; j++) value += alphabet[Math.floor(random() * alphabet.length)];
      const key = random() < 0.8 ? (keys[Math.floor(random() * keys.length)] as string) : value.slice(0, 8);
      try {
        parseQuery([[key, value]]);
      } catch (e) {
        assert.ok(e instanceof ParseError, `${JSON.stringify([key, value])} threw ${String(e)}`);
        assert.equal(typeof e.details, "string");
      }
    }
  });
});
