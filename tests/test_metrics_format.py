"""The ``/metrics`` page as Prometheus' own parser reads it: any route text, any latencies."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from support.components import need_module

from mnemosyne.integrations.server.metrics import BUCKETS, Metrics, tenant_label

parser = need_module("prometheus_client.parser")

answers = st.lists(
    st.tuples(
        st.text(min_size=1, max_size=20),  # a route label, escaped whatever it holds
        st.sampled_from([200, 201, 404, 500]),
        st.one_of(st.none(), st.text(max_size=10)),
        st.floats(min_value=0, max_value=30, allow_nan=False),
    ),
    max_size=30,
)


@settings(max_examples=60, deadline=None)
@given(answers)
def test_every_count_and_bucket_reads_back(seen) -> None:
    metrics = Metrics()
    for route, status, tenant, seconds in seen:
        metrics.answered(route, status, tenant, seconds, recall=False)
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in parser.text_string_to_metric_families(metrics.render({}).decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    for route, status, tenant, _ in set((r, s, t, 0) for r, s, t, _ in seen):
        label = tenant_label(tenant) if tenant is not None else ""
        want = sum(1 for r, s, t, _ in seen if (r, s, t) == (route, status, tenant))
        key = (("route", route), ("status", str(status)), ("tenant", label))
        assert samples[("mnemo_http_requests_total", key)] == want
    for route in {r for r, _, _, _ in seen}:
        times = [sec for r, _, _, sec in seen if r == route]
        for bound in BUCKETS:
            key = (("le", str(bound)), ("route", route))
            got = samples[("mnemo_http_request_duration_seconds_bucket", key)]
            assert got == sum(1 for sec in times if sec <= bound)
        assert samples[("mnemo_http_request_duration_seconds_count", (("route", route),))] == len(times)
