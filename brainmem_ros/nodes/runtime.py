"""Spinning nodes: executors, a clean close on signals, exit 1 on bad parameters.

Spinning nodes: one executor for one or several nodes, a clean close on Ctrl-C or SIGTERM, exit 1 on
bad parameters (the message says which).

The executor keeps spinning while nodes close, so a closing encoder can still hand its queue to the
store and get the acknowledgement; nodes with a ``close()`` are closed in the order given.
"""
from __future__ import annotations

import gc
import os
import sys
import threading
import time
from typing import Callable, Optional, Sequence

import rclpy
from rclpy.callback_groups import CallbackGroup
from rclpy.executors import MultiThreadedExecutor, SingleThreadedExecutor
from rclpy.signals import SignalHandlerOptions

from brainmem_ros.core.errors import BrainMemError, TimeUnavailable
from brainmem_ros.nodes.signals import hold

__all__ = [
    "run", "spin_until_signal", "call_and_wait", "call_spinning", "wait_for_subscriber", "release",
    "BoundedCallbackGroup", "executor_for", "node_clock", "destroy_or_exit", "finished_within"
]

TEARDOWN_S = 10.0  # the DDS teardown after the nodes closed; past it the process ends anyway


class BoundedCallbackGroup(CallbackGroup):
    """Run the callbacks of its entities side by side, at most ``limit`` at a time.

    Callbacks of its entities run side by side, at most ``limit`` at a time: between rclpy's
    mutually exclusive group (one) and its reentrant one (as many as the executor has threads).
    """

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit
        self._running = 0
        self._lock = threading.Lock()

    def can_execute(self, entity) -> bool:
        with self._lock:
            return self._running < self.limit

    def beginning_execution(self, entity) -> bool:
        with self._lock:
            if self._running < self.limit:
                self._running += 1
                return True
            return False

    def ending_execution(self, entity) -> None:
        with self._lock:
            self._running -= 1


