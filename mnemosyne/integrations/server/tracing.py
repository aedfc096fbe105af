"""OpenTelemetry traces of ``mnemo serve``: one span per request, when the user asks for them.

Off unless the standard variables ask (:func:`wanted`): ``OTEL_TRACES_EXPORTER``
(``otlp``, ``console``, or both, comma-separated), or an OTLP endpoint
(``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``);
``OTEL_SDK_DISABLED=true`` or ``OTEL_TRACES_EXPORTER=none`` turn them off. Off,
nothing of OpenTelemetry is imported and a request takes the path it took
without it. On, the SDK and its exporters read the rest of the standard
variables themselves (endpoint, headers, timeouts, ``OTEL_BSP_*``,
``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``); spans leave in batches from
a thread of the SDK's, never on the event loop's time.

A span says what ``/metrics`` says of a request, and nothing more: its route
template, method, status and tenant hash, never a path, id, query or token. A
``traceparent`` header (W3C trace context) makes it a child of the caller's span.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mnemosyne import InvalidInput
from mnemosyne.integrations.server.metrics import tenant_label
from mnemosyne.model.version import VERSION

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Span, Tracer

SERVICE = "mnemo-serve"
"""``service.name`` unless ``OTEL_SERVICE_NAME`` or ``OTEL_RESOURCE_ATTRIBUTES`` names another."""

_ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


def wanted(environ: Mapping[str, str]) -> bool:
    """Whether the standard OpenTelemetry variables in ``environ`` ask for traces."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporters = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporters == "none":
        return False
    return bool(exporters) or any(environ.get(name, "").strip() for name in _ENDPOINTS)


class Tracing:
    """A tracer provider exporting as the variables say, and the span of each request.

    Args:
        environ: the process's environment (the command reads it; the SDK reads it too).

    Raises:
        InvalidInput: the ``otel`` extra is missing, or an exporter or protocol it lacks is asked for.
    """

    def __init__(self, environ: Mapping[str, str]) -> None:
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
            from opentelemetry.trace import SpanKind, StatusCode
            from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
        except ImportError as error:
            raise InvalidInput(
                f"the OTEL_* variables ask for traces, and the 'otel' extra is missing ({error.name}): "
                "pip install 'mnemosyne[otel]'"
            ) from None
        names = [name.strip() for name in environ.get("OTEL_TRACES_EXPORTER", "otlp").lower().split(",")]
        exporters: list[SpanExporter] = []
        for name in filter(None, names):
            if name == "otlp":
                protocol = environ.get(
                    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "")
                )
                if protocol.strip() not in ("", "http/protobuf"):
                    raise InvalidInput(
                        f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol}: mnemo serve exports OTLP over http/protobuf"
                    )
                exporters.append(OTLPSpanExporter())
            elif name == "console":
                exporters.append(ConsoleSpanExporter())
            else:
                raise InvalidInput(f"OTEL_TRACES_EXPORTER: {name!r} is not otlp, console or none")
        resource = Resource.create()
        if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
            resource = resource.merge(Resource({"service.name": SERVICE}))
        # A provider of its own, not the process's global one: libraries instrumented with
        # OpenTelemetry in this process (the MCP SDK) export nothing unless asked separately.
        self.provider: TracerProvider = TracerProvider(resource=resource)
        for exporter in exporters:
            self.provider.add_span_processor(BatchSpanProcessor(exporter))
        self.tracer: Tracer = self.provider.get_tracer("mnemosyne.serve", VERSION)
        self._server = SpanKind.SERVER
        self._error = StatusCode.ERROR
        self._propagator = TraceContextTextMapPropagator()

    def start(self, scope: Mapping[str, Any]) -> Span:
        """The span of a request, begun now: a child of the caller's when it sent ``traceparent``."""
        carrier = {}
        for name, value in scope.get("headers") or []:
            if name in (b"traceparent", b"tracestate"):
                carrier[name.decode("latin-1")] = value.decode("latin-1")
        parent = self._propagator.extract(carrier) if carrier else None
        method = str(scope.get("method", "HTTP"))
        span = self.tracer.start_span(method, context=parent, kind=self._server)
        span.set_attribute("http.request.method", method)
        return span

    def end(self, span: Span, route: str, status: int, tenant: str | None) -> None:
        """End a request's span with what was learned of it (route template, status, tenant hash)."""
        span.update_name(route)
        span.set_attribute("http.route", route.partition(" ")[2] or route)
        if status:
            span.set_attribute("http.response.status_code", status)
            if status >= 500:
                span.set_status(self._error)
        if tenant is not None:
            span.set_attribute("mnemo.tenant", tenant_label(tenant))
        span.end()

    def close(self) -> None:
        """Export the spans still waiting, then stop the exporters (once the server has stopped)."""
        self.provider.shutdown()
