/**
 * Charts drawn by Chart.js, for both apps (the portal's royalties, the console's royalty imports):
 * a page imports this module lazily, so it and the library load only where something is charted.
 * Each chart is a picture whose accessible name is a one-line summary; the page shows the same
 * figures in a table beside it, for reading and for screen readers. Colours are the page's own
 * (--accent, --text, --line), read when drawn.
 */
import {
  BarController,
  BarElement,
  CategoryScale,
  Chart,
  type ChartConfiguration,
  Legend,
  LinearScale,
  LineController,
  LineElement,
  PointElement,
  Tooltip,
} from "chart.js";
import { useEffect, useRef } from "react";

Chart.register(
  BarController,
  BarElement,
  CategoryScale,
  LinearScale,
  LineController,
  LineElement,
  PointElement,
  Tooltip,
  Legend,
);

/** The page's own colours (in the portal, the tenant's accent made readable), read when drawn. */
export function colours() {
  const style = getComputedStyle(document.documentElement);
  const v = (name: string, fallback: string) => style.getPropertyValue(name).trim() || fallback;
  return { accent: v("--accent", "#1f4fd1"), text: v("--text", "#15171a"), line: v("--line", "#d5d9e0") };
}

/** A canvas with a chart made by `config`, redrawn when `figures` (its data, as text) change. */
export function useChart(config: () => ChartConfiguration, figures: string) {
  const canvas = useRef<HTMLCanvasElement>(null);
  // biome-ignore lint/correctness/useExhaustiveDependencies: the chart is redrawn when its figures change, not with each new closure
  useEffect(() => {
    if (!canvas.current) return;
    const chart = new Chart(canvas.current, config());
    return () => chart.destroy();
  }, [figures]);
  return canvas;
}

export interface Point {
  label: string;
  value: number;
  second?: number;
}

/** Net revenue per month as bars, streams as a line on their own axis. */
export function TimeChart({
  points,
  currency,
  summary,
}: {
  points: Point[];
  currency: string;
  summary: string;
}) {
  const canvas = useChart(
    () => {
      const c = colours();
      return {
        type: "bar",
        data: {
          labels: points.map((p) => p.label),
          datasets: [
            {
              type: "bar",
              label: `Net (${currency})`,
              data: points.map((p) => p.value),
              backgroundColor: c.accent,
              yAxisID: "y",
            },
            {
              type: "line",
              label: "Streams",
              data: points.map((p) => p.second ?? 0),
              borderColor: c.text,
              backgroundColor: c.text,
              yAxisID: "streams",
            },
          ],
        },
        options: {
          responsive: true,
          maintainAspectRatio: false,
          animation: false,
          color: c.text,
          scales: {
            x: { ticks: { color: c.text }, grid: { color: c.line } },
            y: {
              beginAtZero: true,
              ticks: { color: c.text },
              grid: { color: c.line },
              title: { display: true, text: currency, color: c.text },
            },
            streams: {
              position: "right",
              beginAtZero: true,
              ticks: { color: c.text },
              grid: { display: false },
              title: { display: true, text: "Streams", color: c.text },
            },
          },
        },
      } as ChartConfiguration;
    },
    JSON.stringify([points, currency]),
  );
  return (
    <div className="chart" data-testid="chart-time">
      <canvas ref={canvas} role="img" aria-label={summary} />
    </div>
  );
}

/** A sorted bar list: the largest first, as bars across; `unit` names what the bars measure. */
export function BarList({
  points,
  unit,
  summary,
  testid,
}: {
  points: Point[];
  unit: string;
  summary: string;
  testid: string;
}) {
  const shown = points.slice(0, 12);
  const canvas = useChart(
    () => {
      const c = colours();
      return {
        type: "bar",
        data: {
          labels: shown.map((p) => p.label),
          datasets: [{ label: unit, data: shown.map((p) => p.value), backgroundColor: c.accent }],
        },
        options: {
          indexAxis: "y",
          responsive: true,
          maintainAspectRatio: false,
          animation: false,
          plugins: { legend: { display: false } },
          scales: {
            x: { beginAtZero: true, ticks: { color: c.text }, grid: { color: c.line } },
            y: { ticks: { color: c.text }, grid: { display: false } },
          },
        },
      } as ChartConfiguration;
    },
    JSON.stringify([points, unit]),
  );
  return (
    <div
      className="chart bars"
      style={{ height: `${Math.max(8, shown.length * 2.2 + 3)}rem` }}
      data-testid={testid}
    >
      <canvas ref={canvas} role="img" aria-label={summary} />
    </div>
  );
}