def call_and_wait(client, request, timeout_s: float, resend_s: Optional[float] = None):
    """Call a service from a worker thread and wait at most ``timeout_s``.

    Call a service from a worker thread (the executor spins elsewhere) and wait at most
    ``timeout_s``; the response, or None when none came (the call is then cancelled).

    ``resend_s``: send the request again when no answer came within that long, for requests that
    may be received twice. A server drops its response when it has not yet discovered the client's
    response reader (Fast DDS waits 100 ms for it, then rclpy warns "failed to send response"); on
    a loaded machine a client's first call can meet that, and only a resend recovers it.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        done = threading.Event()
        future = client.call_async(request)
        future.add_done_callback(lambda _: done.set())
        left = deadline - time.monotonic()
        if done.wait(min(left, resend_s) if resend_s else left) and future.result() is not None:
            return future.result()
        future.cancel()
        client.remove_pending_request(future)
        if time.monotonic() >= deadline:
            return None


def wait_for_subscriber(publisher, timeout_s: float, every_s: float = 0.02) -> bool:
    """Wait until ``publisher`` has matched a subscriber (True), at most ``timeout_s``.

    A volatile topic gives nobody what was published before it was discovered.
    """
    deadline = time.monotonic() + timeout_s
    while publisher.get_subscription_count() < 1:
        if time.monotonic() >= deadline:
            return False
        time.sleep(every_s)
    return True


def call_spinning(executor, client, request, timeout_s: float, resend_s: Optional[float] = None):
    """Call a service and spin ``executor`` in this thread until the answer, ``timeout_s`` at most.

    The response, or None when none came. ``resend_s`` as in ``call_and_wait``.
    """
    deadline = time.monotonic() + timeout_s
    while (left := deadline - time.monotonic()) > 0:
        future = client.call_async(request)
        executor.spin_until_future_complete(future,
                                            timeout_sec=min(left, resend_s) if resend_s else left)
        if future.done():
            return future.result()
        client.remove_pending_request(future)
    return None


def executor_threads(nodes: Sequence) -> int:
    """Return how many executor threads a process of these nodes spins.

    Executor threads: a node alone in its process may say how many it needs (``executor_threads``);
    otherwise four, and two per node when several share a process.
    """
    if len(nodes) == 1:
        return getattr(nodes[0], "executor_threads", 4)
    return max(4, 2 * len(nodes))


def executor_for(nodes: Sequence):
    """Make the executor for these nodes.

    A single-threaded executor where one thread is asked for: rclpy's multi-threaded one with a
    single worker spins its own thread on every message until the worker has taken it (measured
    under `brainmem-ros loadtest`: encoder_node's executor thread alone took 30% of a core for 50
    observations a second; the whole process takes 17% with the single-threaded one).
    """
    threads = executor_threads(nodes)
    return SingleThreadedExecutor() if threads == 1 else MultiThreadedExecutor(num_threads=threads)


def spin_until_signal(nodes: Sequence, close_order: Optional[Sequence] = None,
                      on_ready: Optional[Callable[[], None]] = None) -> None:
    """Spin the nodes until a stop is asked for (``signals``), then close them in order."""
    stop = hold()
    executor = executor_for(nodes)
    for node in nodes:
        executor.add_node(node)
    # What start-up made (modules, the model, the opened store) lives as long as the process;
    # frozen, the cyclic collector stops walking it on every full collection while requests are
    # served (docs/design.md, "Garbage collection").
    gc.collect()
    gc.freeze()
    spinner = threading.Thread(target=executor.spin, name="executor", daemon=True)
    spinner.start()
    if on_ready and not stop.is_set():
        on_ready()
    try:
        while not stop.wait(0.2):
            if not spinner.is_alive():
                break
    finally:
        for node in close_order or nodes:
            closer = getattr(node, "close", None)
            if closer:
                try:
                    closer()
                except Exception as exc:  # one node failing to close must not keep the others open
                    print(f"[ERROR] closing {node.get_name()}: {exc}", file=sys.stderr, flush=True)
        executor.shutdown(timeout_sec=5.0)
        # A daemon thread still inside rclpy's wait when the interpreter finalises is unwound
        # through native frames that may not be, and the process aborts after a clean close.
        spinner.join(timeout=5.0)
        # The nodes are among the frozen objects: ``release`` must be able to collect them.
        gc.unfreeze()
        destroy_or_exit(nodes)


def finished_within(teardown: Callable[[], None], timeout_s: float) -> bool:
    """Run ``teardown`` on a daemon thread; False if it has not finished after ``timeout_s``.

    For DDS teardowns, which can wait forever inside Fast DDS: the caller goes on (or ends the
    process) instead of hanging with it.
    """
    finished = threading.Event()

    def run_it() -> None:
        try:
            teardown()
        finally:
            finished.set()

    threading.Thread(target=run_it, name="dds-teardown", daemon=True).start()
    return finished.wait(timeout_s)


def destroy_or_exit(nodes: Sequence, timeout_s: float = TEARDOWN_S,
                    exit_process: Callable[[int], None] = os._exit) -> None:
    """Destroy the nodes' DDS entities; end the process (exit 0) if that takes over ``timeout_s``.

    Fast DDS can deadlock deleting an endpoint while one of its receive threads waits on the
    participant (seen once in a consolidation_node's ``rcl_client_fini`` after a clean stop: the
    process never ended, and nothing but SIGKILL reaches a thread stuck in native code). Called
    after the nodes closed (the store flushed, its RAM snapshot saved), so ending the process
    loses nothing.
    """
    def destroy() -> None:
        for node in nodes:
            node.destroy_node()

    if not finished_within(destroy, timeout_s):
        print(f"[WARN] the DDS teardown did not finish within {timeout_s:.0f} s (a Fast DDS "
              "deadlock deleting an endpoint); ending the process: the nodes had closed",
              file=sys.stderr, flush=True)
        sys.stdout.flush()
        exit_process(0)


def run(node_factories: Sequence[Callable], args=None) -> int:
    """Start the nodes (``main()`` of each node module) and spin them until a stop is asked for.

    Exit 1 with a clear message on bad parameters. Signals are held from before ``rclpy.init`` to
    the end, so a stop asked for during start-up or a second one during the teardown ends the
    process cleanly (exit 0).
    """
    hold()
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    nodes = []
    try:
        for factory in node_factories:
            nodes.append(factory())
    except BrainMemError as exc:
        print(f"[FATAL] cannot start: {exc}", file=sys.stderr, flush=True)
        for node in nodes:
            getattr(node, "close", lambda: None)()
            node.destroy_node()
        rclpy.try_shutdown()
        return 1
    try:
        spin_until_signal(nodes)
    finally:
        rclpy.try_shutdown()
        release(nodes)
    return 0


def node_clock(node) -> Callable[[], float]:
    """Return the node's clock in seconds, for the core (``core.clock``).

    With ``use_sim_time`` it follows ``/clock``; before the first ``/clock`` message it has no time
    and raises ``TimeUnavailable`` rather than stamp memories at zero.
    """
    clock = node.get_clock()

    def now() -> float:
        nanoseconds = clock.now().nanoseconds
        if nanoseconds == 0 and node.get_parameter("use_sim_time").value:
            raise TimeUnavailable("use_sim_time is true and no /clock message has arrived yet")
        return nanoseconds / 1e9

    return now


def release(nodes: list) -> None:
    """Free the nodes now, not at interpreter exit.

    A node held in a reference cycle (callbacks that capture it) is otherwise torn down during
    finalisation, after rclpy, and its native handles abort the process ("terminate called without
    an active exception", exit 134).
    """
    nodes.clear()
    gc.unfreeze()
    gc.collect()
