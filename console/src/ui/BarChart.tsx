/** A small horizontal bar chart in SVG (no chart library: a few bars do not need one). */
export function BarChart({
  title,
  bars,
  testid,
}: {
  title: string;
  bars: { label: string; value: number; text?: string; tone?: "error" }[];
  testid: string;
}) {
  const max = Math.max(1, ...bars.map((b) => Math.abs(b.value)));
  const row = 30;
  const labelWidth = 70;
  const width = 420;
  const height = bars.length * row + 8;
  return (
    <figure className="chart" data-testid={testid}>
      <svg
        viewBox={`0 0 ${width} ${height}`}
        width="100%"
        role="img"
        aria-label={`${title}: ${bars.map((b) => `${b.label} ${b.text ?? b.value}`).join(", ")}`}
      >
        {bars.map((b, i) => {
          const w = Math.max(2, (Math.abs(b.value) / max) * (width - labelWidth - 120));
          const y = i * row + 4;
          return (
            <g key={b.label}>
              <text x={0} y={y + 17}>
                {b.label}
              </text>
              <rect
                className={b.tone === "error" ? "bar bar-error" : "bar"}
                x={labelWidth}
                y={y + 3}
                width={w}
                height={row - 10}
                rx={3}
              />
              <text x={labelWidth + w + 6} y={y + 17}>
                {b.text ?? b.value.toLocaleString()}
              </text>
            </g>
          );
        })}
      </svg>
      <figcaption className="sr-only">{title}</figcaption>
    </figure>
  );
}
