"""The topology library: each entry is a small schema of the parameters a paper gives, expanded
into a `spec.graph.Graph` (routers, host groups, links). A scenario names an entry by `kind`, or
describes a graph itself (`kind: graph`). Building the network from a graph is the testbed's job
(testbed/network.py); nothing here starts anything.
"""

from catnip.topologies.base import TopologyBase
from catnip.topologies.catnip import Dumbbell
from catnip.topologies.explicit import ExplicitGraph
from catnip.topologies.newcwv import TwoPairDumbbell
from catnip.topologies.tcpf import EdgeBottleneck
from catnip.topologies.tree import AggregationTree

LIBRARY: tuple[type[TopologyBase], ...] = (Dumbbell, TwoPairDumbbell, EdgeBottleneck, AggregationTree, ExplicitGraph)

__all__ = ["LIBRARY"]  # the entry point (pyproject.toml); each class is its own module's
