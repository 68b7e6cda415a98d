"""encoder_node: turns observations and action results into traces and hands them to the store.

Messages queue up while the model is busy; each round embeds everything queued in one batch, so an
idle encoder answers a single observation at once and a loaded one amortises the model call. The
batch goes to store_node through /brainmem/ingest_traces (acknowledged, see IngestTraces.srv).
A store that cannot take a batch now (not active, its disk not writable) says so, and the batch is
sent again until it can; meanwhile the backlog shows on ``/diagnostics``.
"""
from __future__ import annotations

import sys
import threading
import traceback
import time
from collections import deque

from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

from brainmem_ros.nodes import names
from brainmem_ros.core.config import MemoryConfig
from brainmem_ros.core.embedding import Embedder, MiniLMEmbedder
from brainmem_ros.core.encoding import Encoder
from brainmem_ros.core.errors import BrainMemError, TimeUnavailable
from brainmem_ros.core.extraction import Vocabulary
from brainmem_ros.core.health import BacklogHealth
from brainmem_ros.msg import ActionResult, Observation
from brainmem_ros.nodes import conversions as cv
from brainmem_ros.nodes.diagnostics import DiagnosticsPublisher
from brainmem_ros.nodes.parameters import declare, declare_memory_parameters, guard_parameters
from brainmem_ros.nodes.runtime import call_and_wait, node_clock, run
from brainmem_ros.srv import IngestTraces

__all__ = ["EncoderNode", "main"]

RETRY_S = 0.5  # a batch the store could not take now is sent again after this long
RESEND_S = 5.0  # a batch not acknowledged within this long is sent again (runtime.call_and_wait)


