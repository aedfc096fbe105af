"""What ``mnemo serve --metrics`` counts, and its ``/metrics`` page in Prometheus' text format.

Requests by route, status and tenant; request and search latency as
histograms; commits; versions each open tenant's recall index has yet to take
in; connections open. A tenant is labelled by a hash of its name, never the
name (an operator computes it: :func:`tenant_label`), and only once its token
checked out, so strangers naming tenants in paths add no series. Routes are
labelled by their template (``POST /v1/tenants/{tenant}/commits``), so the
series are bounded by the routes, the statuses and the tenants served.

Counting happens on the event loop only (one thread: no lock); the page is
rendered in a worker thread, because the recall backlog is read from the store.
The text format is written here: it is a few lines per series (see ADR 64).
"""

from __future__ import annotations

import bisect
import functools
import hashlib
from collections.abc import Callable, Iterable

BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""Upper bounds, in seconds, of the latency histograms' buckets (``+Inf`` beyond)."""

CONTENT_TYPE = b"text/plain; version=0.0.4; charset=utf-8"
"""The media type of Prometheus' text exposition format."""

COMMITTING = frozenset({"POST /v1/tenants/{tenant}/commits", "POST /v1/tenants/{tenant}/verify"})
"""Routes whose 201 answer is a new commit (200: nothing changed)."""


@functools.lru_cache(maxsize=4096)  # asked per request; the tenants a server holds are few
@functools.lru_cache(maxsize=1024)  # a hash per request cost a tenth of what counting it does
def tenant_label(tenant: str) -> str:
    """The label a tenant's series carry: the first 12 hex digits of its name's SHA-256.

    The same on every server, so series from several servers add up; computed by
    ``printf %s TENANT | sha256sum | cut -c1-12``.
    """
    return hashlib.sha256(tenant.encode("utf-8")).hexdigest()[:12]


class Histogram:
    """Observations counted into :data:`BUCKETS`, with their sum."""

    def __init__(self) -> None:
        self.counts = [0] * (len(BUCKETS) + 1)
        self.total = 0.0

    def observe(self, seconds: float) -> None:
        """Count one observation."""
        self.counts[bisect.bisect_left(BUCKETS, seconds)] += 1
        self.total += seconds

    def lines(self, name: str, labels: str) -> Iterable[str]:
        """The histogram's series: cumulative buckets, sum and count."""
        joined = f"{labels}," if labels else ""
        running = 0
        for bound, count in zip((*BUCKETS, None), self.counts, strict=True):
            running += count
            le = "+Inf" if bound is None else repr(bound)
            yield f'{name}_bucket{{{joined}le="{le}"}} {running}'
        yield f"{name}_sum{_braced(labels)} {self.total!r}"
        yield f"{name}_count{_braced(labels)} {running}"


class Metrics:
    """The counts of one server, since it started.

    Attributes:
        open_connections: how many connections are open now (set by ``mnemo serve``
            once its connections are made), or None.
    """

    def __init__(self) -> None:
        self.requests: dict[tuple[str, int, str], int] = {}
        self.latency: dict[str, Histogram] = {}
        self.search = Histogram()
        self.commits: dict[str, int] = {}
        self.open_connections: Callable[[], int] | None = None

    def answered(self, route: str, status: int, tenant: str | None, seconds: float, recall: bool) -> None:
        """Count one answered request (on the event loop).

        Args:
            route: the route's template, or a fixed name (``other`` when none matched).
            status: the status answered (0: none, the client went away).
            tenant: the tenant its token reached, or None (no token, or refused).
            seconds: from its first byte seen by the application to its answer sent.
            recall: whether it was a search or context.
        """
        label = tenant_label(tenant) if tenant is not None else ""
        key = (route, status, label)
        self.requests[key] = self.requests.get(key, 0) + 1
        histogram = self.latency.get(route)
        if histogram is None:
            histogram = self.latency[route] = Histogram()
        histogram.observe(seconds)
        if recall and status == 200:
            self.search.observe(seconds)
        if status == 201 and route in COMMITTING and label:
            self.commits[label] = self.commits.get(label, 0) + 1

    def render(self, pending: dict[str, int]) -> bytes:
        """The page: every series in Prometheus' text format.

        Args:
            pending: versions each open tenant's recall index has yet to take in, by tenant name.
        """
        out = [
            "# HELP mnemo_http_requests_total Requests answered, by route, status and tenant (a hash).",
            "# TYPE mnemo_http_requests_total counter",
        ]
        for (route, status, tenant), count in sorted(self.requests.items()):
            out.append(
                f'mnemo_http_requests_total{{route={_quoted(route)},status="{status}",'
                f'tenant="{tenant}"}} {count}'
            )
        out += [
            "# HELP mnemo_http_request_duration_seconds Time to answer a request, by route.",
            "# TYPE mnemo_http_request_duration_seconds histogram",
        ]
        for route, histogram in sorted(self.latency.items()):
            out += histogram.lines("mnemo_http_request_duration_seconds", f"route={_quoted(route)}")
        out += [
            "# HELP mnemo_search_duration_seconds Time to answer a search or context.",
            "# TYPE mnemo_search_duration_seconds histogram",
            *self.search.lines("mnemo_search_duration_seconds", ""),
            "# HELP mnemo_commits_total Commits made through this server, by tenant (a hash).",
            "# TYPE mnemo_commits_total counter",
        ]
        out += [f'mnemo_commits_total{{tenant="{tenant}"}} {n}' for tenant, n in sorted(self.commits.items())]
        out += [
            "# HELP mnemo_recall_pending_versions Versions the tenant's recall index has yet to take in "
            "(the next search does), by open tenant (a hash).",
            "# TYPE mnemo_recall_pending_versions gauge",
        ]
        shown = sorted((tenant_label(name), count) for name, count in pending.items())
        out += [f'mnemo_recall_pending_versions{{tenant="{tenant}"}} {count}' for tenant, count in shown]
        if self.open_connections is not None:
            out += [
                "# HELP mnemo_open_connections Connections open now.",
                "# TYPE mnemo_open_connections gauge",
                f"mnemo_open_connections {self.open_connections()}",
            ]
        return ("\n".join(out) + "\n").encode("utf-8")


def _quoted(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def _braced(labels: str) -> str:
    return f"{{{labels}}}" if labels else ""
