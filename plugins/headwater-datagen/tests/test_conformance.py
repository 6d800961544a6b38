"""DataGen against Headwater's connector conformance suite, on a real broker and worker."""

from headwater.testing import SourceConnectorConformance


class TestDataGenConformance(SourceConnectorConformance):
    connector_class = "DataGen"
    config = {"topic": "{topic}", "rate.per.sec": "200"}
