import { useQueries, useQuery } from "@tanstack/react-query";
import { lazy, type ReactNode, Suspense, useMemo } from "react";
import { Empty, Loading, TableWrap } from "../../../ui-shared/common.tsx";
import { groupDigits, money, toNumber } from "../../../ui-shared/money.ts";
import { Link, setSearch, useLocation } from "../../../ui-shared/router.tsx";
import { type Account, releaseTitles } from "../api/portal.ts";
import {
  type RoyaltyFilters,
  type RoyaltyGroup,
  type RoyaltyKey,
  type RoyaltySums,
  royaltyGroups,
} from "../api/public.ts";
import { ErrorState, Field, Page, SelectField } from "../ui.tsx";
import { rulesQuery } from "./release/queries.ts";
import { downloadCsv, royaltiesCsv } from "./royalties/csv.ts";

// The charts and their libraries load with this page only (a chunk of their own).
const charts = () => import("./royalties/Charts.tsx");
const TimeChart = lazy(() => charts().then((m) => ({ default: m.TimeChart })));
const BarList = lazy(() => charts().then((m) => ({ default: m.BarList })));
const WorldMap = lazy(() => charts().then((m) => ({ default: m.WorldMap })));

const KEYS: RoyaltyKey[] = ["period", "store", "territory", "release", "track"];

const MONTH = /^\d{4}-(0[1-9]|1[0-2])$/;

/** The filters the address holds (so a view can be bookmarked and sent), valid ones only. */
function filtersOf(search: URLSearchParams): RoyaltyFilters {
  const month = (v: string | null) => (v && MONTH.test(v) ? v : undefined);
  const code = (v: string | null, re: RegExp) => (v && re.test(v) ? v : undefined);
  const from = month(search.get("from"));
  let to = month(search.get("to"));
  if (from && to && to < from) to = undefined;
  return {
    from,
    to,
    store: code(search.get("store"), /^[a-z0-9_]+$/),
    territory: code(search.get("territory"), /^[A-Z]{2}$/),
    currency: code(search.get("currency"), /^[A-Z]{3}$/),
    release_id: code(search.get("release"), /^[0-9a-f-]{36}$/i),
  };
}

/** A track's row: its title, or what a release-level sale (UPC only, no track) is. */
function trackName(g: RoyaltyGroup): string {
  return g.track_id ? (g.track_title ?? "A track") : "The whole release (no track named)";
}

/** "2026-03" → "Mar 2026". */
function monthName(period: string): string {
  const [y, m] = period.split("-");
  const names = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
  return `${names[Number(m) - 1] ?? m} ${y}`;
}

/** The currency shown: the one asked for, else the one with the most lines. */
function currencyShown(totals: RoyaltySums[], asked: string | undefined): string | undefined {
  if (asked) return asked;
  return [...totals].sort((a, b) => b.lines - a.lines)[0]?.currency;
}

function Section({ title, testid, children }: { title: string; testid: string; children: ReactNode }) {
  const id = `${testid}-heading`;
  return (
    <section className="card" aria-labelledby={id} data-testid={testid}>
      <h2 id={id}>{title}</h2>
      {children}
    </section>
  );
}

/**
 * A table of one breakdown: its label column (and any further columns naming the row), then
 * streams, downloads and net in the currency.
 */
