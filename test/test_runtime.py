"""How many executor threads each node process spins: nodes whose callbacks cannot run side by side
get one (extra rclpy executor threads only contend for the interpreter lock on every message), the
store keeps enough for its three callback groups, and nodes sharing a process keep two each."""
from brainmem_ros.nodes.consolidation_node import ConsolidationNode
from brainmem_ros.nodes.encoder_node import EncoderNode
from brainmem_ros.nodes.runtime import executor_threads
from brainmem_ros.nodes.store_node import StoreNode


def test_a_node_alone_in_its_process_gets_the_threads_it_needs():
    assert executor_threads([EncoderNode]) == 1
    assert executor_threads([ConsolidationNode]) == 1
    assert executor_threads([StoreNode]) == 4


def test_nodes_sharing_a_process_get_two_threads_each():
    assert executor_threads([StoreNode, EncoderNode, ConsolidationNode]) == 6
