"""The server's Prometheus metrics (`GET /metrics`), named as vLLM names its own where there is
one (`treedec_` for `vllm:`), in a registry of the server's own (several servers may live in one
process: the tests)."""
from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

LATENCY = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160, 320, 640)


class Metrics:
    def __init__(self):
        r = self.registry = CollectorRegistry()
        self.requests = Counter("treedec_requests", "Chat-completion requests answered, by HTTP status and finish "
                                "reason", ["status", "finish_reason"], registry=r)
        self.prompt_tokens = Counter("treedec_prompt_tokens", "Prompt tokens prefilled (image tokens included)",
                                     registry=r)
        self.generation_tokens = Counter("treedec_generation_tokens", "Tokens of the answers (the stop token "
                                         "included)", registry=r)
        self.steps = Counter("treedec_engine_steps", "Forward steps of the engine (every page in flight in one)",
                             registry=r)
        self.page_steps = Counter("treedec_request_steps", "Steps on the requests' critical paths, summed over "
                                  "requests", registry=r)
        self.draft_tokens = Counter("treedec_spec_decode_num_draft_tokens", "Draft tokens proposed", registry=r)
        self.accepted_tokens = Counter("treedec_spec_decode_num_accepted_tokens", "Draft tokens accepted "
                                       "(0 without drafts)", registry=r)
        self.waiting = Gauge("treedec_num_requests_waiting", "Requests queued, not yet in the engine (drafting "
                             "included)", registry=r)
        self.running = Gauge("treedec_num_requests_running", "Pages in flight in the engine", registry=r)
        self.latency = Histogram("treedec_e2e_request_latency_seconds", "Arrival to the last token", buckets=LATENCY,
                                 registry=r)
        self.queue_time = Histogram("treedec_request_queue_time_seconds", "Arrival to admission into the engine",
                                    buckets=LATENCY, registry=r)
        self.first_token = Histogram("treedec_time_to_first_token_seconds", "Arrival to the first text sent",
                                     buckets=LATENCY, registry=r)

    def text(self) -> bytes:
        return generate_latest(self.registry)
