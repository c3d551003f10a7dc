/**
 * What the HTTP layer needs of tracing, without loading it: the OpenTelemetry SDK is imported only
 * when OTEL_EXPORTER_OTLP_ENDPOINT is set (src/observability/tracing.ts), and it installs here the
 * function that names the current request's server span after its route template.
 */
type Annotate = (method: string, route: string) => void;

let annotate: Annotate | undefined;

/** The span annotator while tracing runs; undefined otherwise (the HTTP layer then adds no hook). */
export function annotateSpan(): Annotate | undefined {
  return annotate;
}

export function setSpanAnnotator(fn: Annotate | undefined): void {
  annotate = fn;
}