class EncoderNode(Node):
    # The executor only delivers messages and the store's acknowledgements; the worker thread does
    # the rest. One executor thread instead of four: rclpy's executor threads each rebuild the wait
    # set and contend for the interpreter lock on every message.
    executor_threads = 1

    def __init__(self, embedder: Embedder | None = None, **kwargs):
        super().__init__("encoder_node", **kwargs)
        config: MemoryConfig = declare_memory_parameters(self)
        depth = declare(self, "qos_depth", 1000,
                        "subscription queue depth for observations and actions", 1, 100000)
        self.max_batch = declare(self, "max_batch", 256, "most events embedded in one model call",
                                 1, 100000)
        self.max_queue = declare(self, "max_queue", 100000,
                                 "events held while the store is unreachable", 1, 10**7)
        self.call_timeout_s = declare(self, "call_timeout_s", 10.0,
                                      "wait for the store's acknowledgement, seconds", 0.1, 600.0)
        embedder = embedder or MiniLMEmbedder.configured(config.embedding)
        self.clock = node_clock(self)
        self.encoder = Encoder(
            embedder, Vocabulary.with_extra(config.encoding.entities, config.encoding.places),
            config, self.clock)
        qos = QoSProfile(depth=depth, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.VOLATILE)
        self.create_subscription(Observation, names.OBSERVATION,
                                 lambda m: self._enqueue(cv.observation_event, m), qos)
        self.create_subscription(ActionResult, names.ACTION_RESULT,
                                 lambda m: self._enqueue(cv.action_event, m), qos)
        self.client = self.create_client(IngestTraces, names.INGEST_TRACES)
        self.queue: deque = deque()  # (arrival on the steady clock, event)
        self.in_hand: list = []  # the batch being handed over, same pairs
        self.wake = threading.Condition()
        self.ingested = 0
        self.rejected = 0
        self.batches = 0
        self.store_reachable = True
        self._stop = False
        self.health = BacklogHealth(config.health)
        self.diagnostics = DiagnosticsPublisher(self, self._checks, config.health.period_s)
        self.worker = threading.Thread(target=self._work, name="encoder", daemon=True)
        self.worker.start()
        guard_parameters(self)

    def _now(self):
        """Return the node's time, or None while simulated time has not started."""
        try:
            return self.clock()
        except TimeUnavailable:
            return None

    def _enqueue(self, convert, msg) -> None:
        try:
            event = convert(msg)
            self.encoder.validate(event, self._now())
        except BrainMemError as exc:
            self.rejected += 1
            self.get_logger().warning(f"dropped a bad {type(msg).__name__}: {exc}")
            return
        except Exception:  # a defect here must cost one message, never the node
            self.rejected += 1
            self.get_logger().error(f"dropped a {type(msg).__name__}:\n{traceback.format_exc()}")
            return
        with self.wake:
            if len(self.queue) >= self.max_queue:
                self.rejected += 1
                self.health.dropped()
                self.get_logger().error(
                    "encoder queue full: the store is not keeping up; oldest event dropped",
                    throttle_duration_sec=10.0)
                self.queue.popleft()
            self.queue.append((time.monotonic(), event))
            self.wake.notify()

    def _checks(self):
        with self.wake:
            waiting = self.in_hand + list(self.queue)[:1]
            count = len(self.in_hand) + len(self.queue)
        oldest = time.monotonic() - min(t for t, _ in waiting) if waiting else None
        return [self.health.check(count, oldest, self.store_reachable, self.ingested,
                                  self.rejected)]

    def _work(self) -> None:
        while True:
            with self.wake:
                while not self.queue and not self._stop:
                    self.wake.wait(timeout=0.5)
                if self._stop and not self.queue:
                    return
                self.in_hand = [self.queue.popleft()
                                for _ in range(min(self.max_batch, len(self.queue)))]
            now = self._wait_for_time()
            if now is None:
                return
            batch = [event for _, event in self.in_hand if self._acceptable(event, now)]
            try:
                traces = self.encoder.prepare(batch)
            except BrainMemError as exc:  # validated just above, so only a model failure lands here
                self.get_logger().error(f"encoding failed, {len(batch)} events dropped: {exc}")
                traces = []
            if traces:
                self._hand_over(batch, traces)
            with self.wake:
                self.in_hand = []

    def _wait_for_time(self):
        """Wait until the clock has time (simulated time starts with the first /clock message).

        Events wait in the queue meanwhile, rather than being stamped with a made-up time. None
        when the node closes first.
        """
        while not self._stop:
            now = self._now()
            if now is not None:
                return now
            self.get_logger().warning("use_sim_time is true and no /clock has arrived: events wait",
                                      throttle_duration_sec=10.0)
            time.sleep(0.1)
        return None

    def _acceptable(self, event, now: float) -> bool:
        try:
            self.encoder.validate(event, now)
            return True
        except BrainMemError as exc:
            self.rejected += 1
            self.get_logger().warning(f"dropped an event: {exc}")
            return False

    def _hand_over(self, batch, traces) -> None:
        request = IngestTraces.Request(traces=[cv.trace_to_msg(t) for t in traces],
                                       embedding_model=self.encoder.embedder.name)
        while not self._stop:
            if not self.client.wait_for_service(timeout_sec=1.0):
                self.store_reachable = False
                self.get_logger().warning(f"waiting for {self.client.srv_name} ...",
                                          throttle_duration_sec=10.0)
                continue
            # A batch may arrive twice (the store answers a resend with the traces it holds).
            response = call_and_wait(self.client, request, self.call_timeout_s,
                                     resend_s=RESEND_S)
            if response is None:
                self.store_reachable = False
                self.get_logger().warning("the store did not acknowledge a batch in time; retrying")
                continue
            self.store_reachable = True
            if response.success:
                self.ingested += len(traces)
                self.batches += 1
            elif response.retry:
                self.get_logger().warning(
                    f"the store cannot take traces now, holding them: {response.message}",
                    throttle_duration_sec=10.0)
                time.sleep(RETRY_S)
                continue
            else:
                self.rejected += len(traces)
                self.get_logger().error(
                    f"the store refused {len(traces)} traces: {response.message}")
            return
        self.get_logger().error(f"stopped before the store took {len(traces)} traces")

    def close(self) -> None:
        """Hand over what is still queued (bounded wait), then stop the worker."""
        deadline = time.monotonic() + self.call_timeout_s
        while (self.queue or self.in_hand) and time.monotonic() < deadline:
            time.sleep(0.05)
        self._stop = True
        with self.wake:
            self.wake.notify_all()
        self.worker.join(timeout=self.call_timeout_s)


def main(args=None) -> int:
    return run([EncoderNode], args)


if __name__ == "__main__":
    sys.exit(main())