function SumsTable({
  label,
  rows,
  currency,
  testid,
  columns = [],
  describedBy,
}: {
  label: string;
  rows: { key: string; name: ReactNode; cells?: ReactNode[]; sums: RoyaltySums }[];
  currency: string;
  testid: string;
  columns?: string[];
  describedBy?: string;
}) {
  return (
    <TableWrap label={`${label}: figures`}>
      <table data-testid={testid} aria-describedby={describedBy}>
        <thead>
          <tr>
            <th scope="col">{label}</th>
            {columns.map((c) => (
              <th scope="col" key={c}>
                {c}
              </th>
            ))}
            <th scope="col" className="num">
              Streams
            </th>
            <th scope="col" className="num">
              Downloads
            </th>
            <th scope="col" className="num">
              Net ({currency})
            </th>
          </tr>
        </thead>
        <tbody>
          {rows.map((r) => (
            <tr key={r.key} data-testid={`${testid}-row`}>
              <th scope="row">{r.name}</th>
              {(r.cells ?? []).map((c, i) => (
                <td key={columns[i] ?? i}>{c}</td>
              ))}
              <td className="num">{groupDigits(r.sums.streams)}</td>
              <td className="num">{groupDigits(r.sums.downloads)}</td>
              <td className="num">{money(r.sums.net, currency)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </TableWrap>
  );
}

/**
 * Royalties and analytics of the account: streams and revenue over time, by store, by territory
 * (a world map and a sorted list), by release and by track, for one currency at a time (amounts are never
 * added across currencies; the totals list every currency), filtered by period, store, territory,
 * currency and release as the address says, with a CSV of exactly what is shown.
 */
export function Royalties({ account }: { account: Account }) {
  const { search } = useLocation();
  const filters = filtersOf(search);
  const rules = useQuery(rulesQuery(account.id));
  const results = useQueries({
    queries: KEYS.map((by) => ({
      queryKey: ["royalties", account.id, by, filters],
      queryFn: () => royaltyGroups(account.id, by, filters),
    })),
  });
  const [byPeriod, byStore, byTerritory, byRelease, byTrack] = results;
  const releaseIds = useMemo(
    () => [
      ...new Set((byRelease?.data?.groups ?? []).map((g) => g.release_id).filter((x): x is string => !!x)),
    ],
    [byRelease?.data],
  );
  const titles = useQuery({
    queryKey: ["release-titles", releaseIds],
    queryFn: () => releaseTitles(releaseIds),
    enabled: releaseIds.length > 0,
  });
  const set = (changes: Record<string, string | undefined>) => setSearch(changes, { replace: true });

  const pending = results.some((r) => r.isPending);
  const failed = results.find((r) => r.isError);
  const totals = byPeriod?.data?.totals ?? [];
  const currency = currencyShown(totals, filters.currency);
  const of = (groups: RoyaltyGroup[] | undefined) => (groups ?? []).filter((g) => g.currency === currency);
  const storeName = (code: string) => rules.data?.stores.find((s) => s.code === code)?.name ?? code;
  const countryName = (code: string | null | undefined) =>
    code ? (rules.data?.territories.find((t) => t.code === code)?.name ?? code) : "Not said by the store";
  const titleOf = (id: string | undefined) => (id ? (titles.data?.get(id) ?? "A release") : "—");

  const periods = of(byPeriod?.data?.groups).sort((a, b) => (a.period ?? "").localeCompare(b.period ?? ""));
  const stores = of(byStore?.data?.groups).sort((a, b) => toNumber(b.net) - toNumber(a.net));
  const territories = of(byTerritory?.data?.groups).sort((a, b) => toNumber(b.net) - toNumber(a.net));
  const releases = of(byRelease?.data?.groups).sort((a, b) => toNumber(b.net) - toNumber(a.net));
  const tracks = of(byTrack?.data?.groups).sort(
    (a, b) => toNumber(b.net) - toNumber(a.net) || trackName(a).localeCompare(trackName(b)),
  );
  const shown = totals.find((t) => t.currency === currency);
  const span =
    periods.length > 0
      ? `${monthName(periods[0]?.period ?? "")} to ${monthName(periods[periods.length - 1]?.period ?? "")}`
      : "";
  const summary = shown
    ? `${money(shown.net, shown.currency)} net from ${groupDigits(shown.streams)} streams and ${groupDigits(shown.downloads)} downloads, ${span}.`
    : "";
  const top = (rows: RoyaltyGroup[], name: (g: RoyaltyGroup) => string) =>
    rows[0] && currency ? `Most earned: ${name(rows[0])}, ${money(rows[0].net, currency)}.` : "";
  const trackCount = tracks.filter((g) => g.track_id).length;
  const tracksSummary = `Net revenue by track, highest first: ${groupDigits(trackCount)} ${trackCount === 1 ? "track" : "tracks"}${
    tracks.length > trackCount ? ", and sales of whole releases" : ""
  }. ${top(tracks, (g) => `${trackName(g)} (${g.release_title ?? titleOf(g.release_id)})`)}`;
  /** The address with the release filter set: a release named in a table narrows the page to it. */
  const onlyRelease = (id: string | undefined) =>
    `/royalties?${new URLSearchParams({ ...Object.fromEntries(search), release: id ?? "" })}`;

  const exportCsv = () => {
    if (!currency) return;
    downloadCsv(
      `royalties-${currency}${filters.from ? `-${filters.from}` : ""}${filters.to ? `-${filters.to}` : ""}.csv`,
      royaltiesCsv(currency, [
        ["month", periods.map((g) => [g.period ?? "", g])],
        ["store", stores.map((g) => [g.store ?? "", g])],
        ["territory", territories.map((g) => [g.territory ?? "", g])],
        ["release", releases.map((g) => [titleOf(g.release_id), g])],
        [
          "track",
          tracks.map((g) => [
            trackName(g),
            g,
            { release: g.release_title ?? titleOf(g.release_id), isrc: g.isrc ?? "" },
          ]),
        ],
      ]),
    );
  };

  return (
    <Page title="Royalties" testid="page-royalties">
      <form className="filters" aria-label="Filters" onSubmit={(e) => e.preventDefault()}>
        <Field
          label="Sold from"
          type="month"
          value={filters.from ?? ""}
          onChange={(e) => set({ from: e.target.value || undefined })}
          testid="filter-from"
        />
        <Field
          label="Sold until"
          type="month"
          value={filters.to ?? ""}
          min={filters.from}
          onChange={(e) => set({ to: e.target.value || undefined })}
          testid="filter-to"
        />
        <SelectField
          label="Store"
          value={filters.store ?? ""}
          options={[["", "All stores"], ...(rules.data?.stores ?? []).map((s) => [s.code, s.name] as const)]}
          onChange={(e) => set({ store: e.target.value || undefined })}
          testid="filter-store"
        />
        <SelectField
          label="Territory"
          value={filters.territory ?? ""}
          options={[
            ["", "Everywhere"],
            ...(rules.data?.territories ?? []).map((t) => [t.code, t.name] as const),
          ]}
          onChange={(e) => set({ territory: e.target.value || undefined })}
          testid="filter-territory"
        />
        <SelectField
          label="Currency"
          value={currency ?? ""}
          options={
            totals.length > 0
              ? totals.map((t) => [t.currency, t.currency] as const)
              : [[currency ?? "", currency ?? "—"] as const]
          }
          onChange={(e) => set({ currency: e.target.value || undefined })}
          testid="filter-currency"
        />
        {filters.release_id ? (
          <p className="filter-release" data-testid="filter-release">
            Only {titleOf(filters.release_id)}. <Link to="/royalties">All releases</Link>
          </p>
        ) : null}
      </form>
      <p className="hint" data-testid="filters-hint">
        Months are months of sale. Amounts are shown in one currency at a time, never converted or added up.
      </p>
      {pending ? <Loading what="Adding up the royalties" /> : null}
      {failed ? (
        <ErrorState error={failed.error} onRetry={() => results.forEach((r) => void r.refetch())} />
      ) : null}
      {!pending && !failed && totals.length === 0 ? (
        <Empty>
          <span data-testid="royalties-empty">
            No royalties for these filters. Earnings appear here once the stores report the sales of your
            released music and the platform imports their reports, usually monthly and one to three months
            after the sale.
          </span>
        </Empty>
      ) : null}
      {!pending && !failed && currency && totals.length > 0 ? (
        <>
          <section className="card totals" aria-labelledby="totals-heading" data-testid="royalty-totals">
            <h2 id="totals-heading">In total</h2>
            <ul>
              {totals.map((t) => (
                <li key={t.currency} data-testid="royalty-total" data-currency={t.currency} data-net={t.net}>
                  <strong>{money(t.net, t.currency)}</strong> net ({money(t.gross, t.currency)} before the
                  stores' fees) from {groupDigits(t.streams)} streams and {groupDigits(t.downloads)} downloads
                </li>
              ))}
            </ul>
            <p data-testid="royalty-summary">
              Below: {currency} only. {summary}
            </p>
            <div className="buttons">
              <button type="button" className="secondary" onClick={exportCsv} data-testid="royalties-csv">
                Download what is shown (CSV)
              </button>
            </div>
          </section>
          <Suspense fallback={<Loading what="Loading the charts" />}>
            <Section title="Over time" testid="royalties-time">
              <TimeChart
                currency={currency}
                summary={`Net revenue and streams per month: ${summary}`}
                points={periods.map((g) => ({
                  label: monthName(g.period ?? ""),
                  value: toNumber(g.net),
                  second: g.streams,
                }))}
              />
              <SumsTable
                label="Month"
                currency={currency}
                testid="table-time"
                rows={periods.map((g) => ({ key: g.period ?? "", name: monthName(g.period ?? ""), sums: g }))}
              />
            </Section>
            <Section title="By store" testid="royalties-stores">
              <BarList
                testid="chart-stores"
                unit={`Net (${currency})`}
                summary={`Net revenue by store. ${top(stores, (g) => storeName(g.store ?? ""))}`}
                points={stores.map((g) => ({ label: storeName(g.store ?? ""), value: toNumber(g.net) }))}
              />
              <SumsTable
                label="Store"
                currency={currency}
                testid="table-stores"
                rows={stores.map((g) => ({
                  key: g.store ?? "",
                  name: (
                    <button type="button" className="link" onClick={() => set({ store: g.store })}>
                      {storeName(g.store ?? "")}
                    </button>
                  ),
                  sums: g,
                }))}
              />
            </Section>
            <Section title="By territory" testid="royalties-territories">
              <WorldMap
                currency={currency}
                summary={`Net revenue by country on a world map. ${top(territories, (g) => countryName(g.territory))}`}
                byCountry={new Map(territories.map((g) => [g.territory ?? "", toNumber(g.net)]))}
              />
              <SumsTable
                label="Territory"
                currency={currency}
                testid="table-territories"
                rows={territories.map((g) => ({
                  key: g.territory ?? "none",
                  name: countryName(g.territory),
                  sums: g,
                }))}
              />
            </Section>
            <Section title="By release" testid="royalties-releases">
              <SumsTable
                label="Release"
                currency={currency}
                testid="table-releases"
                rows={releases.map((g) => ({
                  key: g.release_id ?? "",
                  name: <Link to={onlyRelease(g.release_id)}>{titleOf(g.release_id)}</Link>,
                  sums: g,
                }))}
              />
            </Section>
            <Section title="By track" testid="royalties-tracks">
              <p id="tracks-summary" data-testid="tracks-summary">
                {tracksSummary}
              </p>
              {byTrack?.data?.truncated ? (
                <p className="hint" data-testid="tracks-truncated">
                  Only the first {groupDigits(byTrack.data.groups.length)} tracks and currencies are shown:
                  narrow the filters to see the others.
                </p>
              ) : null}
              <SumsTable
                label="Track"
                columns={["ISRC", "Release"]}
                currency={currency}
                testid="table-tracks"
                describedBy="tracks-summary"
                rows={tracks.map((g) => ({
                  key: `${g.release_id}/${g.track_id ?? ""}`,
                  name: trackName(g),
                  cells: [
                    g.isrc ?? "—",
                    <Link key="release" to={onlyRelease(g.release_id)}>
                      {g.release_title ?? titleOf(g.release_id)}
                    </Link>,
                  ],
                  sums: g,
                }))}
              />
            </Section>
          </Suspense>
        </>
      ) : null}
    </Page>
  );
}
