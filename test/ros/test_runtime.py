"""How many executor threads each node process spins.

How many executor threads each node process spins: nodes whose callbacks cannot run side by side get
one, in a single-threaded executor (extra rclpy executor threads only contend for the interpreter
lock on every message), the store keeps enough for its three callback groups, and nodes sharing a
process keep two each.
"""
from brainmem_ros.nodes import names
from brainmem_ros.nodes.consolidation_node import ConsolidationNode
from brainmem_ros.nodes.encoder_node import EncoderNode
from brainmem_ros.nodes.runtime import BoundedCallbackGroup, executor_for, executor_threads
from brainmem_ros.nodes.store_node import StoreNode


def test_a_node_alone_in_its_process_gets_the_threads_it_needs():
    assert executor_threads([EncoderNode]) == 1
    assert executor_threads([ConsolidationNode]) == 1
    assert executor_threads([StoreNode]) == 4


def test_nodes_sharing_a_process_get_two_threads_each():
    assert executor_threads([StoreNode, EncoderNode, ConsolidationNode]) == 6


def test_one_thread_means_the_single_threaded_executor():
    import rclpy
    from rclpy.executors import MultiThreadedExecutor, SingleThreadedExecutor

    rclpy.init()
    try:
        assert isinstance(executor_for([EncoderNode]), SingleThreadedExecutor)
        assert isinstance(executor_for([StoreNode]), MultiThreadedExecutor)
    finally:
        rclpy.shutdown()


def test_a_bounded_group_lets_that_many_callbacks_run_at_once():
    group = BoundedCallbackGroup(2)
    entity = object()
    assert group.beginning_execution(entity) and group.beginning_execution(entity)
    assert not group.can_execute(entity) and not group.beginning_execution(entity)
    group.ending_execution(entity)
    assert group.can_execute(entity) and group.beginning_execution(entity)


def test_the_store_serves_as_many_retrievals_at_once_as_configured(tmp_path):
    import rclpy
    from rclpy.parameter import Parameter

    from brainmem_ros.core.embedding import HashingEmbedder

    rclpy.init()
    try:
        node = StoreNode(
            embedder=HashingEmbedder(), parameter_overrides=[
                Parameter("store.path", value=str(tmp_path / "m.db")),
                Parameter("concurrent_retrievals", value=3)
            ])
        retrieve = next(s for s in node.services if s.srv_name == names.RETRIEVE_MEMORY)
        assert isinstance(retrieve.callback_group,
                          BoundedCallbackGroup) and retrieve.callback_group.limit == 3
        # and one each for writes, working-memory views and upkeep (markers, diagnostics)
        assert executor_threads([node]) == 6
        node.close()
        node.destroy_node()
    finally:
        rclpy.shutdown()


class _LosesFirstAnswer:
    """A service client whose first request's answer never comes, as when a server drops it."""

    def __init__(self):
        from rclpy.task import Future

        self.Future, self.sent, self.removed = Future, 0, []

    def call_async(self, request):
        self.sent += 1
        future = self.Future()
        if self.sent > 1:
            future.set_result(f"answer to {request}")
        return future

    def remove_pending_request(self, future):
        self.removed.append(future)


def test_a_lost_answer_is_recovered_by_sending_again_and_only_where_asked():
    from brainmem_ros.nodes.runtime import call_and_wait, call_spinning

    client = _LosesFirstAnswer()
    assert call_and_wait(client, "where is the butter", 5.0, resend_s=0.2) == \
        "answer to where is the butter"
    assert client.sent == 2 and len(client.removed) == 1
    once = _LosesFirstAnswer()
    assert call_and_wait(once, "take the butter", 0.3) is None and once.sent == 1

    class Executor:
        def spin_until_future_complete(self, future, timeout_sec):
            pass  # the answer is there at once or never

    spun = _LosesFirstAnswer()
    assert call_spinning(Executor(), spun, "q", 5.0, resend_s=0.1) == "answer to q"
    assert spun.sent == 2


def test_a_teardown_stuck_in_dds_ends_the_process_instead_of_hanging_it(capfd):
    import threading

    from brainmem_ros.nodes.runtime import destroy_or_exit

    class Node:
        def __init__(self, stuck):
            self.stuck, self.destroyed = stuck, False

        def destroy_node(self):
            if self.stuck is not None:
                self.stuck.wait()  # as rcl_client_fini inside a Fast DDS deadlock
            self.destroyed = True

    exits = []
    healthy = [Node(None), Node(None)]
    destroy_or_exit(healthy, timeout_s=5.0, exit_process=exits.append)
    assert all(n.destroyed for n in healthy) and exits == []
    stuck = threading.Event()
    try:
        destroy_or_exit([Node(stuck)], timeout_s=0.2, exit_process=exits.append)
        assert exits == [0] and "DDS teardown did not finish" in capfd.readouterr().err
    finally:
        stuck.set()
