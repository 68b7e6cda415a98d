"""A test-only peer for the DDS plumbing test, run in its own process.

It subscribes to /brainmem/observation and serves /retrieve_memory by returning the observations it
received whose text shares a word with the query. It is not the product's store: it only proves that
the package's messages and services cross process boundaries over real DDS.
"""
import sys
from pathlib import Path

from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy

from brainmem_ros.nodes import names
from brainmem_ros.msg import MemoryEntry, Observation
from brainmem_ros.srv import RetrieveMemory


class PlumbingPeer(Node):

    def __init__(self):
        super().__init__("plumbing_peer")
        self.seen: list[Observation] = []
        qos = QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE)
        self.create_subscription(Observation, names.OBSERVATION, self.seen.append, qos)
        self.create_service(RetrieveMemory, names.RETRIEVE_MEMORY, self.on_retrieve)

    def on_retrieve(self, request, response):
        words = set(request.query.lower().split())
        for obs in self.seen:
            if words & set(obs.text.lower().split()) and obs.agent_id == request.agent_id:
                response.memories.append(
                    MemoryEntry(content=obs.text, agent_id=obs.agent_id,
                                zone=MemoryEntry.ZONE_WORKING, entities=list(obs.entities),
                                routes=["lexical"], score=1.0))
        response.success = True
        response.memory_prompt = "\n".join(f"- {m.content}" for m in response.memories)
        return response


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from processes import serve_node

    serve_node(PlumbingPeer)
