import type { Logger } from "pino";
import type { Config } from "../config.ts";

/**
 * Optional OpenTelemetry tracing (docs/operations.md, "Traces"): only when
 * OTEL_EXPORTER_OTLP_ENDPOINT is set is the SDK imported (./tracing-sdk.ts), so the default
 * process neither loads it nor pays its memory and start time.
 */
export interface Tracing {
  /** Sends the spans still buffered, then stops tracing. */
  shutdown(): Promise<void>;
}

export async function startTracing(
  settings: Config["tracing"],
  logger: Pick<Logger, "info" | "warn">,
): Promise<Tracing | undefined> {
  if (!settings) return undefined;
  const { startSdk } = await import("./tracing-sdk.ts");
  const tracing = startSdk(settings, logger);
  logger.info(
    { endpoint: settings.tracesUrl, service: settings.serviceName },
    "tracing: spans are sent over OTLP/HTTP",
  );
  return tracing;
}
