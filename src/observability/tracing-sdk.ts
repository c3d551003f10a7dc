import { createRequire } from "node:module";
import { trace } from "@opentelemetry/api";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { registerInstrumentations } from "@opentelemetry/instrumentation";
import { HttpInstrumentation } from "@opentelemetry/instrumentation-http";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BatchSpanProcessor, NodeTracerProvider } from "@opentelemetry/sdk-trace-node";
import type { Logger } from "pino";
import type { Config } from "../config.ts";
import { setSpanAnnotator } from "./trace-hooks.ts";
import type { Tracing } from "./tracing.ts";

/** Probes and scrapes are not traced: they would drown the requests that matter. */
const UNTRACED = new Set(["/health", "/ready", "/metrics"]);

/**
 * The OpenTelemetry SDK's tracer with its HTTP instrumentation (a server span per request, a
 * client span per outgoing call: webhooks, store deliveries, S3), exporting over OTLP/HTTP.
 * Loaded by ./tracing.ts only when OTEL_EXPORTER_OTLP_ENDPOINT is set.
 */
export function startSdk(settings: NonNullable<Config["tracing"]>, logger: Pick<Logger, "warn">): Tracing {
  const exporter = new OTLPTraceExporter({ url: settings.tracesUrl });
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ "service.name": settings.serviceName }),
    spanProcessors: [new BatchSpanProcessor(exporter, { scheduledDelayMillis: settings.exportDelayMs })],
  });
  provider.register();
  const stopInstrumenting = registerInstrumentations({
    tracerProvider: provider,
    instrumentations: [
      new HttpInstrumentation({
        ignoreIncomingRequestHook: (request) => UNTRACED.has((request.url ?? "").split("?")[0] ?? ""),
      }),
    ],
  });
  // node:http was loaded (by Fastify, before this ran): requiring it again lets the
  // instrumentation patch the module's shared prototypes, which every server already uses.
  const require = createRequire(import.meta.url);
  require("node:http");
  require("node:https");
  setSpanAnnotator((method, route) => {
    const span = trace.getActiveSpan();
    if (!span) return;
    span.updateName(`${method} ${route}`);
    span.setAttribute("http.route", route);
  });
  return {
    async shutdown() {
      setSpanAnnotator(undefined);
      stopInstrumenting();
      await provider
        .shutdown()
        .catch((error: unknown) => logger.warn({ err: error }, "tracing: the last spans were not sent"));
    },
  };
}
