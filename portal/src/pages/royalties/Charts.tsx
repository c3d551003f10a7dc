/**
 * The royalties page's world map (chartjs-chart-geo on Chart.js, world-atlas's countries): net
 * revenue per country, darker where more was earned. Loaded with the page's other charts only.
 */

import { Chart, type ChartConfiguration } from "chart.js";
import { ChoroplethController, ColorScale, GeoFeature, ProjectionScale, topojson } from "chartjs-chart-geo";
import codes from "i18n-iso-countries/codes.json";
import world from "world-atlas/countries-110m.json";
import { colours, useChart } from "../../../../ui-shared/charts.tsx";

export { BarList, TimeChart } from "../../../../ui-shared/charts.tsx";

Chart.register(ChoroplethController, GeoFeature, ColorScale, ProjectionScale);

// ISO 3166-1 alpha-2 → numeric, the ids of world-atlas's countries.
const NUMERIC = new Map((codes as string[][]).map((c) => [c[2] as string, c[0] as string]));
const COUNTRIES = (
  topojson.feature(
    world as never,
    (world as unknown as { objects: { countries: never } }).objects.countries,
  ) as unknown as {
    features: { id?: string; properties: { name: string } }[];
  }
).features;

/** Net revenue per country on a world map, darker where more was earned. */
export function WorldMap({
  byCountry,
  currency,
  summary,
}: {
  byCountry: Map<string, number>;
  currency: string;
  summary: string;
}) {
  const canvas = useChart(
    () => {
      const c = colours();
      return {
        type: "choropleth",
        data: {
          labels: COUNTRIES.map((f) => f.properties.name),
          datasets: [
            {
              label: `Net (${currency})`,
              outline: COUNTRIES,
              data: COUNTRIES.map((f) => ({
                feature: f,
                value: byCountry.get(NUMERIC.get(f.id ?? "") ?? "") ?? 0,
              })),
              borderColor: c.line,
            },
          ],
        },
        options: {
          responsive: true,
          maintainAspectRatio: false,
          animation: false,
          showOutline: true,
          showGraticule: false,
          plugins: { legend: { display: false } },
          scales: {
            projection: { axis: "x", projection: "equalEarth" },
            color: {
              axis: "x",
              quantize: 5,
              interpolate: "blues",
              legend: { position: "bottom-right", align: "right" },
            },
          },
        },
      } as unknown as ChartConfiguration;
    },
    JSON.stringify([[...byCountry], currency]),
  );
  return (
    <div className="chart map" data-testid="chart-map">
      <canvas ref={canvas} role="img" aria-label={summary} />
    </div>
  );
}
